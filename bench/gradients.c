/*
 * bench_gradients: a data-parallel training step's gradient reduction. 200 float32 gradients of
 * a fixed size mix (1 KiB to 1 MiB, evenly spread in log size, about 30 MB in all) are psum'd
 * over every device three ways, all measured in the same run:
 *   - spmd_psum_many: one collective over the 200 blocks;
 *   - one spmd_psum per array (200 collectives);
 *   - the bound: one MPI_Allreduce of the 200 gradients already concatenated, in place (one
 *     device per process; MPI runs only);
 *   - the like of psum_many's call, which leaves its inputs as they are: the same MPI_Allreduce
 *     from the concatenation into another buffer (Open MPI copies the input over first).
 * Every result is checked (#wrong). Medians over --rounds rounds of --iters steps each.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "host_memory.h"
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

#define CHECK(call) BENCH_CHECK("bench_gradients", call)
#define NGRADS 200

typedef struct config {
    int iters, rounds, grads;
    const char *json_path;
} config;

/* Elements of gradient i: 1 KiB * 2^(10 j / (n - 1)) bytes for a fixed permutation j of i,
 * rounded to 64 elements. */
static int64_t grad_elems(int i, int n)
{
    int j = (i * 37) % n; /* 37 is prime to 200: a permutation */
    double bytes = 1024.0 * pow(2.0, 10.0 * j / (n - 1));
    int64_t elems = (int64_t)(bytes / 4 / 64) * 64;
    return elems < 64 ? 64 : elems;
}

static float grad_value(int device, int i, int64_t k)
{
    return (float)((device * 5 + i * 3 + (int)(k % 11)) % 13);
}

typedef struct job {
    int grads, iters, many;
} job;

/* Outputs: [0] the slowest device's seconds per step, [1] the number of wrong elements. */
static spmd_status step_body(spmd_ctx *ctx, int nin, const spmd_block *inb, int nout,
                             spmd_block *outb, void *user)
{
    (void)nin, (void)inb, (void)nout;
    const job *j = user;
    int d = 0, n = 0;
    CHECK(spmd_axis_index(ctx, "x", &d));
    CHECK(spmd_axis_size(ctx, "x", &n));
    spmd_block in[NGRADS], out[NGRADS], t, w;
    for (int i = 0; i < j->grads; i++) {
        int64_t e = grad_elems(i, j->grads);
        CHECK(spmd_ctx_alloc(ctx, 1, &e, SPMD_DTYPE_F32, &in[i]));
        CHECK(spmd_ctx_alloc(ctx, 1, &e, SPMD_DTYPE_F32, &out[i]));
        for (int64_t k = 0; k < e; k++)
            ((float *)in[i].data)[k] = grad_value(d, i, k);
    }
    int64_t one = 1;
    CHECK(spmd_ctx_alloc(ctx, 1, &one, SPMD_DTYPE_F64, &t));
    CHECK(spmd_ctx_alloc(ctx, 1, &one, SPMD_DTYPE_F64, &w));
    spmd_status st = SPMD_OK;
    double start = 0;
    for (int k = -2; k < j->iters && st == SPMD_OK; k++) { /* two warm-up steps */
        if (k == 0) {
            ((double *)t.data)[0] = 0; /* a tiny psum as a barrier before timing */
            st = spmd_psum(ctx, &t, &w, "x");
            start = bench_now_s();
        }
        if (j->many)
            st = st == SPMD_OK ? spmd_psum_many(ctx, j->grads, in, out, "x") : st;
        for (int i = 0; !j->many && i < j->grads && st == SPMD_OK; i++)
            st = spmd_psum(ctx, &in[i], &out[i], "x");
    }
    ((double *)t.data)[0] = (bench_now_s() - start) / j->iters;
    if (st != SPMD_OK)
        return st;
    /* every process's clock stops before any checks its values: a check would take a core from
     * a process still timing its last step where processes outnumber the cores */
    CHECK(spmd_pmax(ctx, &t, &outb[0], "x"));
    double wrong = 0;
    for (int i = 0; i < j->grads; i++) {
        int64_t e = grad_elems(i, j->grads);
        for (int64_t k = 0; k < e; k++) {
            float want = 0;
            for (int dv = 0; dv < n; dv++)
                want += grad_value(dv, i, k);
            wrong += ((float *)out[i].data)[k] != want;
        }
    }
    ((double *)w.data)[0] = wrong;
    return spmd_psum(ctx, &w, &outb[1], "x");
}

static double measure(spmd_mesh *mesh, const spmd_spec *replicated, job *j, double *wrong)
{
    const spmd_out_desc descs[2] = {{1, {1}, SPMD_DTYPE_F64}, {1, {1}, SPMD_DTYPE_F64}};
    const spmd_spec *specs[2] = {replicated, replicated};
    spmd_array *outs[2] = {NULL, NULL};
    CHECK(spmd_shard_map(mesh, step_body, j, 0, NULL, NULL, 2, descs, specs, NULL, outs));
    double t = 0, w = 0;
    CHECK(spmd_array_to_host(outs[0], &t, sizeof t));
    CHECK(spmd_array_to_host(outs[1], &w, sizeof w));
    spmd_array_destroy(outs[0]);
    spmd_array_destroy(outs[1]);
    *wrong += w;
    return t;
}

#ifdef SPMD_HAVE_MPI
/* One MPI_Allreduce of the concatenated gradients, in place or (separate) into another buffer,
 * seconds per step (slowest). */
static double mpi_concatenated(size_t total, int iters, int separate)
{
    MPI_Comm comm = spmd_mpi_comm();
    float *buf = bench_host_alloc(total * sizeof *buf);
    float *into = separate ? bench_host_alloc(total * sizeof *into) : buf;
    if (!buf || !into) {
        fprintf(stderr, "bench_gradients: out of memory for the MPI baseline\n");
        MPI_Abort(comm, 1);
    }
    for (size_t k = 0; k < total; k++)
        buf[k] = (float)(k % 13);
    double elapsed = 0;
    for (int phase = 0; phase < 2; phase++) {
        int reps = phase == 0 ? 2 : iters;
        MPI_Barrier(comm);
        double start = bench_now_s();
        for (int k = 0; k < reps; k++)
            MPI_Allreduce(separate ? buf : MPI_IN_PLACE, into, (int)total, MPI_FLOAT, MPI_SUM,
                          comm);
        elapsed = (bench_now_s() - start) / reps;
    }
    double slowest = elapsed;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
    bench_host_free(buf, total * sizeof *buf);
    if (separate)
        bench_host_free(into, total * sizeof *into);
    return slowest;
}
#endif

static void parse(int argc, char **argv, config *c)
{
    static const struct option options[] = {
        {"iters", required_argument, NULL, 'n'}, {"rounds", required_argument, NULL, 'r'},
        {"grads", required_argument, NULL, 'g'}, {"json", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    *c = (config){10, 3, NGRADS, NULL};
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case 'n':
            c->iters = atoi(optarg);
            break;
        case 'r':
            c->rounds = atoi(optarg);
            break;
        case 'g':
            c->grads = atoi(optarg);
            break;
        case 'j':
            c->json_path = optarg;
            break;
        default:
            printf("usage: bench_gradients [--iters N] [--rounds N] [--grads N (2..%d)] "
                   "[--json FILE]\n",
                   NGRADS);
            exit(opt == 'h' ? 0 : 2);
        }
    }
    if (c->iters < 1 || c->rounds < 1 || c->rounds > 99 || c->grads < 2 || c->grads > NGRADS) {
        fprintf(stderr, "bench_gradients: bad arguments (see --help)\n");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    config cfg;
    parse(argc, argv, &cfg);
    CHECK(spmd_init(NULL));
    bench_warm_malloc(); /* before any baseline: host_memory.h */
    int me = spmd_process_index(), procs = spmd_process_count(), n = spmd_device_count();
    const char *name = "x";
    spmd_mesh *mesh = NULL;
    spmd_spec *replicated = NULL;
    CHECK(spmd_mesh_create(1, &n, &name, NULL, 0, &mesh));
    CHECK(spmd_spec_parse("", &replicated));
    size_t total = 0;
    for (int i = 0; i < cfg.grads; i++)
        total += (size_t)grad_elems(i, cfg.grads);
    int one_device_each = procs > 1 && spmd_local_device_count() == 1;
    double many[100], per_array[100], bound[100], separate[100], wrong = 0;
    for (int r = 0; r < cfg.rounds; r++) {
        job jm = {cfg.grads, cfg.iters, 1}, jp = {cfg.grads, cfg.iters, 0};
        many[r] = measure(mesh, replicated, &jm, &wrong);
        per_array[r] = measure(mesh, replicated, &jp, &wrong);
        bound[r] = separate[r] = 0;
#ifdef SPMD_HAVE_MPI
        if (one_device_each) {
            bound[r] = mpi_concatenated(total, cfg.iters, 0);
            separate[r] = mpi_concatenated(total, cfg.iters, 1);
        }
#endif
    }
    double tm = bench_quantile(many, cfg.rounds, 0.5),
           tp = bench_quantile(per_array, cfg.rounds, 0.5),
           tb = bench_quantile(bound, cfg.rounds, 0.5),
           ts = bench_quantile(separate, cfg.rounds, 0.5);
    cJSON *root = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(root, "rows");
    cJSON_AddNumberToObject(root, "processes", procs);
    cJSON_AddNumberToObject(root, "devices", n);
    cJSON_AddNumberToObject(root, "gradients", cfg.grads);
    cJSON_AddNumberToObject(root, "bytes", (double)total * 4);
    const char *methods[2] = {"psum_many", "psum per array"};
    double times[2] = {tm, tp};
    for (int k = 0; k < 2; k++) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddStringToObject(row, "method", methods[k]);
        cJSON_AddNumberToObject(row, "time_us", times[k] * 1e6);
        if (tb > 0) {
            cJSON_AddNumberToObject(row, "mpi_concat_us", tb * 1e6);
            cJSON_AddNumberToObject(row, "ratio", tb / times[k]);
            cJSON_AddNumberToObject(row, "mpi_separate_us", ts * 1e6);
            cJSON_AddNumberToObject(row, "separate_ratio", ts / times[k]);
        }
        cJSON_AddNumberToObject(row, "wrong", wrong);
        cJSON_AddItemToArray(rows, row);
    }
    if (me == 0) {
        printf("# libspmd bench_gradients: %d process(es) x %d device(s), %d float32 gradients, "
               "%.1f MB\n",
               procs, spmd_local_device_count(), cfg.grads, (double)total * 4 / 1e6);
        printf("  psum_many        %10.1f us\n  psum per array   %10.1f us\n", tm * 1e6, tp * 1e6);
        if (tb > 0)
            printf("  MPI_Allreduce of the concatenation %10.1f us: psum_many %.2f of it, per "
                   "array %.2f\n",
                   tb * 1e6, tb / tm, tb / tp);
        if (ts > 0)
            printf("  MPI_Allreduce of it into another buffer %10.1f us: psum_many %.2f of it, "
                   "per array %.2f\n",
                   ts * 1e6, ts / tm, ts / tp);
        printf("  #wrong %.0f\n", wrong);
        if (cfg.json_path)
            bench_write_json(root, cfg.json_path);
    }
    cJSON_Delete(root);
    spmd_spec_destroy(replicated);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return wrong == 0 ? 0 : 1;
}
