/*
 * Migration guide, page 2: a basic pmap rewritten as shard_map. fn computes 2 * x + i on each
 * device (i = its position on axis 'i'); it runs once through spmd_pmap on host-local rows and
 * once through spmd_shard_map on the global array, and both results must be the same bits.
 * Any number of devices.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_basic_map
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_basic_map
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "%s failed: %s\n", #call, spmd_last_error());                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum { COLS = 4, MAX_LOCAL = 64 };

/* [snippet:fn] */
/* y = 2 * x + i: elementwise, so the same fn serves pmap's (4,) and shard_map's (1, 4). */
static spmd_status affine(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    (void)nin, (void)nout, (void)user;
    int i = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &i);
    if (st == SPMD_OK)
        st = spmd_op_binary_scalar(ctx, SPMD_BINARY_MUL, &in[0], 2.0, &out[0]);
    if (st == SPMD_OK)
        st = spmd_op_binary_scalar(ctx, SPMD_BINARY_ADD, &out[0], (double)i, &out[0]);
    return st;
}
/* [end] */

static void print_row(const char *how, int k, const float *y)
{
    printf("%s: device %d: %g %g %g %g\n", how, spmd_local_device_id(k), y[k * COLS],
           y[k * COLS + 1], y[k * COLS + 2], y[k * COLS + 3]);
}

int main(void)
{
    CHECK(spmd_init(NULL));
    int N = spmd_device_count(), L = spmd_local_device_count(), me = spmd_process_index();
    if (L > MAX_LOCAL) {
        fprintf(stderr, "needs at most %d devices per process, got %d\n", MAX_LOCAL, L);
        spmd_finalize();
        return 2;
    }
    /* This process's rows of x = arange(4 N).reshape(N, 4): global rows me*L .. me*L+L-1. */
    float x_local[MAX_LOCAL * COLS], by_pmap[MAX_LOCAL * COLS], by_shard_map[MAX_LOCAL * COLS];
    for (int k = 0; k < L * COLS; k++)
        x_local[k] = (float)(me * L * COLS + k);

    /* [snippet:pmap] */
    /* Legacy: y = jax.pmap(f, axis_name='i')(x_local), x_local holding one row per local
     * device. Its host-local input: the rows stacked on this process's devices. */
    const void *rows[MAX_LOCAL];
    int local_ids[MAX_LOCAL];
    for (int k = 0; k < L; k++) {
        rows[k] = &x_local[k * COLS];
        local_ids[k] = spmd_local_device_id(k);
    }
    const int64_t row_shape[1] = {COLS};
    spmd_array *x_stacked = NULL, *y_local = NULL;
    CHECK(spmd_device_put_sharded(L, rows, 1, row_shape, SPMD_DTYPE_F32, local_ids, &x_stacked));
    const spmd_out_desc row = {1, {COLS}, SPMD_DTYPE_F32}; /* what fn returns on one device */
    CHECK(
        spmd_pmap(affine, NULL, 1, &x_stacked, NULL, 1, &row, NULL, "i", NULL, 0, NULL, &y_local));
    CHECK(spmd_array_to_host(y_local, by_pmap, sizeof by_pmap)); /* host-local: (L, 4) */
    /* [end] */

    /* [snippet:shard_map] */
    /* shard_map: a mesh with axis 'i' over every device, the global x built from each
     * process's rows, in_specs = out_specs = P('i'). */
    const char *axis = "i";
    spmd_mesh *mesh = NULL;
    spmd_sharding *by_rows = NULL;
    spmd_array *x = NULL, *y = NULL;
    CHECK(spmd_mesh_create(1, &N, &axis, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'i'", &by_rows));
    const int64_t local_shape[2] = {L, COLS};
    CHECK(spmd_array_from_process_local_data(by_rows, x_local, 2, local_shape, NULL, SPMD_DTYPE_F32,
                                             &x)); /* global (N, 4) */
    const spmd_spec *spec[1] = {spmd_sharding_spec(by_rows)};
    const spmd_out_desc whole = {2, {N, COLS}, SPMD_DTYPE_F32}; /* the global output */
    CHECK(spmd_shard_map(mesh, affine, NULL, 1, &x, spec, 1, &whole, spec, NULL, &y));
    for (int s = 0; s < spmd_array_num_shards(y); s++) /* this process's rows of y */
        CHECK(spmd_array_shard_to_host(y, s, &by_shard_map[s * COLS], COLS * sizeof(float)));
    /* [end] */

    for (int k = 0; k < L; k++) { /* device by device: the same lines in every layout */
        print_row("pmap", k, by_pmap);
        print_row("shard_map", k, by_shard_map);
    }
    fprintf(stderr, "process %d: pmap and shard_map results are %s\n", me,
            memcmp(by_pmap, by_shard_map, (size_t)L * COLS * sizeof(float)) == 0 ? "bit-identical"
                                                                                 : "DIFFERENT");

    spmd_array_destroy(y);
    spmd_array_destroy(x);
    spmd_sharding_destroy(by_rows);
    spmd_mesh_destroy(mesh);
    spmd_array_destroy(y_local);
    spmd_array_destroy(x_stacked);
    CHECK(spmd_finalize());
    return 0;
}
