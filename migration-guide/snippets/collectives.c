/*
 * Migration guide, page 2: collectives. The same three collectives in a pmap fn (rows of shape
 * (4,)) and a shard_map fn (blocks of shape (1, 4)): x - psum(x), all_gather and a ppermute
 * shifting each row to the next device. pmap's untiled all_gather of a row is shard_map's tiled
 * all_gather of a block, invariant, and since every device gathers the same value, shard_map
 * returns it once (out_specs P(), proven) where pmap stacked N copies. Any number of devices.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_collectives
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_collectives
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

enum { COLS = 4, MAX_DEVICES = 64 };

/* ppermute's pairs, (j, j + 1 mod N): each row moves to the next device. */
typedef struct shift {
    int pairs[2 * MAX_DEVICES];
    int n;
} shift;

/* [snippet:pmap_fn] */
/* pmap: x is this device's row, shape (4,). */
static spmd_status f_pmap(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    (void)nin, (void)nout;
    const shift *s = user;
    spmd_block total;
    spmd_status st = spmd_ctx_alloc(ctx, in[0].ndim, in[0].shape, SPMD_DTYPE_F32, &total);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &in[0], &total, "i");
    if (st == SPMD_OK) /* x - psum(x, 'i') */
        st = spmd_op_binary(ctx, SPMD_BINARY_SUB, &in[0], &total, &out[0]);
    if (st == SPMD_OK) /* all_gather(x, 'i'): stacked rows, (N, 4) */
        st = spmd_all_gather(ctx, &in[0], &out[1], "i", 0, 0);
    if (st == SPMD_OK) /* ppermute(x, 'i', perm=[(j, (j + 1) % N) for j in range(N)]) */
        st = spmd_ppermute(ctx, &in[0], &out[2], "i", s->pairs, s->n);
    return st;
}
/* [end] */

/* [snippet:shard_map_fn] */
/* shard_map: x is this device's block, shape (1, 4). Only the gather changes: tiled, it
 * concatenates the (1, 4) blocks into (N, 4); untiled it would stack them into (N, 1, 4). It
 * is the invariant gather, as out_specs P() claims its result alike on every device (a plain
 * spmd_all_gather's result varies by type: refused there, as JAX refuses it). */
static spmd_status f_shard_map(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    const shift *s = user;
    spmd_block total;
    spmd_status st = spmd_ctx_alloc(ctx, in[0].ndim, in[0].shape, SPMD_DTYPE_F32, &total);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &in[0], &total, "i");
    if (st == SPMD_OK)
        st = spmd_op_binary(ctx, SPMD_BINARY_SUB, &in[0], &total, &out[0]);
    if (st == SPMD_OK)
        st = spmd_all_gather_invariant(ctx, &in[0], &out[1], "i", 0, 1);
    if (st == SPMD_OK)
        st = spmd_ppermute(ctx, &in[0], &out[2], "i", s->pairs, s->n);
    return st;
}
/* [end] */

static void print_row(const char *what, int device, const float *a, const float *b)
{
    printf("%s: device %d: %g %g %g %g | %g %g %g %g\n", what, device, a[0], a[1], a[2], a[3], b[0],
           b[1], b[2], b[3]);
}

int main(void)
{
    CHECK(spmd_init(NULL));
    int N = spmd_device_count(), L = spmd_local_device_count(), me = spmd_process_index();
    if (N > MAX_DEVICES) {
        fprintf(stderr, "needs at most %d devices, got %d\n", MAX_DEVICES, N);
        spmd_finalize();
        return 2;
    }
    shift s = {.n = N};
    for (int j = 0; j < N; j++) {
        s.pairs[2 * j] = j;
        s.pairs[2 * j + 1] = (j + 1) % N;
    }
    /* x = arange(4 N).reshape(N, 4); this process holds rows me*L .. me*L+L-1. */
    static float x_local[MAX_DEVICES * COLS], a[3][MAX_DEVICES * MAX_DEVICES * COLS],
        b[3][MAX_DEVICES * MAX_DEVICES * COLS];
    for (int k = 0; k < L * COLS; k++)
        x_local[k] = (float)(me * L * COLS + k);

    /* [snippet:pmap] */
    const void *rows[MAX_DEVICES];
    int local_ids[MAX_DEVICES];
    for (int k = 0; k < L; k++) {
        rows[k] = &x_local[k * COLS];
        local_ids[k] = spmd_local_device_id(k);
    }
    const int64_t row_shape[1] = {COLS};
    spmd_array *x_stacked = NULL, *out[3] = {NULL, NULL, NULL};
    CHECK(spmd_device_put_sharded(L, rows, 1, row_shape, SPMD_DTYPE_F32, local_ids, &x_stacked));
    const spmd_out_desc per_device[3] = {
        {1, {COLS}, SPMD_DTYPE_F32}, {2, {N, COLS}, SPMD_DTYPE_F32}, {1, {COLS}, SPMD_DTYPE_F32}};
    CHECK(spmd_pmap(f_pmap, &s, 1, &x_stacked, NULL, 3, per_device, NULL, "i", NULL, 0, NULL,
                    out)); /* host-local: (L, 4), (L, N, 4), (L, 4) */
    /* [end] */

    /* [snippet:shard_map] */
    const char *axis = "i";
    spmd_mesh *mesh = NULL;
    spmd_sharding *by_rows = NULL;
    spmd_spec *replicated = NULL;
    spmd_array *x = NULL, *res[3] = {NULL, NULL, NULL};
    CHECK(spmd_mesh_create(1, &N, &axis, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'i'", &by_rows));
    CHECK(spmd_spec_parse("", &replicated));
    const int64_t local_shape[2] = {L, COLS};
    CHECK(spmd_array_from_process_local_data(by_rows, x_local, 2, local_shape, NULL, SPMD_DTYPE_F32,
                                             &x));
    const spmd_spec *rows_spec = spmd_sharding_spec(by_rows);
    const spmd_spec *in_specs[1] = {rows_spec};
    const spmd_spec *out_specs[3] = {rows_spec, replicated, rows_spec};
    const spmd_out_desc whole[3] = {{2, {N, COLS}, SPMD_DTYPE_F32},
                                    {2, {N, COLS}, SPMD_DTYPE_F32}, /* once, not N times */
                                    {2, {N, COLS}, SPMD_DTYPE_F32}};
    CHECK(spmd_shard_map(mesh, f_shard_map, &s, 1, &x, in_specs, 3, whole, out_specs, NULL, res));
    /* [end] */

    for (int j = 0; j < 3; j++)
        CHECK(spmd_array_to_host(out[j], a[j], sizeof a[j]));
    CHECK(spmd_array_to_host(res[1], b[1], sizeof b[1])); /* replicated: whole on every process */
    for (int j = 0; j < 3; j += 2)
        for (int k = 0; k < spmd_array_num_shards(res[j]); k++)
            CHECK(spmd_array_shard_to_host(res[j], k, &b[j][k * COLS], COLS * sizeof(float)));
    int same = 1;
    for (int k = 0; k < L; k++) {
        print_row("x - psum(x)", local_ids[k], &a[0][k * COLS], &b[0][k * COLS]);
        print_row("ppermute", local_ids[k], &a[2][k * COLS], &b[2][k * COLS]);
        same &= memcmp(&a[1][k * N * COLS], b[1], (size_t)N * COLS * sizeof(float)) == 0;
    }
    for (int r = 0; r < N; r++) /* shard_map's one copy of the gathered array */
        fprintf(stderr, "all_gather: process %d: row %d: %g %g %g %g\n", me, r, b[1][r * COLS],
                b[1][r * COLS + 1], b[1][r * COLS + 2], b[1][r * COLS + 3]);
    same &= memcmp(a[0], b[0], (size_t)L * COLS * sizeof(float)) == 0 &&
            memcmp(a[2], b[2], (size_t)L * COLS * sizeof(float)) == 0;
    fprintf(stderr, "process %d: pmap and shard_map results are %s\n", me,
            same ? "bit-identical" : "DIFFERENT");

    for (int j = 0; j < 3; j++) {
        spmd_array_destroy(res[j]);
        spmd_array_destroy(out[j]);
    }
    spmd_array_destroy(x);
    spmd_spec_destroy(replicated);
    spmd_sharding_destroy(by_rows);
    spmd_mesh_destroy(mesh);
    spmd_array_destroy(x_stacked);
    CHECK(spmd_finalize());
    return 0;
}
