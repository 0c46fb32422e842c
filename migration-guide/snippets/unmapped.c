/*
 * Migration guide, page 2: an unmapped input and a replicated output. pmap(f, in_axes=(0, None),
 * out_axes=(0, None)) becomes shard_map with in_specs (P('i'), P()) and out_specs (P('i'), P()).
 * f multiplies each row of x by w and sums the products over the devices; both spellings must
 * give the same bits. Any number of devices.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_unmapped
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_unmapped
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

/* [snippet:pmap_fn] */
/* pmap's f sees x[i] of shape (4,) and all of w. */
static spmd_status f_pmap(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    (void)nin, (void)nout, (void)user;
    spmd_status st = spmd_op_binary(ctx, SPMD_BINARY_MUL, &in[0], &in[1], &out[0]); /* x * w */
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &out[0], &out[1], "i"); /* psum(y, 'i') */
    return st;
}
/* [end] */

/* [snippet:shard_map_fn] */
/* shard_map's f sees its rows of x, shape (1, 4), and all of w (row-broadcast in the product);
 * it sums its rows before the psum, so it is right for any number of rows per device. */
static spmd_status f_shard_map(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    spmd_block partial; /* y.sum(0): shape (4,) */
    spmd_status st = spmd_op_binary(ctx, SPMD_BINARY_MUL, &in[0], &in[1], &out[0]);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &in[1].shape[0], SPMD_DTYPE_F32, &partial);
    if (st == SPMD_OK)
        st = spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &out[0], 0, &partial);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &partial, &out[1], "i");
    return st;
}
/* [end] */

int main(void)
{
    CHECK(spmd_init(NULL));
    int N = spmd_device_count(), L = spmd_local_device_count(), me = spmd_process_index();
    if (L > MAX_LOCAL) {
        fprintf(stderr, "needs at most %d devices per process, got %d\n", MAX_LOCAL, L);
        spmd_finalize();
        return 2;
    }
    /* Global x[r][c] = r + c + 1; this process holds rows me*L .. me*L+L-1. w is everywhere. */
    float x_local[MAX_LOCAL * COLS], w[COLS] = {1, 2, 3, 4};
    for (int k = 0; k < L; k++)
        for (int c = 0; c < COLS; c++)
            x_local[k * COLS + c] = (float)(me * L + k + c + 1);
    float y1[MAX_LOCAL * COLS], y2[MAX_LOCAL * COLS], total1[COLS], total2[COLS];

    /* [snippet:pmap] */
    /* Legacy: y, total = jax.pmap(f, 'i', in_axes=(0, None), out_axes=(0, None))(x_local, w).
     * The unmapped w: one copy on each local device (P() on a mesh of this process's). */
    const void *rows[MAX_LOCAL];
    int local_ids[MAX_LOCAL];
    for (int k = 0; k < L; k++) {
        rows[k] = &x_local[k * COLS];
        local_ids[k] = spmd_local_device_id(k);
    }
    const int64_t row_shape[1] = {COLS};
    const char *axis = "i";
    spmd_mesh *local_mesh = NULL;
    spmd_sharding *local_copies = NULL;
    spmd_array *in[2] = {NULL, NULL}, *out[2] = {NULL, NULL};
    CHECK(spmd_device_put_sharded(L, rows, 1, row_shape, SPMD_DTYPE_F32, local_ids, &in[0]));
    CHECK(spmd_mesh_create(1, &L, &axis, local_ids, L, &local_mesh));
    CHECK(spmd_sharding_create_parse(local_mesh, "", &local_copies));
    CHECK(spmd_device_put(w, 1, row_shape, SPMD_DTYPE_F32, local_copies, &in[1]));
    const int in_axes[2] = {0, SPMD_NONE}, out_axes[2] = {0, SPMD_NONE};
    const spmd_out_desc per_device[2] = {{1, {COLS}, SPMD_DTYPE_F32}, {1, {COLS}, SPMD_DTYPE_F32}};
    CHECK(
        spmd_pmap(f_pmap, NULL, 2, in, in_axes, 2, per_device, out_axes, "i", NULL, 0, NULL, out));
    CHECK(spmd_array_to_host(out[0], y1, sizeof y1));         /* host-local (L, 4) */
    CHECK(spmd_array_to_host(out[1], total1, sizeof total1)); /* (4,), once */
    /* [end] */

    /* [snippet:shard_map] */
    /* shard_map: x global and split by rows, w replicated (P()); the total comes back once,
     * replicated (out_specs P(), verified). */
    spmd_mesh *mesh = NULL;
    spmd_sharding *by_rows = NULL, *replicated = NULL;
    spmd_array *args[2] = {NULL, NULL}, *res[2] = {NULL, NULL};
    CHECK(spmd_mesh_create(1, &N, &axis, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'i'", &by_rows));
    CHECK(spmd_sharding_create_parse(mesh, "", &replicated));
    const int64_t local_shape[2] = {L, COLS};
    CHECK(spmd_array_from_process_local_data(by_rows, x_local, 2, local_shape, NULL, SPMD_DTYPE_F32,
                                             &args[0]));
    CHECK(spmd_device_put(w, 1, row_shape, SPMD_DTYPE_F32, replicated, &args[1]));
    const spmd_spec *specs[2] = {spmd_sharding_spec(by_rows), spmd_sharding_spec(replicated)};
    const spmd_out_desc whole[2] = {{2, {N, COLS}, SPMD_DTYPE_F32}, {1, {COLS}, SPMD_DTYPE_F32}};
    CHECK(spmd_shard_map(mesh, f_shard_map, NULL, 2, args, specs, 2, whole, specs, NULL, res));
    for (int s = 0; s < spmd_array_num_shards(res[0]); s++) /* this process's rows of y */
        CHECK(spmd_array_shard_to_host(res[0], s, &y2[s * COLS], COLS * sizeof(float)));
    CHECK(spmd_array_to_host(res[1], total2, sizeof total2)); /* every process holds it */
    /* [end] */

    for (int k = 0; k < L; k++)
        printf("y: device %d: %g %g %g %g | %g %g %g %g\n", local_ids[k], y1[k * COLS],
               y1[k * COLS + 1], y1[k * COLS + 2], y1[k * COLS + 3], y2[k * COLS], y2[k * COLS + 1],
               y2[k * COLS + 2], y2[k * COLS + 3]);
    fprintf(stderr, "total: process %d: %g %g %g %g | %g %g %g %g\n", me, total1[0], total1[1],
            total1[2], total1[3], total2[0], total2[1], total2[2], total2[3]);
    int same = memcmp(y1, y2, (size_t)L * COLS * sizeof(float)) == 0 &&
               memcmp(total1, total2, sizeof total1) == 0;
    fprintf(stderr, "process %d: pmap and shard_map results are %s\n", me,
            same ? "bit-identical" : "DIFFERENT");

    for (int j = 0; j < 2; j++) {
        spmd_array_destroy(res[j]);
        spmd_array_destroy(args[j]);
        spmd_array_destroy(out[j]);
        spmd_array_destroy(in[j]);
    }
    spmd_sharding_destroy(replicated);
    spmd_sharding_destroy(by_rows);
    spmd_mesh_destroy(mesh);
    spmd_sharding_destroy(local_copies);
    spmd_mesh_destroy(local_mesh);
    CHECK(spmd_finalize());
    return 0;
}
