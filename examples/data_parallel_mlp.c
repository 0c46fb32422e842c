/*
 * Data-parallel training of a small MLP, written twice: with the legacy spmd_pmap and with
 * spmd_shard_map, as in JAX's pmap -> shard_map migration. The network and loss are those of
 * the shard_map notebook's neural-network section (predict: x W + b with relu between layers;
 * loss: mean over the batch of the sum of squared errors; W ~ N(0,1)/sqrt(n_in), b ~ N(0,1)),
 * here with layer sizes 4-16-2, trained by plain SGD on a fixed synthetic dataset with the
 * pmap-style update: per-device gradients, pmean over 'batch', then params - lr * grads.
 *
 * The batch of 64 examples is split 8 per device over all 8 devices; parameters are
 * replicated. Each step prints the loss (of the parameters before the update) from both
 * versions; the end says whether the two parameter sets are bit-identical.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./data_parallel_mlp                        # 1 process x 8 devices
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./data_parallel_mlp        # 4 processes x 2 devices
 *
 * Under mpirun each process passes only its own rows of the batch (pmap's inputs are
 * host-local; shard_map's global batch is built from each process's rows).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>

enum {
    D_IN = 4,
    HIDDEN = 16,
    D_OUT = 2,
    NDEV = 8,
    BATCH = 64,
    PER_DEVICE = BATCH / NDEV,
    STEPS = 10,
    NPARAMS = 4 /* W1, b1, W2, b2 */
};
#define LEARNING_RATE 0.05

/* ---- deterministic data: splitmix64, and N(0,1) as the sum of 12 uniforms minus 6 (plain
 * arithmetic, so a reference program reproduces it bit for bit) ---- */

static uint64_t rng_state = 0;

static double uniform(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static double normal(void)
{
    double s = 0;
    for (int k = 0; k < 12; k++)
        s += uniform();
    return s - 6.0;
}

typedef struct model {
    float w1[D_IN * HIDDEN], b1[HIDDEN], w2[HIDDEN * D_OUT], b2[D_OUT];
} model;

/* init_layer of the notebook: W = normal / sqrt(n_in) (sqrt(4) = 2, sqrt(16) = 4), b = normal;
 * then the inputs, uniform in [-1, 1), and targets y = (|x0 - x1|, x2 - x3 / 2 + 1/4). */
static void make_problem(model *m, float *x, float *y)
{
    for (int k = 0; k < D_IN * HIDDEN; k++)
        m->w1[k] = (float)(normal() / 2.0);
    for (int k = 0; k < HIDDEN; k++)
        m->b1[k] = (float)normal();
    for (int k = 0; k < HIDDEN * D_OUT; k++)
        m->w2[k] = (float)(normal() / 4.0);
    for (int k = 0; k < D_OUT; k++)
        m->b2[k] = (float)normal();
    for (int i = 0; i < BATCH * D_IN; i++)
        x[i] = (float)(2.0 * uniform() - 1.0);
    for (int i = 0; i < BATCH; i++) {
        const float *xi = x + i * D_IN;
        const double d = (double)xi[0] - xi[1];
        y[i * D_OUT + 0] = (float)(d < 0 ? -d : d);
        y[i * D_OUT + 1] = (float)((double)xi[2] - 0.5 * xi[3] + 0.25);
    }
}

/* ---- the per-device train step: forward, backward, pmean of the gradients, SGD ---- */

/* in: x (b, D_IN), y (b, D_OUT), W1, b1, W2, b2; out: W1', b1', W2', b2', loss (scalar).
 * The same body serves pmap (which hands it rank-reduced blocks) and shard_map (blocks):
 * both see this device's rows of the batch and the whole parameters. `user` is the axis. */
static spmd_status train_step(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nin;
    (void)nout;
    const char *axis = user;
    const spmd_block *x = &in[0], *y = &in[1], *params = &in[2];
    const int64_t b = x->shape[0];
    const int64_t s_z[2] = {b, HIDDEN}, s_p[2] = {b, D_OUT};
    spmd_block z1, h, pred, dpred, dh, grads[NPARAMS], sq, loss;
    spmd_status st = SPMD_OK;
#define TRY(call)                                                                                  \
    do {                                                                                           \
        if (st == SPMD_OK)                                                                         \
            st = (call);                                                                           \
    } while (0)
    TRY(spmd_ctx_alloc(ctx, 2, s_z, SPMD_DTYPE_F32, &z1));
    TRY(spmd_ctx_alloc(ctx, 2, s_z, SPMD_DTYPE_F32, &h));
    TRY(spmd_ctx_alloc(ctx, 2, s_p, SPMD_DTYPE_F32, &pred));
    TRY(spmd_ctx_alloc(ctx, 2, s_p, SPMD_DTYPE_F32, &dpred));
    TRY(spmd_ctx_alloc(ctx, 2, s_z, SPMD_DTYPE_F32, &dh));
    TRY(spmd_ctx_alloc(ctx, 2, s_p, SPMD_DTYPE_F32, &sq));
    TRY(spmd_ctx_alloc(ctx, 0, NULL, SPMD_DTYPE_F32, &loss));
    for (int p = 0; p < NPARAMS; p++)
        TRY(spmd_ctx_alloc(ctx, params[p].ndim, params[p].shape, SPMD_DTYPE_F32, &grads[p]));

    /* forward: z1 = x W1 + b1, h = relu(z1), pred = h W2 + b2 */
    TRY(spmd_op_gemm(ctx, 0, 0, 1.0, x, &params[0], 0.0, &z1));
    TRY(spmd_op_binary(ctx, SPMD_BINARY_ADD, &z1, &params[1], &z1));
    TRY(spmd_op_unary(ctx, SPMD_UNARY_RELU, &z1, &h));
    TRY(spmd_op_gemm(ctx, 0, 0, 1.0, &h, &params[2], 0.0, &pred));
    TRY(spmd_op_binary(ctx, SPMD_BINARY_ADD, &pred, &params[3], &pred));
    /* local loss = mean over rows of sum((pred - y)^2); dloss/dpred = 2 (pred - y) / b */
    TRY(spmd_op_binary(ctx, SPMD_BINARY_SUB, &pred, y, &pred));
    TRY(spmd_op_binary(ctx, SPMD_BINARY_MUL, &pred, &pred, &sq));
    TRY(spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &sq, SPMD_ALL_AXES, &loss));
    TRY(spmd_op_binary_scalar(ctx, SPMD_BINARY_DIV, &loss, (double)b, &loss));
    TRY(spmd_op_binary_scalar(ctx, SPMD_BINARY_MUL, &pred, 2.0 / (double)b, &dpred));
    /* backward: gW2 = h^T dpred, gb2 = sum_rows dpred, dh = dpred W2^T masked by relu',
     * gW1 = x^T dz1, gb1 = sum_rows dz1 */
    TRY(spmd_op_gemm(ctx, 1, 0, 1.0, &h, &dpred, 0.0, &grads[2]));
    TRY(spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &dpred, 0, &grads[3]));
    TRY(spmd_op_gemm(ctx, 0, 1, 1.0, &dpred, &params[2], 0.0, &dh));
    /* relu'(z1) masks dh: no block op for a step function, so a loop (cpu blocks are host
     * memory) */
    if (st == SPMD_OK) {
        float *g = dh.data;
        const float *z = z1.data;
        for (int64_t k = 0; k < b * HIDDEN; k++)
            if (!(z[k] > 0.0f))
                g[k] = 0.0f;
    }
    TRY(spmd_op_gemm(ctx, 1, 0, 1.0, x, &dh, 0.0, &grads[0]));
    TRY(spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &dh, 0, &grads[1]));
    /* the batch's gradient and loss: the mean of the devices' (equal shares of the batch) */
    for (int p = 0; p < NPARAMS; p++)
        TRY(spmd_pmean(ctx, &grads[p], &grads[p], axis));
    TRY(spmd_pmean(ctx, &loss, &out[NPARAMS], axis));
    /* SGD: params - lr * grads, the same on every device (out_specs P() checks it) */
    for (int p = 0; p < NPARAMS; p++) {
        TRY(spmd_op_binary_scalar(ctx, SPMD_BINARY_MUL, &grads[p], LEARNING_RATE, &grads[p]));
        TRY(spmd_op_binary(ctx, SPMD_BINARY_SUB, &params[p], &grads[p], &out[p]));
    }
#undef TRY
    return st;
}

/* ---- host side ---- */

static void fail(const char *what)
{
    fprintf(stderr, "data_parallel_mlp: %s failed: %s\n", what, spmd_last_error());
    spmd_finalize();
    exit(1);
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != SPMD_OK)                                                                     \
            fail(#call);                                                                           \
    } while (0)

static const int64_t param_shapes[NPARAMS][2] = {
    {D_IN, HIDDEN}, {HIDDEN, 0}, {HIDDEN, D_OUT}, {D_OUT, 0}};
static const int param_ndim[NPARAMS] = {2, 1, 2, 1};

static void *param_data(model *m, int p)
{
    void *data[NPARAMS] = {m->w1, m->b1, m->w2, m->b2};
    return data[p];
}

static size_t param_bytes(int p)
{
    size_t n = sizeof(float);
    for (int d = 0; d < param_ndim[p]; d++)
        n *= (size_t)param_shapes[p][d];
    return n;
}

/* Replicated copies of every parameter under `sharding` (a P() sharding). */
static void put_params(model *m, const spmd_sharding *sharding, spmd_array **out)
{
    for (int p = 0; p < NPARAMS; p++)
        CHECK(spmd_device_put(param_data(m, p), param_ndim[p], param_shapes[p], SPMD_DTYPE_F32,
                              sharding, &out[p]));
}

static void get_params(spmd_array *const *arrays, model *m)
{
    for (int p = 0; p < NPARAMS; p++)
        CHECK(spmd_array_to_host(arrays[p], param_data(m, p), param_bytes(p)));
}

static spmd_sharding *make_sharding(spmd_mesh *mesh, const char *spec)
{
    spmd_sharding *s = NULL;
    CHECK(spmd_sharding_create_parse(mesh, spec, &s));
    return s;
}

int main(void)
{
    CHECK(spmd_init(NULL));
    if (spmd_device_count() != NDEV) {
        fprintf(stderr,
                "data_parallel_mlp needs 8 devices, got %d; run with SPMD_NUM_CPU_DEVICES=8, or "
                "4 processes with SPMD_NUM_CPU_DEVICES=2\n",
                spmd_device_count());
        spmd_finalize();
        return 2;
    }
    const int procs = spmd_process_count(), local = spmd_local_device_count();
    if (local * procs != NDEV) { /* each process passes the rows of its own devices */
        fprintf(stderr,
                "data_parallel_mlp needs the same number of devices on every process, got %d here "
                "of %d on %d processes\n",
                local, NDEV, procs);
        spmd_finalize();
        return 2;
    }
    const int rows = local * PER_DEVICE, first_row = spmd_process_index() * rows;

    /* every process makes the same problem and keeps its own rows of the batch */
    static float x[BATCH * D_IN], y[BATCH * D_OUT];
    model init;
    make_problem(&init, x, y);
    const float *my_x = x + (size_t)first_row * D_IN, *my_y = y + (size_t)first_row * D_OUT;
    /* Process 0 reports on stdout, which then reads the same in every layout (spmd launch
     * --layouts compares it); the others print their copy of the replicated results, and
     * what depends on the layout, on stderr. */
    FILE *report = spmd_process_index() == 0 ? stdout : stderr;
    fprintf(report, "data_parallel_mlp: layers %d-%d-%d relu, batch %d = %d devices x %d, lr %g\n",
            D_IN, HIDDEN, D_OUT, BATCH, NDEV, PER_DEVICE, LEARNING_RATE);
    fprintf(stderr, "data_parallel_mlp: process %d of %d process(es)\n", spmd_process_index(),
            procs);

    /* pmap: host-local inputs on a mesh of this process's devices, stacked (local, 8, .) for
     * the batch (in_axes 0) and whole for the parameters (in_axes None). */
    int local_ids[NDEV];
    for (int i = 0; i < local; i++)
        local_ids[i] = spmd_local_device_id(i);
    const char *batch_name = "batch";
    spmd_mesh *local_mesh = NULL;
    CHECK(spmd_mesh_create(1, &local, &batch_name, local_ids, local, &local_mesh));
    spmd_sharding *local_stacked = make_sharding(local_mesh, "'batch'");
    spmd_sharding *local_replicated = make_sharding(local_mesh, "");
    spmd_array *pm_in[2 + NPARAMS] = {NULL};
    const int64_t stacked_x[3] = {local, PER_DEVICE, D_IN},
                  stacked_y[3] = {local, PER_DEVICE, D_OUT};
    CHECK(spmd_device_put(my_x, 3, stacked_x, SPMD_DTYPE_F32, local_stacked, &pm_in[0]));
    CHECK(spmd_device_put(my_y, 3, stacked_y, SPMD_DTYPE_F32, local_stacked, &pm_in[1]));
    put_params(&init, local_replicated, &pm_in[2]);
    const int in_axes[2 + NPARAMS] = {0, 0, SPMD_NONE, SPMD_NONE, SPMD_NONE, SPMD_NONE};
    const int out_axes[NPARAMS + 1] = {SPMD_NONE, SPMD_NONE, SPMD_NONE, SPMD_NONE, SPMD_NONE};
    spmd_out_desc outs[NPARAMS + 1]; /* pmap: per-device shapes; shard_map: global (the same) */
    for (int p = 0; p < NPARAMS; p++) {
        outs[p].ndim = param_ndim[p];
        memcpy(outs[p].shape, param_shapes[p], sizeof param_shapes[p]);
        outs[p].dtype = SPMD_DTYPE_F32;
    }
    outs[NPARAMS].ndim = 0;
    outs[NPARAMS].dtype = SPMD_DTYPE_F32;

    /* shard_map: a 1-D mesh 'batch' over all 8 devices; the global batch P('batch') built
     * from each process's rows, the parameters P(). */
    const int mesh_shape = NDEV;
    spmd_mesh *mesh = NULL;
    CHECK(spmd_mesh_create(1, &mesh_shape, &batch_name, NULL, 0, &mesh));
    spmd_sharding *rows_sharded = make_sharding(mesh, "'batch'");
    spmd_sharding *replicated = make_sharding(mesh, "");
    spmd_array *sm_in[2 + NPARAMS] = {NULL};
    const int64_t local_x[2] = {rows, D_IN}, local_y[2] = {rows, D_OUT};
    const int64_t global_x[2] = {BATCH, D_IN}, global_y[2] = {BATCH, D_OUT};
    CHECK(spmd_array_from_process_local_data(rows_sharded, my_x, 2, local_x, global_x,
                                             SPMD_DTYPE_F32, &sm_in[0]));
    CHECK(spmd_array_from_process_local_data(rows_sharded, my_y, 2, local_y, global_y,
                                             SPMD_DTYPE_F32, &sm_in[1]));
    put_params(&init, replicated, &sm_in[2]);
    spmd_spec *p_batch = NULL, *p_none = NULL;
    CHECK(spmd_spec_parse("'batch'", &p_batch));
    CHECK(spmd_spec_parse("", &p_none));
    const spmd_spec *in_specs[2 + NPARAMS] = {p_batch, p_batch, p_none, p_none, p_none, p_none};
    const spmd_spec *out_specs[NPARAMS + 1] = {p_none, p_none, p_none, p_none, p_none};

    for (int step = 0; step < STEPS; step++) {
        spmd_array *pm_out[NPARAMS + 1] = {NULL}, *sm_out[NPARAMS + 1] = {NULL};
        CHECK(spmd_pmap(train_step, (void *)batch_name, 2 + NPARAMS, pm_in, in_axes, NPARAMS + 1,
                        outs, out_axes, batch_name, NULL, 0, NULL, pm_out));
        CHECK(spmd_shard_map(mesh, train_step, (void *)batch_name, 2 + NPARAMS, sm_in, in_specs,
                             NPARAMS + 1, outs, out_specs, NULL, sm_out));
        float pm_loss = 0, sm_loss = 0;
        CHECK(spmd_array_to_host(pm_out[NPARAMS], &pm_loss, sizeof pm_loss));
        CHECK(spmd_array_to_host(sm_out[NPARAMS], &sm_loss, sizeof sm_loss));
        /* %.9g tells every float32 apart: equal text is equal bits */
        fprintf(report, "step %d pmap_loss=%.9g shard_map_loss=%.9g\n", step, pm_loss, sm_loss);
        for (int p = 0; p < NPARAMS; p++) { /* the updated parameters feed the next step */
            spmd_array_destroy(pm_in[2 + p]);
            spmd_array_destroy(sm_in[2 + p]);
            pm_in[2 + p] = pm_out[p];
            sm_in[2 + p] = sm_out[p];
        }
        spmd_array_destroy(pm_out[NPARAMS]);
        spmd_array_destroy(sm_out[NPARAMS]);
    }

    model pm_final, sm_final;
    get_params(&pm_in[2], &pm_final);
    get_params(&sm_in[2], &sm_final);
    double sumsq = 0;
    for (int p = 0; p < NPARAMS; p++) {
        const float *v = param_data(&pm_final, p);
        for (size_t k = 0; k < param_bytes(p) / sizeof(float); k++)
            sumsq += (double)v[k] * v[k];
    }
    fprintf(report, "final param_sumsq=%.9g\n", sumsq);
    fprintf(report, "params pmap vs shard_map: %s\n",
            memcmp(&pm_final, &sm_final, sizeof pm_final) == 0 ? "bit-identical" : "DIFFERENT");
    fflush(stdout);

    for (int i = 0; i < 2 + NPARAMS; i++) {
        spmd_array_destroy(pm_in[i]);
        spmd_array_destroy(sm_in[i]);
    }
    spmd_spec_destroy(p_batch);
    spmd_spec_destroy(p_none);
    spmd_sharding_destroy(rows_sharded);
    spmd_sharding_destroy(replicated);
    spmd_sharding_destroy(local_stacked);
    spmd_sharding_destroy(local_replicated);
    spmd_mesh_destroy(mesh);
    spmd_mesh_destroy(local_mesh);
    CHECK(spmd_finalize());
    return 0;
}
