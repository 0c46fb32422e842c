/*
 * Migration guide, page 2: donation. pmap(f, donate_argnums=0) becomes shard_map with
 * options.donate: the input is deleted, so a later use fails with a message naming the call it
 * went to, and its memory serves later outputs (SPMD_DONATE), or is the output's own when fn
 * tolerates in[0].data == out[0].data (SPMD_DONATE_IN_PLACE). Both spellings must give the
 * same bits. Any number of devices.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_donation
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_donation
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
/* y = x / 2 + 1, elementwise: correct even when out is in (SPMD_DONATE_IN_PLACE). */
static spmd_status step(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)nout, (void)user;
    spmd_status st = spmd_op_binary_scalar(ctx, SPMD_BINARY_MUL, &in[0], 0.5, &out[0]);
    if (st == SPMD_OK)
        st = spmd_op_binary_scalar(ctx, SPMD_BINARY_ADD, &out[0], 1.0, &out[0]);
    return st;
}
/* [end] */

/* The device memory of this process's first shard. */
static void *first_buffer(const spmd_array *a)
{
    spmd_shard shard;
    CHECK(spmd_array_shard(a, 0, &shard));
    return shard.data;
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
    float x_local[MAX_LOCAL * COLS], y1[MAX_LOCAL * COLS], y2[MAX_LOCAL * COLS];
    for (int k = 0; k < L * COLS; k++) /* rows me*L .. of arange(4 N).reshape(N, 4) */
        x_local[k] = (float)(me * L * COLS + k);

    /* [snippet:pmap] */
    /* Legacy: y = jax.pmap(step, 'i', donate_argnums=0)(x_local) */
    const void *rows[MAX_LOCAL];
    int local_ids[MAX_LOCAL];
    for (int k = 0; k < L; k++) {
        rows[k] = &x_local[k * COLS];
        local_ids[k] = spmd_local_device_id(k);
    }
    const int64_t row_shape[1] = {COLS};
    spmd_array *x_stacked = NULL, *y_local = NULL;
    CHECK(spmd_device_put_sharded(L, rows, 1, row_shape, SPMD_DTYPE_F32, local_ids, &x_stacked));
    const int give[1] = {SPMD_DONATE};
    spmd_pmap_options pmap_options = SPMD_PMAP_OPTIONS_INIT;
    pmap_options.donate = give;
    const spmd_out_desc row = {1, {COLS}, SPMD_DTYPE_F32};
    CHECK(spmd_pmap(step, NULL, 1, &x_stacked, NULL, 1, &row, NULL, "i", NULL, 0, &pmap_options,
                    &y_local));
    CHECK(spmd_array_to_host(y_local, y1, sizeof y1));
    /* [end] */

    /* [snippet:shard_map] */
    const char *axis = "i";
    spmd_mesh *mesh = NULL;
    spmd_sharding *by_rows = NULL;
    spmd_array *x = NULL, *y = NULL;
    CHECK(spmd_mesh_create(1, &N, &axis, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'i'", &by_rows));
    const int64_t local_shape[2] = {L, COLS};
    CHECK(spmd_array_from_process_local_data(by_rows, x_local, 2, local_shape, NULL, SPMD_DTYPE_F32,
                                             &x));
    const spmd_spec *spec[1] = {spmd_sharding_spec(by_rows)};
    const spmd_out_desc whole = {2, {N, COLS}, SPMD_DTYPE_F32};
    spmd_shard_map_options options = SPMD_SHARD_MAP_OPTIONS_INIT;
    options.donate = give; /* x's memory goes back to the pool when the call ends */
    CHECK(spmd_shard_map(mesh, step, NULL, 1, &x, spec, 1, &whole, spec, &options, &y));
    float again[MAX_LOCAL * COLS];
    spmd_status st = spmd_array_to_host(x, again, sizeof again); /* x was given away */
    if (me == 0)
        fprintf(stderr, "%s: %s\n", spmd_status_name(st), spmd_last_error());
    spmd_array_destroy(x); /* the handle itself is still the caller's to destroy */
    /* [end] */

    /* [snippet:in_place] */
    /* step reads each element before it writes it: it tolerates working in place */
    const int in_place[1] = {SPMD_DONATE_IN_PLACE};
    spmd_shard_map_options aliasing = SPMD_SHARD_MAP_OPTIONS_INIT;
    aliasing.donate = in_place;
    spmd_array *x2 = NULL, *y_in_place = NULL;
    CHECK(spmd_array_from_process_local_data(by_rows, x_local, 2, local_shape, NULL, SPMD_DTYPE_F32,
                                             &x2));
    void *x2_memory = first_buffer(x2);
    CHECK(spmd_shard_map(mesh, step, NULL, 1, &x2, spec, 1, &whole, spec, &aliasing, &y_in_place));
    if (me == 0)
        printf("in place: the output is in x2's memory: %s\n",
               first_buffer(y_in_place) == x2_memory ? "yes" : "no");
    spmd_array_destroy(x2);
    /* [end] */
    float y3[MAX_LOCAL * COLS];
    for (int s = 0; s < spmd_array_num_shards(y_in_place); s++)
        CHECK(spmd_array_shard_to_host(y_in_place, s, &y3[s * COLS], COLS * sizeof(float)));
    if (memcmp(y3, y1, (size_t)L * COLS * sizeof(float)) != 0) {
        fprintf(stderr, "in-place donation changed the result\n");
        return 1;
    }
    spmd_array_destroy(y_in_place);

    for (int s = 0; s < spmd_array_num_shards(y); s++)
        CHECK(spmd_array_shard_to_host(y, s, &y2[s * COLS], COLS * sizeof(float)));
    for (int k = 0; k < L; k++)
        printf("device %d: %g %g %g %g | %g %g %g %g\n", local_ids[k], y1[k * COLS],
               y1[k * COLS + 1], y1[k * COLS + 2], y1[k * COLS + 3], y2[k * COLS], y2[k * COLS + 1],
               y2[k * COLS + 2], y2[k * COLS + 3]);
    fprintf(stderr, "process %d: pmap and shard_map results are %s\n", me,
            memcmp(y1, y2, (size_t)L * COLS * sizeof(float)) == 0 ? "bit-identical" : "DIFFERENT");

    spmd_array_destroy(y);
    spmd_sharding_destroy(by_rows);
    spmd_mesh_destroy(mesh);
    spmd_array_destroy(y_local);
    spmd_array_destroy(x_stacked);
    CHECK(spmd_finalize());
    return 0;
}
