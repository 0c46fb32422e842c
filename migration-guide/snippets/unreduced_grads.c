/*
 * Migration guide, page 8: unreduced gradients. A (N / 2, 2) mesh ('data', 'model') and the
 * weight gradient of a linear layer y = x w: dw = x^T dy, each 'data' replica summing over its
 * own examples, each 'model' device over its own columns. fn leaves those partial sums in place
 * (out_specs P(None, 'model', unreduced={'data'})), and spmd_reshard adds them up: into
 * P(None, 'model') with a psum over 'data', into P('data', 'model') with a psum_scatter (ZeRO's
 * reduce-scatter of gradients). 2, 4 or 8 devices.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_unreduced_grads
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_unreduced_grads
 */
#include <stdio.h>
#include <stdlib.h>

#include <spmd.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "%s failed: %s\n", #call, spmd_last_error());                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* EXAMPLES per replica; w is (K, M), 'model' holding M / 2 columns per device. */
enum { MODEL = 2, EXAMPLES = 2, K = 4, M = 4, MAX_EXAMPLES = 8 * EXAMPLES };

/* [snippet:fn] */
/* x (b, K): this replica's examples; dy (b, m): their output gradients, this device's columns.
 * Out: dw (K, m) = x^T dy over these b examples only, a partial sum over 'data'. */
static spmd_status grad_w(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    (void)ctx, (void)nin, (void)nout, (void)user;
    const int64_t b = in[0].shape[0], m = in[1].shape[1];
    const float *x = in[0].data, *dy = in[1].data;
    float *dw = out[0].data;
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < m; j++) {
            float sum = 0;
            for (int64_t r = 0; r < b; r++)
                sum += x[r * K + k] * dy[r * m + j];
            dw[k * m + j] = sum; /* no psum: the reshard picks psum or psum_scatter */
        }
    return SPMD_OK;
}
/* [end] */

/* Shard s of x (one per device, in device order), on one line. */
static void print_block(const char *what, const spmd_array *x, int s)
{
    spmd_shard shard;
    float v[K * M];
    CHECK(spmd_array_shard(x, s, &shard));
    CHECK(spmd_array_shard_to_host(x, s, v, sizeof v));
    const int64_t *a = shard.index.start, *z = shard.index.stop;
    printf("device %d: %s dw[%lld:%lld, %lld:%lld] =", shard.device_id, what, (long long)a[0],
           (long long)z[0], (long long)a[1], (long long)z[1]);
    for (int64_t i = 0; i < (z[0] - a[0]) * (z[1] - a[1]); i++)
        printf(" %g", v[i]);
    printf("\n");
}

int main(void)
{
    CHECK(spmd_init(NULL));
    const int N = spmd_device_count(), R = N / MODEL, B = R * EXAMPLES;
    if (N % MODEL || K % R || B > MAX_EXAMPLES) {
        fprintf(stderr, "needs 2, 4 or 8 devices; got %d\n", N);
        spmd_finalize();
        return 2;
    }
    /* example e: x[e][k] = e + k + 1, dy[e][j] = e - j (integers: every sum is exact) */
    static float x_host[MAX_EXAMPLES][K], dy_host[MAX_EXAMPLES][M], dw[K][M];
    for (int e = 0; e < B; e++) {
        for (int k = 0; k < K; k++)
            x_host[e][k] = (float)(e + k + 1);
        for (int j = 0; j < M; j++)
            dy_host[e][j] = (float)(e - j);
    }

    /* [snippet:shard_map] */
    const int shape[2] = {R, MODEL};
    const char *names[2] = {"data", "model"};
    spmd_mesh *mesh = NULL;
    spmd_sharding *by_example = NULL, *by_both = NULL, *partial = NULL;
    spmd_array *in[2] = {NULL, NULL}, *dw_partial = NULL;
    CHECK(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "P('data', None)", &by_example));
    CHECK(spmd_sharding_create_parse(mesh, "P('data', 'model')", &by_both));
    CHECK(spmd_sharding_create_parse(mesh, "P(None, 'model', unreduced={'data'})", &partial));
    const int64_t x_shape[2] = {B, K}, dy_shape[2] = {B, M};
    CHECK(spmd_device_put(x_host, 2, x_shape, SPMD_DTYPE_F32, by_example, &in[0]));
    CHECK(spmd_device_put(dy_host, 2, dy_shape, SPMD_DTYPE_F32, by_both, &in[1]));
    const spmd_spec *in_specs[2] = {spmd_sharding_spec(by_example), spmd_sharding_spec(by_both)};
    const spmd_spec *out_spec = spmd_sharding_spec(partial);
    const spmd_out_desc dw_desc = {2, {K, M}, SPMD_DTYPE_F32};
    CHECK(spmd_shard_map(mesh, grad_w, NULL, 2, in, in_specs, 1, &dw_desc, &out_spec, NULL,
                         &dw_partial));
    /* [end] */
    char text[256];
    CHECK(spmd_spec_format(spmd_sharding_spec(spmd_array_sharding(dw_partial)), text, sizeof text));
    if (spmd_process_index() == 0)
        printf("dw: %s\n", text);

    /* [snippet:reshard] */
    /* Each device holds a partial sum, not the value: the host cannot read it. */
    spmd_status st = spmd_array_to_host(dw_partial, dw, sizeof dw);
    if (spmd_process_index() == 0)
        printf("%s: %s\n", spmd_status_name(st), spmd_last_error());

    /* P(None, 'model'), replicated over 'data': a psum of the partials. */
    spmd_sharding *by_column = NULL;
    spmd_array *dw_sum = NULL, *dw_zero = NULL;
    CHECK(spmd_sharding_create_parse(mesh, "P(None, 'model')", &by_column));
    CHECK(spmd_reshard(dw_partial, by_column, NULL, &dw_sum));
    /* P('data', 'model'), ZeRO: each replica keeps K / R rows of the sum, a psum_scatter. */
    CHECK(spmd_reshard(dw_partial, by_both, NULL, &dw_zero));
    /* [end] */

    CHECK(spmd_process_allgather(dw_sum, 1, dw, sizeof dw));
    for (int k = 0; spmd_process_index() == 0 && k < K; k++)
        printf("psum: dw[%d] = %g %g %g %g\n", k, dw[k][0], dw[k][1], dw[k][2], dw[k][3]);
    /* Per device, in device order: stdout is saved in process order. */
    for (int s = 0; s < spmd_array_num_shards(dw_partial); s++) {
        print_block("partial", dw_partial, s);
        print_block("psum_scatter", dw_zero, s);
    }

    spmd_array_destroy(dw_zero);
    spmd_array_destroy(dw_sum);
    spmd_array_destroy(dw_partial);
    spmd_array_destroy(in[0]);
    spmd_array_destroy(in[1]);
    spmd_sharding_destroy(by_column);
    spmd_sharding_destroy(partial);
    spmd_sharding_destroy(by_both);
    spmd_sharding_destroy(by_example);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return 0;
}
