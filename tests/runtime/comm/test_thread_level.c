/*
 * A program that initializes MPI itself at the level given as argument (single, funneled,
 * serialized, multiple): below MPI_THREAD_SERIALIZED spmd_init refuses, saying which level to
 * request, and leaves MPI usable; from SERIALIZED up a shard_map with a psum across processes
 * and a multihost allgather give the reference values.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static spmd_status sum_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "i");
}

/* x[i] = i + 1 over every device, one element each; psum over 'i' leaves n(n+1)/2 everywhere. */
static void run_collectives(void)
{
    int n = spmd_device_count();
    const char *names[1] = {"i"};
    spmd_mesh *mesh = NULL;
    spmd_sharding *rows = NULL;
    spmd_spec *spec = NULL;
    spmd_array *x = NULL, *y = NULL;
    CHECK(n <= 64, "too many devices");
    float host[64], got[64];
    for (int i = 0; i < n; i++)
        host[i] = (float)(i + 1);
    int64_t shape[1] = {n};
    spmd_status st = spmd_mesh_create(1, &n, names, NULL, 0, &mesh);
    if (st == SPMD_OK)
        st = spmd_sharding_create_parse(mesh, "'i'", &rows);
    if (st == SPMD_OK)
        st = spmd_spec_parse("'i'", &spec);
    if (st == SPMD_OK) {
        int me = spmd_process_index(), local = spmd_local_device_count();
        int64_t local_shape[1] = {local};
        st = spmd_array_from_process_local_data(rows, host + me * local, 1, local_shape, shape,
                                                SPMD_DTYPE_F32, &x);
    }
    const spmd_spec *specs[1] = {spec};
    spmd_out_desc desc = {1, {n}, SPMD_DTYPE_F32};
    if (st == SPMD_OK)
        st = spmd_shard_map(mesh, sum_body, NULL, 1, &x, specs, 1, &desc, specs, NULL, &y);
    if (st == SPMD_OK)
        st = spmd_process_allgather(y, 1, got, sizeof got);
    CHECK(st == SPMD_OK, "collectives: %s", spmd_last_error());
    for (int i = 0; st == SPMD_OK && i < n; i++)
        CHECK(got[i] == (float)(n * (n + 1) / 2), "element %d is %g, want %d", i, got[i],
              n * (n + 1) / 2);
    spmd_array_destroy(x);
    spmd_array_destroy(y);
    spmd_spec_destroy(spec);
    spmd_sharding_destroy(rows);
    spmd_mesh_destroy(mesh);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *arg, *name;
        int level;
    } levels[] = {{"single", "MPI_THREAD_SINGLE", MPI_THREAD_SINGLE},
                  {"funneled", "MPI_THREAD_FUNNELED", MPI_THREAD_FUNNELED},
                  {"serialized", "MPI_THREAD_SERIALIZED", MPI_THREAD_SERIALIZED},
                  {"multiple", "MPI_THREAD_MULTIPLE", MPI_THREAD_MULTIPLE}};
    int k = 0;
    while (k < 4 && !(argc > 1 && strcmp(argv[1], levels[k].arg) == 0))
        k++;
    if (k == 4) {
        fprintf(stderr, "usage: %s single|funneled|serialized|multiple\n", argv[0]);
        return 2;
    }
    int provided = -1;
    MPI_Init_thread(&argc, &argv, levels[k].level, &provided);
    spmd_status st = spmd_init(NULL);
    if (provided < MPI_THREAD_SERIALIZED) {
        CHECK(st == SPMD_ERR_UNSUPPORTED, "spmd_init returned %s", spmd_status_name(st));
        const char *msg = spmd_last_error();
        CHECK(strstr(msg, levels[provided].name) && strstr(msg, "MPI_THREAD_SERIALIZED") &&
                  strstr(msg, "MPI_Init_thread"),
              "message: %s", msg);
        CHECK(!spmd_is_initialized(), "initialized after a refusal");
    } else {
        CHECK(provided == levels[k].level, "asked for %s, got level %d", levels[k].name, provided);
        CHECK(st == SPMD_OK, "spmd_init: %s", spmd_last_error());
        if (st == SPMD_OK) {
            run_collectives();
            CHECK(spmd_finalize() == SPMD_OK, "spmd_finalize: %s", spmd_last_error());
        }
    }
    /* MPI is still the program's, and works */
    int any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}
