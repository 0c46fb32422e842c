/*
 * Migration guide, page 8: mixture-of-experts dispatch. Each device holds T tokens (rows of
 * D floats) and the expert each one is routed to; expert e lives on device e of the mesh axis
 * 'e'. The tokens travel to their experts with spmd_ragged_all_to_all (JAX's
 * lax.ragged_all_to_all), each expert scales its rows by e + 1, and the same call with the
 * roles swapped brings every row back to its token. Any number of devices.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_moe_dispatch
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_moe_dispatch
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

/* Inside fn: a failure becomes the status of the whole call. */
#define TRY(call)                                                                                  \
    do {                                                                                           \
        spmd_status try_ = (call);                                                                 \
        if (try_ != SPMD_OK)                                                                       \
            return try_;                                                                           \
    } while (0)

enum { T = 8, D = 4, MAX_DEVICES = 64 };

/* [snippet:sort] */
/* x (T, D): this device's tokens; expert (T,): where each goes. Outputs: y (T, D), each token's
 * row back from its expert; rows (G T, D), what this device's expert received and computed
 * (zeros after); recv (G,), how many of those rows came from each device. */
static spmd_status moe(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                       void *user)
{
    (void)nin, (void)nout, (void)user;
    int G = 0, me = 0;
    TRY(spmd_axis_size(ctx, "e", &G));
    TRY(spmd_axis_index(ctx, "e", &me));
    const int64_t g[1] = {G};
    spmd_block sorted, sorted_y, slot, send, in_off, recv_off, out_off, back, next;
    TRY(spmd_ctx_alloc(ctx, 2, in[0].shape, SPMD_DTYPE_F32, &sorted));
    TRY(spmd_ctx_alloc(ctx, 2, in[0].shape, SPMD_DTYPE_F32, &sorted_y));
    TRY(spmd_ctx_alloc(ctx, 1, in[1].shape, SPMD_DTYPE_I32, &slot));
    spmd_block *vectors[6] = {&send, &in_off, &recv_off, &out_off, &back, &next};
    for (int k = 0; k < 6; k++) /* int32 (G,): the counts and offsets travel as blocks */
        TRY(spmd_ctx_alloc(ctx, 1, g, SPMD_DTYPE_I32, vectors[k]));
    const float *x = in[0].data;
    const int32_t *expert = in[1].data;
    float *y = out[0].data, *rows = out[1].data;
    int32_t *send_sizes = send.data, *input_offsets = in_off.data, *at = slot.data,
            *cursor = next.data, *recv_sizes = out[2].data, *recv_offsets = recv_off.data;

    /* Sort the tokens by expert, stably: each expert's rows in token order. */
    memset(send_sizes, 0, (size_t)G * sizeof *send_sizes);
    for (int r = 0; r < T; r++)
        send_sizes[expert[r]]++;
    for (int j = 0, sum = 0; j < G; sum += send_sizes[j++])
        input_offsets[j] = cursor[j] = sum;
    for (int r = 0; r < T; r++) {
        at[r] = cursor[expert[r]]++; /* where token r sits in sorted */
        memcpy((float *)sorted.data + at[r] * D, x + r * D, D * sizeof *x);
    }
    /* [end] */

    /* [snippet:counts] */
    /* recv_sizes[h]: the rows device h sends me. They start at recv_offsets[h] of my rows, which
     * h needs as its output_offsets[me]: an all_to_all hands each sender its offsets, and with
     * them back[j], where my results for j's tokens go in j's sorted rows (its input_offsets). */
    TRY(spmd_all_to_all(ctx, &send, &out[2], "e", 0, 0, 0));
    int received = 0;
    for (int h = 0; h < G; received += recv_sizes[h++])
        recv_offsets[h] = received;
    const int axis0[2] = {0, 0};
    const spmd_block offsets[2] = {recv_off, in_off};
    spmd_block theirs[2] = {out_off, back}; /* same memory: the results land in out_off, back */
    TRY(spmd_all_to_all_many(ctx, 2, offsets, theirs, "e", axis0, axis0, 0));
    /* [end] */

    /* [snippet:exchange] */
    /* Dispatch into room for every token of the group (the worst case); the rest stays 0. */
    memset(rows, 0, spmd_block_nbytes(&out[1]));
    TRY(spmd_ragged_all_to_all(ctx, &sorted, &out[1], &in_off, &send, &out_off, &out[2], &out[1],
                               "e"));
    for (int k = 0; k < received * D; k++) /* the expert */
        rows[k] *= (float)(me + 1);

    /* Combine: the same call with the roles swapped brings each row back to its sorted place. */
    TRY(spmd_ragged_all_to_all(ctx, &out[1], &sorted_y, &recv_off, &out[2], &back, &send, &sorted_y,
                               "e"));
    for (int r = 0; r < T; r++)
        memcpy(y + r * D, (const float *)sorted_y.data + at[r] * D, D * sizeof *y);
    return SPMD_OK;
}
/* [end] */

/* The router's choice for global token t: uneven on purpose (4 to 12 tokens per expert on 8). */
static int32_t route(int t, int n) { return (int32_t)((3 * t + t * t / 7) % n); }

int main(void)
{
    CHECK(spmd_init(NULL));
    const int N = spmd_device_count();
    if (N > MAX_DEVICES) {
        fprintf(stderr, "needs at most %d devices, got %d\n", MAX_DEVICES, N);
        spmd_finalize();
        return 2;
    }
    /* token t is the row t D, t D + 1, ...: its id can be read back from any copy */
    static float x_host[MAX_DEVICES * T * D], rows[MAX_DEVICES * T * D], y[T * D];
    static int32_t expert_host[MAX_DEVICES * T], recv[MAX_DEVICES];
    for (int t = 0; t < N * T; t++) {
        expert_host[t] = route(t, N);
        for (int d = 0; d < D; d++)
            x_host[t * D + d] = (float)(t * D + d);
    }

    /* [snippet:shard_map] */
    const char *axis = "e";
    spmd_mesh *mesh = NULL;
    spmd_sharding *by_expert = NULL;
    spmd_array *in[2] = {NULL, NULL}, *res[3] = {NULL, NULL, NULL};
    CHECK(spmd_mesh_create(1, &N, &axis, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'e'", &by_expert));
    const int64_t x_shape[2] = {N * T, D}, e_shape[1] = {N * T};
    CHECK(spmd_device_put(x_host, 2, x_shape, SPMD_DTYPE_F32, by_expert, &in[0]));
    CHECK(spmd_device_put(expert_host, 1, e_shape, SPMD_DTYPE_I32, by_expert, &in[1]));
    const spmd_spec *e = spmd_sharding_spec(by_expert);
    const spmd_spec *in_specs[2] = {e, e}, *out_specs[3] = {e, e, e};
    const spmd_out_desc outs[3] = {{2, {N * T, D}, SPMD_DTYPE_F32},
                                   {2, {(int64_t)N * N * T, D}, SPMD_DTYPE_F32},
                                   {1, {N * N}, SPMD_DTYPE_I32}};
    CHECK(spmd_shard_map(mesh, moe, NULL, 2, in, in_specs, 3, outs, out_specs, NULL, res));
    /* [end] */

    /* Per local device, in device order: its expert's rows, then its tokens back. */
    for (int k = 0; k < spmd_array_num_shards(res[0]); k++) {
        spmd_shard shard;
        CHECK(spmd_array_shard(res[0], k, &shard));
        const int dev = shard.device_id; /* = its expert: the mesh is all devices in order */
        CHECK(spmd_array_shard_to_host(res[0], k, y, sizeof y));
        CHECK(spmd_array_shard_to_host(res[1], k, rows, sizeof rows));
        CHECK(spmd_array_shard_to_host(res[2], k, recv, sizeof recv));
        int total = 0;
        printf("expert %d: rows from devices", dev);
        for (int h = 0; h < N; h++) {
            printf(" %d", recv[h]);
            total += recv[h];
        }
        double checksum = 0;
        for (int r = 0; r < N * T * D; r++)
            checksum += rows[r];
        printf(": tokens");
        for (int r = 0; r < total; r++)
            printf(" %g", rows[r * D] / (float)((dev + 1) * D));
        printf("; checksum %.9g\n", checksum);
        printf("device %d: row sums of y:", dev);
        for (int r = 0; r < T; r++) {
            float sum = 0;
            for (int d = 0; d < D; d++)
                sum += y[r * D + d];
            printf(" %g", sum);
        }
        printf("\n");
    }

    for (int j = 0; j < 3; j++)
        spmd_array_destroy(res[j]);
    spmd_array_destroy(in[0]);
    spmd_array_destroy(in[1]);
    spmd_sharding_destroy(by_expert);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return 0;
}
