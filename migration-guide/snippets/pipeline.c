/*
 * Migration guide, page 8: a two-stage pipeline. A (N / 2, 2) mesh ('data', 'stage'): each
 * data replica's M microbatches flow through stage 0 and then stage 1 (GPipe's schedule, one
 * microbatch per step and stage), the activations handed on with spmd_psend / spmd_precv
 * (JAX's lax.psend / lax.precv). Stage s computes h * (s + 2) + (s + 1). Any even number of
 * devices.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_pipeline
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_pipeline
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

enum { STAGES = 2, M = 4, B = 3, MAX_DEVICES = 64, MAX_STAGES = 16 };

/* [snippet:fn] */
/* x (M, B): this replica's microbatches (only stage 0 reads them); w (1, 2): this stage's
 * scale and shift. Out: y (M, B), the last stage's results, given to every stage. */
static spmd_status pipeline(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin, (void)nout, (void)user;
    int S = 0, s = 0;
    TRY(spmd_axis_size(ctx, "stage", &S));
    TRY(spmd_axis_index(ctx, "stage", &s));
    if (S > MAX_STAGES) /* pairs below has room for MAX_STAGES */
        return SPMD_ERR_INVALID_ARGUMENT;
    const float *x = in[0].data, *w = in[1].data;
    int pairs[2 * MAX_STAGES]; /* k -> k + 1: each stage feeds the next; stage 0 gets zeros */
    for (int k = 0; k + 1 < S; k++) {
        pairs[2 * k] = k;
        pairs[2 * k + 1] = k + 1;
    }
    const int64_t row[2] = {1, B};
    spmd_block h, y;
    TRY(spmd_ctx_alloc(ctx, 2, row, SPMD_DTYPE_F32, &h));
    TRY(spmd_ctx_alloc(ctx, 2, out[0].shape, SPMD_DTYPE_F32, &y));
    float *a = h.data, *results = y.data;
    memset(a, 0, sizeof(float) * B);                   /* a bubble computes on zeros, harmlessly */
    memset(results, 0, (size_t)spmd_block_nbytes(&y)); /* what stages before the last add */

    /* Step t: stage s works on microbatch t - s (a bubble while that is not in 0 .. M-1). */
    for (int t = 0; t < M + S - 1; t++) {
        if (s == 0 && t < M) /* the other stages received theirs at the end of step t - 1 */
            memcpy(a, x + t * B, sizeof(float) * B);
        for (int b = 0; b < B; b++)
            a[b] = a[b] * w[0] + w[1];
        if (s == S - 1 && t >= s) /* microbatch t - s is done */
            memcpy(results + (t - s) * B, a, sizeof(float) * B);
        if (t == M + S - 2) /* nothing left to hand on */
            break;
        TRY(spmd_psend(ctx, &h, "stage", pairs, S - 1)); /* keeps a copy: h is free at once, */
        TRY(spmd_precv(ctx, &h, "stage", pairs, S - 1)); /* here for the next step's input */
    }
    return spmd_psum(ctx, &y, &out[0], "stage"); /* the last stage's y, invariant over 'stage' */
}
/* [end] */

int main(void)
{
    CHECK(spmd_init(NULL));
    const int N = spmd_device_count(), R = N / STAGES;
    if (N > MAX_DEVICES || N % STAGES) {
        fprintf(stderr, "needs an even number of devices, at most %d; got %d\n", MAX_DEVICES, N);
        spmd_finalize();
        return 2;
    }
    /* replica r's microbatch m holds 100 r + 10 m + b + 1, b = 0 .. B-1 */
    static float x_host[MAX_DEVICES * M * B], y[M * B];
    for (int r = 0; r < R; r++)
        for (int m = 0; m < M; m++)
            for (int b = 0; b < B; b++)
                x_host[(r * M + m) * B + b] = (float)(100 * r + 10 * m + b + 1);
    float w_host[STAGES][2];
    for (int s = 0; s < STAGES; s++) {
        w_host[s][0] = (float)(s + 2);
        w_host[s][1] = (float)(s + 1);
    }

    /* [snippet:shard_map] */
    const int shape[2] = {R, STAGES};
    const char *names[2] = {"data", "stage"};
    spmd_mesh *mesh = NULL;
    spmd_sharding *by_replica = NULL, *by_stage = NULL;
    spmd_array *in[2] = {NULL, NULL}, *res = NULL;
    CHECK(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "'data'", &by_replica));
    CHECK(spmd_sharding_create_parse(mesh, "'stage'", &by_stage));
    const int64_t x_shape[2] = {(int64_t)R * M, B}, w_shape[2] = {STAGES, 2};
    CHECK(spmd_device_put(x_host, 2, x_shape, SPMD_DTYPE_F32, by_replica, &in[0]));
    CHECK(spmd_device_put(w_host, 2, w_shape, SPMD_DTYPE_F32, by_stage, &in[1]));
    const spmd_spec *in_specs[2] = {spmd_sharding_spec(by_replica), spmd_sharding_spec(by_stage)};
    const spmd_spec *y_spec = spmd_sharding_spec(by_replica);
    const spmd_out_desc y_desc = {2, {(int64_t)R * M, B}, SPMD_DTYPE_F32};
    CHECK(spmd_shard_map(mesh, pipeline, NULL, 2, in, in_specs, 1, &y_desc, &y_spec, NULL, &res));
    /* [end] */

    /* One copy per replica (stage 0's), in device order. */
    for (int k = 0; k < spmd_array_num_shards(res); k++) {
        spmd_shard shard;
        CHECK(spmd_array_shard(res, k, &shard));
        if (shard.replica_id != 0)
            continue;
        CHECK(spmd_array_shard_to_host(res, k, y, sizeof y));
        const int r = (int)(shard.index.start[0] / M);
        for (int m = 0; m < M; m++)
            printf("replica %d, microbatch %d: %g %g %g\n", r, m, y[m * B], y[m * B + 1],
                   y[m * B + 2]);
    }

    spmd_array_destroy(res);
    spmd_array_destroy(in[0]);
    spmd_array_destroy(in[1]);
    spmd_sharding_destroy(by_stage);
    spmd_sharding_destroy(by_replica);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return 0;
}
