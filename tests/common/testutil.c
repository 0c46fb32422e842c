/* The helpers that start and stop libspmd and build meshes on its devices. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <spmd/config.h>
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

void spmd_test_init(void)
{
    spmd_status st = spmd_init(NULL);
    if (st != SPMD_OK) {
        fprintf(stderr, "spmd_init failed: %s: %s\n", spmd_status_name(st), spmd_last_error());
        exit(1);
    }
}

static void setup_or_exit(spmd_status st, const char *what)
{
    if (st != SPMD_OK) {
        fprintf(stderr, "%s failed: %s: %s\n", what, spmd_status_name(st), spmd_last_error());
        exit(1);
    }
}

spmd_test_line spmd_test_line_create(int per_device, const float *host)
{
    spmd_test_line l = {NULL, NULL, NULL, NULL};
    int n = spmd_device_count();
    const char *names[1] = {"i"};
    setup_or_exit(spmd_mesh_create(1, &n, names, NULL, 0, &l.mesh), "spmd_mesh_create");
    setup_or_exit(spmd_spec_parse("'i'", &l.split), "spmd_spec_parse");
    setup_or_exit(spmd_spec_parse("", &l.replicated), "spmd_spec_parse");
    spmd_sharding *sh = NULL;
    setup_or_exit(spmd_sharding_create(l.mesh, l.split, &sh), "spmd_sharding_create");
    const int64_t shape[1] = {(int64_t)per_device * n};
    setup_or_exit(spmd_device_put(host, 1, shape, SPMD_DTYPE_F32, sh, &l.x), "spmd_device_put");
    spmd_sharding_destroy(sh);
    return l;
}

spmd_array *spmd_test_each_device(spmd_fn fn, void *user, size_t bytes)
{
    static const float zeros[SPMD_TEST_MAX_DEVICES];
    spmd_test_line line = spmd_test_line_create(1, zeros); /* its mesh and 'i' */
    const spmd_out_desc desc = {1, {(int64_t)spmd_device_count() * (int64_t)bytes}, SPMD_DTYPE_U8};
    spmd_array *y = NULL;
    spmd_status st = spmd_shard_map(line.mesh, fn, user, 0, NULL, NULL, 1, &desc,
                                    (const spmd_spec *[]){line.split}, NULL, &y);
    SPMD_TEST_CHECK(st == SPMD_OK, "fn on every device: %s", spmd_last_error());
    spmd_test_line_destroy(&line);
    return st == SPMD_OK ? y : NULL;
}

static spmd_status run_block_op(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout;
    spmd_test_op_run run = *(spmd_test_op_run *)user;
    return run(ctx, out[0].data) == 0 ? SPMD_OK : SPMD_ERR_INTERNAL;
}

int spmd_test_block_op(spmd_test_op_run run, size_t bytes, spmd_test_op_check check)
{
    int failures = run(NULL, NULL);
    spmd_array *y = spmd_test_each_device(run_block_op, &run, bytes);
    unsigned char *got = malloc(bytes ? bytes : 1);
    for (int k = 0; y && got && k < spmd_array_num_shards(y); k++) {
        spmd_status st = spmd_array_shard_to_host(y, k, got, bytes);
        SPMD_TEST_CHECK(st == SPMD_OK, "shard %d: %s", k, spmd_last_error());
        if (st == SPMD_OK)
            check(got, k);
    }
    free(got);
    spmd_array_destroy(y);
    return failures;
}

int spmd_test_kernel_gives_huge_pages(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128] = "";
    if (!f)
        return 0;
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    return got && !strstr(line, "[never]");
}

int spmd_test_mapping_of(const void *p, spmd_test_mapping *out)
{
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0)
        return 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return 0;
    char line[1024];
    int inside = 0, found = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo = 0, hi = 0;
        char dash = 0;
        if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            if (inside)
                out->lo = lo, out->hi = hi;
            continue;
        }
        if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            out->huge = strstr(line, " hg") != NULL;
            found = 1;
            break;
        }
    }
    fclose(f);
    return found;
}

int spmd_test_init_devices(int most)
{
    spmd_test_init();
    int n = spmd_device_count();
    if (n > most) {
        printf("skipped: %d devices, more than the %d this test holds\n", n, most);
        spmd_test_finish(0);
        exit(SPMD_TEST_SKIP);
    }
    return n;
}

void spmd_test_line_destroy(spmd_test_line *l)
{
    spmd_array_destroy(l->x);
    spmd_spec_destroy(l->split);
    spmd_spec_destroy(l->replicated);
    spmd_mesh_destroy(l->mesh);
    memset(l, 0, sizeof *l);
}

int spmd_test_finish(int failures)
{
    int any = failures != 0;
#ifdef SPMD_HAVE_MPI
    if (spmd_process_count() > 1) {
        int mine = any;
        MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, spmd_mpi_comm());
    }
#endif
    spmd_status st = spmd_finalize();
    if (st != SPMD_OK) {
        fprintf(stderr, "spmd_finalize failed: %s\n", spmd_last_error());
        any = 1;
    }
    return any ? 1 : 0;
}

void spmd_test_mesh_build(spmd_test_mesh *m, const char *label, int ndim, const int *shape,
                          const char *const *names, const int *ids)
{
    memset(m, 0, sizeof *m);
    m->ndim = ndim;
    m->size = 1;
    for (int k = 0; k < ndim; k++) {
        m->shape[k] = shape[k];
        m->names[k] = names[k];
        m->size *= shape[k];
    }
    assert_true(m->size <= SPMD_TEST_MAX_DEVICES);
    if (label) {
        int n = snprintf(m->label, sizeof m->label, "%s(", label);
        for (int k = 0; k < ndim; k++)
            n += snprintf(m->label + n, sizeof m->label - (size_t)n, "%s%s=%d", k ? "," : "",
                          names[k], shape[k]);
        snprintf(m->label + n, sizeof m->label - (size_t)n, ")");
    }
    int per_process = spmd_local_device_count(), me = spmd_process_index();
    for (int f = 0; f < m->size; f++) {
        m->ids[f] = ids ? ids[f] : f;
        if (m->ids[f] / per_process == me)
            m->local_flat[m->num_local++] = f;
    }
    assert_ok(spmd_mesh_create(ndim, shape, names, ids, ids ? m->size : 0, &m->mesh));
}
