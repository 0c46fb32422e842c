/*
 * Migration guide, page 1: the model. One function runs under both spellings and reports the
 * block it was given: spmd_pmap hands each device x[i] (rank reduced), spmd_shard_map hands it
 * x[i:i+1] (rank preserved). Then a 2-D mesh and a partition spec say which box of an array
 * each device holds.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_model
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_model
 */
#include <stdio.h>
#include <stdlib.h>

#include <spmd.h>

/* On failure the message says what was wrong and what to do. Exit rather than finalize: under
 * mpirun the other processes may wait in a collective, and mpirun stops them. */
#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "%s failed: %s\n", #call, spmd_last_error());                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { N = 8, COLS = 4 };

/* Reports what this device was given: rank, extents (0 when absent) and the first value. */
static spmd_status describe(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)ctx, (void)nin, (void)nout, (void)user;
    int32_t *seen = out[0].data; /* 4 values: pmap's out is (4,), shard_map's (1, 4) */
    seen[0] = in[0].ndim;
    seen[1] = (int32_t)in[0].shape[0];
    seen[2] = in[0].ndim > 1 ? (int32_t)in[0].shape[1] : 0;
    seen[3] = (int32_t)((const float *)in[0].data)[0];
    return SPMD_OK;
}

static void print_seen(const char *how, int device, const int32_t *seen)
{
    if (seen[0] == 1)
        printf("%s: device %d sees shape (%d,), first value %d\n", how, device, seen[1], seen[3]);
    else
        printf("%s: device %d sees shape (%d, %d), first value %d\n", how, device, seen[1], seen[2],
               seen[3]);
}

int main(void)
{
    CHECK(spmd_init(NULL));
    if (spmd_device_count() != N) {
        fprintf(stderr,
                "needs 8 devices, got %d; run with SPMD_NUM_CPU_DEVICES=8, or mpirun -np 4 "
                "-x SPMD_NUM_CPU_DEVICES=2\n",
                spmd_device_count());
        spmd_finalize();
        return 2;
    }
    int L = spmd_local_device_count(), first_row = spmd_local_device_id(0);
    float x[N * COLS]; /* arange(32).reshape(8, 4), known to every process */
    for (int k = 0; k < N * COLS; k++)
        x[k] = (float)k;

    /* pmap: this process's rows, one per local device (host-local: (L, 4)). */
    const void *rows[N];
    int local_ids[N];
    for (int k = 0; k < L; k++) {
        rows[k] = &x[(first_row + k) * COLS];
        local_ids[k] = spmd_local_device_id(k);
    }
    const int64_t row_shape[1] = {COLS};
    spmd_array *x_local = NULL, *seen_local = NULL;
    CHECK(spmd_device_put_sharded(L, rows, 1, row_shape, SPMD_DTYPE_F32, local_ids, &x_local));
    const spmd_out_desc per_device = {1, {4}, SPMD_DTYPE_I32}; /* fn's output, rank reduced */
    CHECK(spmd_pmap(describe, NULL, 1, &x_local, NULL, 1, &per_device, NULL, "i", NULL, 0, NULL,
                    &seen_local));
    int32_t seen[N * 4];
    CHECK(spmd_array_to_host(seen_local, seen, sizeof seen));

    /* shard_map: the global (8, 4) array on a mesh axis 'i', rows split by P('i'). */
    const int mesh_shape[1] = {N};
    const char *axis[1] = {"i"};
    spmd_mesh *mesh = NULL;
    spmd_sharding *rows_sharding = NULL;
    spmd_array *xg = NULL, *seen_global = NULL;
    CHECK(spmd_mesh_create(1, mesh_shape, axis, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'i'", &rows_sharding));
    const int64_t shape[2] = {N, COLS};
    CHECK(spmd_device_put(x, 2, shape, SPMD_DTYPE_F32, rows_sharding, &xg));
    const spmd_spec *specs[1] = {spmd_sharding_spec(rows_sharding)};
    const spmd_out_desc global = {2, {N, 4}, SPMD_DTYPE_I32}; /* the whole output */
    CHECK(
        spmd_shard_map(mesh, describe, NULL, 1, &xg, specs, 1, &global, specs, NULL, &seen_global));
    int32_t seen_by_shard_map[N * 4]; /* this process's devices' rows, in local order */
    for (int s = 0; s < spmd_array_num_shards(seen_global); s++)
        CHECK(spmd_array_shard_to_host(seen_global, s, &seen_by_shard_map[4 * s],
                                       4 * sizeof(int32_t)));

    /* A 2-D mesh: which box of the (8, 4) array each device holds under P('i', 'j'). */
    const int grid[2] = {4, 2};
    const char *names[2] = {"i", "j"};
    spmd_mesh *mesh2 = NULL;
    spmd_sharding *blocks = NULL;
    CHECK(spmd_mesh_create(2, grid, names, NULL, 0, &mesh2));
    CHECK(spmd_sharding_create_parse(mesh2, "'i', 'j'", &blocks));
    char text[256];
    CHECK(spmd_sharding_format(blocks, text, sizeof text));
    fprintf(stderr, "process %d: %s\n", spmd_process_index(), text);
    for (int k = 0; k < L; k++) { /* device by device: the same lines in every layout */
        spmd_box box;
        print_seen("pmap", local_ids[k], &seen[4 * k]);
        print_seen("shard_map", local_ids[k], &seen_by_shard_map[4 * k]);
        CHECK(spmd_sharding_device_box(blocks, 2, shape, local_ids[k], &box));
        printf("device %d holds x[%lld:%lld, %lld:%lld]\n", local_ids[k], (long long)box.start[0],
               (long long)box.stop[0], (long long)box.start[1], (long long)box.stop[1]);
    }

    spmd_sharding_destroy(blocks);
    spmd_mesh_destroy(mesh2);
    spmd_array_destroy(seen_global);
    spmd_array_destroy(xg);
    spmd_sharding_destroy(rows_sharding);
    spmd_mesh_destroy(mesh);
    spmd_array_destroy(seen_local);
    spmd_array_destroy(x_local);
    CHECK(spmd_finalize());
    return 0;
}
