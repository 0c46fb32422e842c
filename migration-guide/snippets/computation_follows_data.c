/*
 * Migration guide, page 9: computation follows data. Operations on whole global arrays
 * (spmd/array_ops.h) on a (2, 4) mesh ('x', 'y'): a @ b with a = float32[8,4] and
 * b = float32[4,16] in four layouts (no communication; the contraction sharded on both sides,
 * refused, then its four legal answers; sharded on one side, all-gathered; an axis used twice,
 * refused), a dry run, a communication budget, and the backward pass of a data-parallel layer
 * y = x W written by hand in a shard_map (dW = psum over 'data' of x_local^T dy_local) and
 * with array ops. 8 devices.
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./guide_computation_follows_data
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=2 ./guide_computation_follows_data
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>
#include <spmd/array_ops.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        spmd_status st_ = (call);                                                                  \
        if (st_ != SPMD_OK) {                                                                      \
            fprintf(stderr, "%s failed: %s\n", #call, spmd_last_error());                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define TRY(call)                                                                                  \
    do {                                                                                           \
        spmd_status try_ = (call);                                                                 \
        if (try_ != SPMD_OK)                                                                       \
            return try_;                                                                           \
    } while (0)

/* The data-parallel layer: B examples of K features, N outputs. */
enum { B = 16, K = 4, N = 16 };

/* The plan of the last op, on one line (process 0 prints: it is the same on every process). */
static void print_plan(const spmd_op_plan *plan)
{
    char line[512];
    CHECK(spmd_op_plan_format(plan, line, sizeof line));
    if (spmd_process_index() == 0)
        printf("%s\n", line);
}

/* A refused op: its status and message. */
static void print_refusal(spmd_status st)
{
    if (spmd_process_index() == 0)
        printf("%s: %s\n", spmd_status_name(st), spmd_last_error());
}

/* [snippet:backward] */
/* The backward of y = x W. x (b, K): this device's examples; W (K, N): replicated; dy (b, N):
 * dL/dy for these examples. Out: dx (b, K), by example like x; dW (K, N), replicated like W. */
static spmd_status linear_backward(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                   spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    const spmd_block *x = &in[0], *w = &in[1], *dy = &in[2];
    TRY(spmd_op_gemm(ctx, 0, 1, 1.0, dy, w, 0.0, &out[0])); /* dx = dy W^T: this device's rows */
    TRY(spmd_op_gemm(ctx, 1, 0, 1.0, x, dy, 0.0, &out[1])); /* x_local^T dy_local: a partial dW */
    return spmd_psum(ctx, &out[1], &out[1], "data"); /* W entered invariant: pvary's transpose */
}
/* [end] */

int main(void)
{
    CHECK(spmd_init(NULL));
    if (spmd_device_count() != 8) {
        fprintf(stderr, "needs 8 devices; got %d\n", spmd_device_count());
        spmd_finalize();
        return 2;
    }
    /* a[i][k] = i + k + 1, b[k][j] = k - j + 1: integers, so every sum is exact */
    static float a_host[8][4], b_host[4][16];
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 4; k++)
            a_host[i][k] = (float)(i + k + 1);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 16; j++)
            b_host[k][j] = (float)(k - j + 1);

    /* [snippet:operands] */
    const int shape[2] = {2, 4};
    const char *names[2] = {"x", "y"};
    spmd_mesh *mesh = NULL;
    spmd_sharding *rows_x = NULL, *cols_x = NULL, *cols_y = NULL, *unreduced_x = NULL;
    CHECK(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    CHECK(spmd_sharding_create_parse(mesh, "P('x', None)", &rows_x));
    CHECK(spmd_sharding_create_parse(mesh, "P(None, 'x')", &cols_x));
    CHECK(spmd_sharding_create_parse(mesh, "P(None, 'y')", &cols_y));
    CHECK(spmd_sharding_create_parse(mesh, "P(None, None, unreduced={'x'})", &unreduced_x));
    const int64_t a_shape[2] = {8, 4}, b_shape[2] = {4, 16};
    spmd_array *a_m = NULL, *a_k = NULL, *b_k = NULL, *b_n = NULL, *b_nx = NULL;
    CHECK(spmd_device_put(a_host, 2, a_shape, SPMD_DTYPE_F32, rows_x, &a_m));  /* [8@x,4] */
    CHECK(spmd_device_put(a_host, 2, a_shape, SPMD_DTYPE_F32, cols_x, &a_k));  /* [8,4@x] */
    CHECK(spmd_device_put(b_host, 2, b_shape, SPMD_DTYPE_F32, rows_x, &b_k));  /* [4@x,16] */
    CHECK(spmd_device_put(b_host, 2, b_shape, SPMD_DTYPE_F32, cols_y, &b_n));  /* [4,16@y] */
    CHECK(spmd_device_put(b_host, 2, b_shape, SPMD_DTYPE_F32, cols_x, &b_nx)); /* [4,16@x] */
    /* [end] */

    /* [snippet:local] */
    /* (i) float32[8@x,4] @ float32[4,16@y]: rows by x, columns by y, k whole on every device. */
    spmd_op_plan plan;
    spmd_op_options opts = SPMD_OP_OPTIONS_INIT;
    opts.plan = &plan; /* filled by every call that takes &opts */
    spmd_array *c = NULL;
    CHECK(spmd_array_matmul(a_m, b_n, NULL, &opts, &c)); /* float32[8@x,16@y]: plan.nsteps 0 */
    /* [end] */
    char type[160];
    CHECK(spmd_array_type_format(c, type, sizeof type));
    if (spmd_process_index() == 0)
        printf("(i) %s, %d collective(s), %lld B\n", type, plan.nsteps,
               (long long)plan.bytes_per_device);
    spmd_array_destroy(c);

    /* [snippet:both] */
    /* (ii) float32[8,4@x] @ float32[4@x,16]: each device holds a partial sum over x. */
    spmd_status st = spmd_array_matmul(a_k, b_k, NULL, &opts, &c); /* refused: c is NULL */
    print_refusal(st);
    const spmd_sharding *answers[4] = {SPMD_REPLICATED, rows_x, cols_x, unreduced_x};
    for (int i = 0; i < 4; i++) {
        CHECK(spmd_array_matmul(a_k, b_k, answers[i], &opts, &c));
        print_plan(&plan); /* psum; psum_scatter; psum_scatter; no collective */
        spmd_array_destroy(c);
    }
    /* [end] */

    /* [snippet:one_side] */
    /* (iii) float32[8,4@x] @ float32[4,16@y]: a's k is sharded, b's is not: a is all-gathered. */
    CHECK(spmd_array_matmul(a_k, b_n, NULL, &opts, &c)); /* float32[8,16@y] */
    print_plan(&plan);
    spmd_array_destroy(c);

    /* (iv) float32[8@x,4] @ float32[4,16@x]: the result would use x twice. */
    st = spmd_array_matmul(a_m, b_nx, NULL, &opts, &c); /* refused */
    print_refusal(st);
    /* [end] */

    /* [snippet:dry_run] */
    spmd_op_options dry = SPMD_OP_OPTIONS_INIT;
    dry.dry_run = 1; /* fill the plan, run nothing: c stays NULL, nothing moves */
    dry.plan = &plan;
    CHECK(spmd_array_matmul(a_k, b_k, SPMD_REPLICATED, &dry, &c));
    char json[1024];
    CHECK(spmd_op_plan_json(&plan, json, sizeof json));
    /* [end] */
    if (spmd_process_index() == 0)
        printf("%s\n", json);

    /* [snippet:budget] */
    /* One step may send 1 KiB per device in at most 2 collectives. */
    spmd_comm_budget budget = {1024, 2, 0, 0};
    spmd_op_options step = SPMD_OP_OPTIONS_INIT;
    step.budget = &budget;
    step.plan = &plan;
    const int cols[1] = {1};
    spmd_array *h = NULL, *s = NULL, *t = NULL;
    CHECK(spmd_array_matmul(a_k, b_k, SPMD_REPLICATED, &step, &h));              /* psum: 512 B */
    CHECK(spmd_array_reduce(SPMD_REDUCE_SUM, b_n, 1, cols, 0, NULL, &step, &s)); /* psum: 24 B */
    st = spmd_array_matmul(a_k, b_k, SPMD_REPLICATED, &step, &t); /* 1048 B, 3: refused */
    /* [end] */
    if (spmd_process_index() == 0)
        printf("budget: %lld B in %d collective(s)\n", (long long)budget.bytes_per_device,
               budget.collectives);
    print_refusal(st);
    spmd_array_destroy(s);
    spmd_array_destroy(h);

    /* [snippet:here] */
    CHECK(spmd_array_matmul(a_k, b_n, NULL, SPMD_HERE, &c)); /* the trace names this line */
    /* [end] */
    spmd_array_destroy(c);

    /* The backward of a data-parallel layer on a 1-D mesh 'data' of the 8 devices. */
    static float x_host[B][K], w_host[K][N], dy_host[B][N], dw[K][N], dw_ops[K][N];
    for (int e = 0; e < B; e++) {
        for (int k = 0; k < K; k++)
            x_host[e][k] = (float)(e + k + 1);
        for (int j = 0; j < N; j++)
            dy_host[e][j] = (float)(e - j);
    }
    for (int k = 0; k < K; k++)
        for (int j = 0; j < N; j++)
            w_host[k][j] = (float)(k + j);

    /* [snippet:backward_call] */
    const int n_data = 8;
    const char *data = "data";
    spmd_mesh *dp = NULL;
    spmd_sharding *by_example = NULL, *whole = NULL;
    CHECK(spmd_mesh_create(1, &n_data, &data, NULL, 0, &dp));
    CHECK(spmd_sharding_create_parse(dp, "P('data', None)", &by_example));
    CHECK(spmd_sharding_create_parse(dp, "P()", &whole));
    const int64_t x_shape[2] = {B, K}, w_shape[2] = {K, N}, dy_shape[2] = {B, N};
    spmd_array *in[3] = {NULL, NULL, NULL}, *grads[2] = {NULL, NULL};
    CHECK(spmd_device_put(x_host, 2, x_shape, SPMD_DTYPE_F32, by_example, &in[0]));
    CHECK(spmd_device_put(w_host, 2, w_shape, SPMD_DTYPE_F32, whole, &in[1]));
    CHECK(spmd_device_put(dy_host, 2, dy_shape, SPMD_DTYPE_F32, by_example, &in[2]));
    const spmd_spec *e = spmd_sharding_spec(by_example), *r = spmd_sharding_spec(whole);
    const spmd_spec *in_specs[3] = {e, r, e}, *out_specs[2] = {e, r};
    const spmd_out_desc outs[2] = {{2, {B, K}, SPMD_DTYPE_F32}, {2, {K, N}, SPMD_DTYPE_F32}};
    CHECK(spmd_shard_map(dp, linear_backward, NULL, 3, in, in_specs, 2, outs, out_specs, NULL,
                         grads));
    /* [end] */

    /* [snippet:backward_ops] */
    /* The same dW from whole arrays: x^T is float32[4,16@data], dy float32[16@data,16]. */
    spmd_array *xt = NULL, *dw_array = NULL;
    CHECK(spmd_array_transpose(in[0], NULL, NULL, NULL, &xt));              /* no communication */
    CHECK(spmd_array_matmul(xt, in[2], SPMD_REPLICATED, &opts, &dw_array)); /* psum over 'data' */
    /* [end] */
    print_plan(&plan);

    CHECK(spmd_array_to_host(grads[1], dw, sizeof dw));
    CHECK(spmd_array_to_host(dw_array, dw_ops, sizeof dw_ops));
    if (spmd_process_index() == 0) {
        printf("dW[0] =");
        for (int j = 0; j < N; j++)
            printf(" %g", dw[0][j]);
        printf("\ndW by hand and by array ops: %s\n",
               memcmp(dw, dw_ops, sizeof dw) == 0 ? "the same bits" : "DIFFERENT");
    }

    spmd_array_destroy(dw_array);
    spmd_array_destroy(xt);
    for (int i = 0; i < 2; i++)
        spmd_array_destroy(grads[i]);
    for (int i = 0; i < 3; i++)
        spmd_array_destroy(in[i]);
    spmd_sharding_destroy(whole);
    spmd_sharding_destroy(by_example);
    spmd_mesh_destroy(dp);
    spmd_array_destroy(b_nx);
    spmd_array_destroy(b_n);
    spmd_array_destroy(b_k);
    spmd_array_destroy(a_k);
    spmd_array_destroy(a_m);
    spmd_sharding_destroy(unreduced_x);
    spmd_sharding_destroy(cols_y);
    spmd_sharding_destroy(cols_x);
    spmd_sharding_destroy(rows_x);
    spmd_mesh_destroy(mesh);
    CHECK(spmd_finalize());
    return 0;
}
