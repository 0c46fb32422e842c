/*
 * JAX's notebook "Distributed arrays and automatic parallelization" in C, with the whole-array
 * ops of spmd/array_ops.h: each op takes global arrays and returns one whose sharding follows
 * from its operands' types (JAX's explicit mode), running the collectives its plan names.
 * Shapes are scaled down (8192 -> 64).
 *
 * Part 1, the notebook's cells: a 64 x 64 array put on a 4 x 2 mesh ('x', 'y') with
 * P('x', 'y'); jnp.sin keeps its sharding; matmuls whose shardings need no communication, an
 * all-reduce, or are refused; jnp.sum; operands on different devices; with_sharding_constraint.
 * Each result prints its type, its plan and a checksum of its values (%a: every bit shows).
 *
 * Part 2, the notebook's neural network (predict: x W + b with relu between layers; loss: mean
 * over the batch of the sum of squared errors; plain SGD), layers 8-32-32-32-10, batch 64, its
 * backward pass written by hand with array ops, trained three ways: (a) on one device,
 * (b) with the batch split 8 ways, (c) with the batch split 4 ways and the hidden dimension of
 * the weights 2 ways. The train step is one function for all three; only the shardings it is
 * given differ. The losses are checked against a host reference (double, plain loops).
 *
 *   SPMD_NUM_CPU_DEVICES=8 ./distributed_arrays
 *   spmd launch --layouts 1x8,2x4,4x2,8x1 --compare exact -- ./distributed_arrays
 *
 * Every process runs the same ops (the ops are collective); process 0 prints. Exits 1 when a
 * loss is further than 1e-5 (relative) from the reference.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd.h>

static void fail(const char *what)
{
    fprintf(stderr, "distributed_arrays: %s failed: %s\n", what, spmd_last_error());
    spmd_finalize();
    exit(1);
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != SPMD_OK)                                                                     \
            fail(#call);                                                                           \
    } while (0)

/* Process 0 prints: every result printed is replicated, so the text is the same in every
 * layout of processes and devices. */
#define say(...)                                                                                   \
    do {                                                                                           \
        if (spmd_process_index() == 0)                                                             \
            printf(__VA_ARGS__);                                                                   \
    } while (0)

static spmd_sharding *make_sharding(spmd_mesh *mesh, const char *spec)
{
    spmd_sharding *s = NULL;
    CHECK(spmd_sharding_create_parse(mesh, spec, &s));
    return s;
}

static void say_type(const char *name, const spmd_array *x)
{
    char type[160];
    CHECK(spmd_array_type_format(x, type, sizeof type));
    say("%s: %s\n", name, type);
}

static void say_plan(const spmd_op_plan *plan)
{
    char line[512];
    CHECK(spmd_op_plan_format(plan, line, sizeof line));
    say("  plan: %s\n", line);
}

static void say_picture(const spmd_array *x)
{
    if (spmd_process_index() == 0) {
        CHECK(spmd_visualize_sharding(stdout, spmd_array_sharding(x), spmd_array_ndim(x),
                                      spmd_array_shape(x)));
        fflush(stdout);
    }
}

/* The sum and sum of squares of a float32 array's values, added on the host in index order
 * after gathering the whole array (the same bits whatever the sharding was). */
static void say_checksum(spmd_array *x)
{
    spmd_array *whole = NULL;
    CHECK(spmd_array_reshard_to(x, SPMD_REPLICATED, NULL, &whole));
    const int64_t n = spmd_array_size(whole);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v)
        fail("malloc");
    CHECK(spmd_array_to_host(whole, v, (size_t)n * sizeof *v));
    double sum = 0, sumsq = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += v[i];
        sumsq += (double)v[i] * v[i];
    }
    say("  checksum: sum %a sumsq %a (%.9g, %.9g)\n", sum, sumsq, sum, sumsq);
    free(v);
    spmd_array_destroy(whole);
}

/* A refused op's status and message. */
static void say_refusal(spmd_status st)
{
    if (st == SPMD_OK)
        fail("an op that should be refused");
    say("  refused, %s: %s\n", spmd_status_name(st), spmd_last_error());
}

/* ---- part 1: the notebook's cells ---- */

enum { N = 64 }; /* the notebook's 8192 */

static void cells(void)
{
    const int shape[2] = {4, 2};
    const char *names[2] = {"x", "y"};
    spmd_mesh *mesh = NULL;
    CHECK(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    spmd_sharding *p_xy = make_sharding(mesh, "P('x', 'y')");
    spmd_sharding *p_x = make_sharding(mesh, "P('x', None)");
    spmd_sharding *p_y = make_sharding(mesh, "P(None, 'y')");
    spmd_sharding *p_yrows = make_sharding(mesh, "P('y', None)");
    spmd_op_plan plan;
    spmd_op_options opts = SPMD_OP_OPTIONS_INIT;
    opts.plan = &plan;
    const int64_t nn[2] = {N, N};

    say("== mesh = jax.make_mesh((4, 2), ('x', 'y'))\n");
    say("== x = jax.random.normal(key, (%d, %d))\n", N, N);
    spmd_array *x = NULL;
    CHECK(spmd_array_random_values(mesh, 2, nn, SPMD_DTYPE_F32, 0, SPMD_RANDOM_NORMAL, NULL, &opts,
                                   &x));
    say_type("x", x);
    say_picture(x);
    say_checksum(x);

    say("\n== y = jax.device_put(x, NamedSharding(mesh, P('x', 'y')))\n");
    spmd_array *y = NULL;
    CHECK(spmd_array_reshard_to(x, p_xy, &opts, &y));
    say_type("y", y);
    say_plan(&plan);
    say_picture(y);

    say("\n== z = jnp.sin(y): computation follows data\n");
    spmd_array *z = NULL;
    CHECK(spmd_array_unary(SPMD_UNARY_SIN, y, NULL, &opts, &z));
    say_type("z", z);
    say_plan(&plan);
    say_picture(z);
    say_checksum(z);

    say("\n== rows @ cols: x by rows over 'x' times x by columns over 'y'\n");
    spmd_array *rows = NULL, *cols = NULL, *w = NULL;
    CHECK(spmd_array_reshard_to(x, p_x, NULL, &rows));
    CHECK(spmd_array_reshard_to(x, p_y, NULL, &cols));
    say_type("rows", rows);
    say_picture(rows);
    say_type("cols", cols);
    say_picture(cols);
    CHECK(spmd_array_matmul(rows, cols, NULL, &opts, &w));
    say_type("rows @ cols", w);
    say_plan(&plan);
    say_picture(w);
    say_checksum(w);
    spmd_array_destroy(w);

    /* k of y is on 'y', k of x_T on 'y' as well: each device holds a partial sum over 'y',
     * and nothing in the types says how the result should be laid out. */
    say("\n== y @ v, v = device_put(x, P('y', None)): the contraction is sharded on both "
        "sides\n");
    spmd_array *v = NULL;
    CHECK(spmd_array_reshard_to(x, p_yrows, NULL, &v));
    say_type("v", v);
    say_refusal(spmd_array_matmul(y, v, NULL, &opts, &w));
    CHECK(spmd_array_matmul(y, v, p_x, &opts, &w));
    say_type("y @ v, out_sharding=P('x', None)", w);
    say_plan(&plan);
    say_checksum(w);
    spmd_array_destroy(w);

    say("\n== y @ y: k is on 'y' in one operand and on 'x' in the other\n");
    say_refusal(spmd_array_matmul(y, y, NULL, &opts, &w));

    say("\n== jnp.sum(y), jnp.sum(y, axis=0)\n");
    spmd_array *total = NULL, *colsum = NULL;
    CHECK(spmd_array_reduce(SPMD_REDUCE_SUM, y, -1, NULL, 0, NULL, &opts, &total));
    say_type("jnp.sum(y)", total);
    say_plan(&plan);
    float t = 0;
    CHECK(spmd_array_to_host(total, &t, sizeof t));
    say("  value: %a (%.9g)\n", t, t);
    const int axis0[1] = {0};
    CHECK(spmd_array_reduce(SPMD_REDUCE_SUM, y, 1, axis0, 0, NULL, &opts, &colsum));
    say_type("jnp.sum(y, axis=0)", colsum);
    say_plan(&plan);
    say_checksum(colsum);

    /* The notebook's error cell: y on devices 0-3, z on 4-7. */
    say("\n== y + z with y on devices 0-3 and z on devices 4-7\n");
    const int four = 4, low[4] = {0, 1, 2, 3}, high[4] = {4, 5, 6, 7};
    const char *xname = "x";
    spmd_mesh *m_low = NULL, *m_high = NULL;
    CHECK(spmd_mesh_create(1, &four, &xname, low, 4, &m_low));
    CHECK(spmd_mesh_create(1, &four, &xname, high, 4, &m_high));
    spmd_sharding *s_low = make_sharding(m_low, "P('x')"),
                  *s_high = make_sharding(m_high, "P('x')");
    const int64_t n8[1] = {8};
    spmd_array *y1 = NULL, *z1 = NULL, *sum1 = NULL;
    CHECK(spmd_array_random_values(m_low, 1, n8, SPMD_DTYPE_F32, 1, SPMD_RANDOM_NORMAL, s_low, NULL,
                                   &y1));
    CHECK(spmd_array_random_values(m_high, 1, n8, SPMD_DTYPE_F32, 1, SPMD_RANDOM_NORMAL, s_high,
                                   NULL, &z1));
    say_refusal(spmd_array_binary(SPMD_BINARY_ADD, y1, z1, NULL, NULL, &sum1));

    say("\n== jax.lax.with_sharding_constraint(z, ...): asserts, does not convert\n");
    CHECK(spmd_array_constrain(z, p_xy));
    say("  P('x', 'y'): SPMD_OK\n");
    say_refusal(spmd_array_constrain(z, p_x));

    spmd_array_destroy(z1);
    spmd_array_destroy(y1);
    spmd_sharding_destroy(s_high);
    spmd_sharding_destroy(s_low);
    spmd_mesh_destroy(m_high);
    spmd_mesh_destroy(m_low);
    spmd_array_destroy(colsum);
    spmd_array_destroy(total);
    spmd_array_destroy(v);
    spmd_array_destroy(cols);
    spmd_array_destroy(rows);
    spmd_array_destroy(z);
    spmd_array_destroy(y);
    spmd_array_destroy(x);
    spmd_sharding_destroy(p_yrows);
    spmd_sharding_destroy(p_y);
    spmd_sharding_destroy(p_x);
    spmd_sharding_destroy(p_xy);
    spmd_mesh_destroy(mesh);
}

/* ---- part 2: the neural network ---- */

enum { NLAYERS = 4, BATCH = 64, STEPS = 8, MAX_TEMPS = 128 };
static const int sizes[NLAYERS + 1] = {8, 32, 32, 32, 10};
#define LEARNING_RATE 0.01
#define TOLERANCE 1e-5

/* The initial parameters and the batch, on the host (float32, as on the devices). */
typedef struct problem {
    float *w[NLAYERS], *b[NLAYERS], *x, *t;
} problem;

/* Where each array of a training run lives. act[l]: out_sharding of layer l's product
 * a_l @ W_l and of its gradient dL/da_l; NULL lets the rule decide. */
typedef struct layout {
    const char *title;
    spmd_mesh *mesh;
    spmd_sharding *batch, *w[NLAYERS], *b[NLAYERS];
    const spmd_sharding *act[NLAYERS];
} layout;

typedef struct params {
    spmd_array *w[NLAYERS], *b[NLAYERS];
} params;

/* The ops of one step: their results, freed together when the step ends, and what they
 * communicated (a budget without limits counts). `show`: print the plan of each op that runs
 * a collective. */
typedef struct tape {
    spmd_op_options opts;
    spmd_op_plan plan;
    spmd_comm_budget spent;
    int show, n;
    spmd_array *temps[MAX_TEMPS];
} tape;

static void tape_init(tape *tp, int show)
{
    memset(tp, 0, sizeof *tp);
    CHECK(spmd_op_options_init(&tp->opts, SPMD_OP_OPTIONS_VERSION));
    tp->opts.plan = &tp->plan;
    tp->opts.budget = &tp->spent;
    tp->spent.max_bytes_per_device = -1;
    tp->spent.max_collectives = -1;
    tp->show = show;
}

static void tape_free(tape *tp)
{
    for (int i = 0; i < tp->n; i++)
        spmd_array_destroy(tp->temps[i]);
    tp->n = 0;
}

static spmd_array *record(tape *tp, const char *what, spmd_status st, spmd_array *r)
{
    if (st != SPMD_OK)
        fail(what);
    if (tp->show && tp->plan.nsteps > 0) {
        char line[512];
        CHECK(spmd_op_plan_format(&tp->plan, line, sizeof line));
        say("    %-16s %s\n", what, line);
    }
    if (tp->n == MAX_TEMPS)
        fail("record (MAX_TEMPS)");
    tp->temps[tp->n++] = r;
    return r;
}

/* One wrapper per op, so that the step reads as the JAX code does. */
static spmd_array *matmul(tape *tp, const char *what, spmd_array *a, spmd_array *b,
                          const spmd_sharding *out)
{
    spmd_array *r = NULL;
    spmd_status st = spmd_array_matmul(a, b, out, &tp->opts, &r);
    return record(tp, what, st, r);
}

static spmd_array *einsum(tape *tp, const char *what, const char *subscripts, spmd_array *a,
                          spmd_array *b, const spmd_sharding *out)
{
    spmd_array *r = NULL;
    spmd_status st = spmd_array_einsum(subscripts, a, b, out, &tp->opts, &r);
    return record(tp, what, st, r);
}

static spmd_array *binary(tape *tp, const char *what, spmd_binary_op op, spmd_array *a,
                          spmd_array *b)
{
    spmd_array *r = NULL;
    spmd_status st = spmd_array_binary(op, a, b, NULL, &tp->opts, &r);
    return record(tp, what, st, r);
}

static spmd_array *scale(tape *tp, const char *what, spmd_array *a, double s)
{
    spmd_array *r = NULL;
    spmd_status st = spmd_array_binary_scalar(SPMD_BINARY_MUL, a, s, NULL, &tp->opts, &r);
    return record(tp, what, st, r);
}

static spmd_array *unary(tape *tp, const char *what, spmd_unary_op op, spmd_array *a)
{
    spmd_array *r = NULL;
    spmd_status st = spmd_array_unary(op, a, NULL, &tp->opts, &r);
    return record(tp, what, st, r);
}

static spmd_array *reduce(tape *tp, const char *what, spmd_reduce_kind kind, spmd_array *a,
                          int axis)
{
    spmd_array *r = NULL;
    spmd_status st = spmd_array_reduce(kind, a, axis < 0 ? -1 : 1, &axis, 0, NULL, &tp->opts, &r);
    return record(tp, what, st, r);
}

/* dL/dz = dL/da where z > 0 (relu'), with a = relu(z): a is nonzero exactly there. */
static spmd_array *relu_backward(tape *tp, const char *what, spmd_array *a, spmd_array *da,
                                 spmd_array *zero)
{
    spmd_array *mask = NULL, *r = NULL;
    spmd_status st = spmd_array_astype(a, SPMD_DTYPE_BOOL, NULL, &tp->opts, &mask);
    record(tp, what, st, mask);
    st = spmd_array_where(mask, da, zero, NULL, &tp->opts, &r);
    return record(tp, what, st, r);
}

/*
 * train_step of the notebook, jax.grad written out: returns the loss of `p` on (x, t) and
 * replaces `p` by p - lr * grad. Each gradient takes its parameter's sharding: for weights
 * whose rows are contracted over the sharded batch, that is the answer (psum) to a contraction
 * sharded on both sides, which the rules refuse without one.
 */
static float train_step(tape *tp, const layout *lay, params *p, spmd_array *x, spmd_array *t)
{
    char what[NLAYERS][4][24];
    for (int l = 0; l < NLAYERS; l++) {
        snprintf(what[l][0], sizeof what[l][0], "z%d = a%d @ W%d", l + 1, l, l + 1);
        snprintf(what[l][1], sizeof what[l][1], "dW%d = a%d^T dz%d", l + 1, l, l + 1);
        snprintf(what[l][2], sizeof what[l][2], "db%d", l + 1);
        snprintf(what[l][3], sizeof what[l][3], "da%d = dz%d W%d^T", l, l + 1, l + 1);
    }

    /* predict: z = a W + b, a = relu(z) between layers */
    spmd_array *a[NLAYERS + 1], *z = NULL;
    a[0] = x;
    for (int l = 0; l < NLAYERS; l++) {
        spmd_array *xw = matmul(tp, what[l][0], a[l], p->w[l], lay->act[l]);
        z = binary(tp, "z + b", SPMD_BINARY_ADD, xw, p->b[l]);
        a[l + 1] = l + 1 < NLAYERS ? unary(tp, "relu", SPMD_UNARY_RELU, z) : z;
    }
    /* loss = mean over the batch of sum over the outputs of (pred - t)^2 */
    spmd_array *diff = binary(tp, "pred - t", SPMD_BINARY_SUB, a[NLAYERS], t);
    spmd_array *sq = binary(tp, "square", SPMD_BINARY_MUL, diff, diff);
    spmd_array *loss =
        reduce(tp, "loss", SPMD_REDUCE_MEAN, reduce(tp, "sum", SPMD_REDUCE_SUM, sq, 1), -1);

    /* backward */
    spmd_array *zero = NULL;
    spmd_status st = spmd_array_zeros(lay->mesh, 0, NULL, SPMD_DTYPE_F32, NULL, &tp->opts, &zero);
    record(tp, "zero", st, zero);
    spmd_array *dz = scale(tp, "dpred", diff, 2.0 / BATCH), *gw[NLAYERS], *gb[NLAYERS];
    for (int l = NLAYERS - 1; l >= 0; l--) {
        gw[l] = einsum(tp, what[l][1], "bi,bj->ij", a[l], dz, lay->w[l]);
        gb[l] = reduce(tp, what[l][2], SPMD_REDUCE_SUM, dz, 0);
        if (l > 0) {
            spmd_array *da = einsum(tp, what[l][3], "bj,ij->bi", dz, p->w[l], lay->act[l - 1]);
            dz = relu_backward(tp, "relu'", a[l], da, zero);
        }
    }

    float value = 0;
    CHECK(spmd_array_to_host(loss, &value, sizeof value));

    /* SGD; the new parameters outlive the step */
    for (int l = 0; l < NLAYERS; l++) {
        spmd_array *w = NULL, *b = NULL;
        CHECK(spmd_array_binary(SPMD_BINARY_SUB, p->w[l], scale(tp, "lr dW", gw[l], LEARNING_RATE),
                                NULL, &tp->opts, &w));
        CHECK(spmd_array_binary(SPMD_BINARY_SUB, p->b[l], scale(tp, "lr db", gb[l], LEARNING_RATE),
                                NULL, &tp->opts, &b));
        spmd_array_destroy(p->w[l]);
        spmd_array_destroy(p->b[l]);
        p->w[l] = w;
        p->b[l] = b;
    }
    return value;
}

/* jax.device_put of the parameters and the batch, then STEPS steps; losses[] gets each step's
 * loss. Only the processes that own devices of the layout's mesh take part. */
static void train(const problem *pr, const layout *lay, float *losses)
{
    say("\n== %s\n", lay->title);
    params p;
    spmd_array *x = NULL, *t = NULL;
    for (int l = 0; l < NLAYERS; l++) {
        const int64_t ws[2] = {sizes[l], sizes[l + 1]}, bs[1] = {sizes[l + 1]};
        CHECK(spmd_device_put(pr->w[l], 2, ws, SPMD_DTYPE_F32, lay->w[l], &p.w[l]));
        CHECK(spmd_device_put(pr->b[l], 1, bs, SPMD_DTYPE_F32, lay->b[l], &p.b[l]));
    }
    const int64_t xs[2] = {BATCH, sizes[0]}, ts[2] = {BATCH, sizes[NLAYERS]};
    CHECK(spmd_device_put(pr->x, 2, xs, SPMD_DTYPE_F32, lay->batch, &x));
    CHECK(spmd_device_put(pr->t, 2, ts, SPMD_DTYPE_F32, lay->batch, &t));
    say_type("x", x);
    say_type("t", t);
    for (int l = 0; l < NLAYERS; l++) {
        char wn[8], bn[8];
        snprintf(wn, sizeof wn, "W%d", l + 1);
        snprintf(bn, sizeof bn, "b%d", l + 1);
        say_type(wn, p.w[l]);
        say_type(bn, p.b[l]);
    }

    for (int step = 0; step < STEPS; step++) {
        tape tp;
        tape_init(&tp, step == 0);
        if (step == 0)
            say("  the collectives of one step:\n");
        losses[step] = train_step(&tp, lay, &p, x, t);
        if (step == 0)
            say("  one step: %d collective(s), %lld B per device\n", tp.spent.collectives,
                (long long)tp.spent.bytes_per_device);
        tape_free(&tp);
        say("  step %d loss %.9g (%a)\n", step, losses[step], losses[step]);
    }

    for (int l = 0; l < NLAYERS; l++) {
        spmd_array_destroy(p.w[l]);
        spmd_array_destroy(p.b[l]);
    }
    spmd_array_destroy(x);
    spmd_array_destroy(t);
}

/* The notebook's init_model: W ~ N(0, 1) / sqrt(n_in), b ~ N(0, 1), inputs and targets
 * N(0, 1); drawn as replicated arrays on `mesh` and copied to the host. */
static void init_problem(spmd_mesh *mesh, problem *pr)
{
    uint64_t seed = 1;
    for (int l = 0; l < NLAYERS; l++) {
        const int64_t ws[2] = {sizes[l], sizes[l + 1]}, bs[1] = {sizes[l + 1]};
        spmd_array *w = NULL, *scaled = NULL, *b = NULL;
        CHECK(spmd_array_random_values(mesh, 2, ws, SPMD_DTYPE_F32, seed++, SPMD_RANDOM_NORMAL,
                                       NULL, NULL, &w));
        CHECK(spmd_array_binary_scalar(SPMD_BINARY_DIV, w, sqrt(sizes[l]), NULL, NULL, &scaled));
        CHECK(spmd_array_random_values(mesh, 1, bs, SPMD_DTYPE_F32, seed++, SPMD_RANDOM_NORMAL,
                                       NULL, NULL, &b));
        pr->w[l] = malloc(sizeof(float) * (size_t)(sizes[l] * sizes[l + 1]));
        pr->b[l] = malloc(sizeof(float) * (size_t)sizes[l + 1]);
        if (!pr->w[l] || !pr->b[l])
            fail("malloc");
        CHECK(spmd_array_to_host(scaled, pr->w[l],
                                 sizeof(float) * (size_t)(sizes[l] * sizes[l + 1])));
        CHECK(spmd_array_to_host(b, pr->b[l], sizeof(float) * (size_t)sizes[l + 1]));
        spmd_array_destroy(w);
        spmd_array_destroy(scaled);
        spmd_array_destroy(b);
    }
    float **data[2] = {&pr->x, &pr->t};
    const int cols[2] = {sizes[0], sizes[NLAYERS]};
    for (int i = 0; i < 2; i++) {
        const int64_t shape[2] = {BATCH, cols[i]};
        const size_t bytes = sizeof(float) * (size_t)(BATCH * cols[i]);
        spmd_array *v = NULL;
        CHECK(spmd_array_random_values(mesh, 2, shape, SPMD_DTYPE_F32, seed++, SPMD_RANDOM_NORMAL,
                                       NULL, NULL, &v));
        *data[i] = malloc(bytes);
        if (!*data[i])
            fail("malloc");
        CHECK(spmd_array_to_host(v, *data[i], bytes));
        spmd_array_destroy(v);
    }
}

static void free_problem(problem *pr)
{
    for (int l = 0; l < NLAYERS; l++) {
        free(pr->w[l]);
        free(pr->b[l]);
    }
    free(pr->x);
    free(pr->t);
}

/* The unsharded training in double with plain loops, from the same float32 values. */
static void reference(const problem *pr, double *losses)
{
    enum { WIDEST = 32 }; /* the largest of sizes[] */
    static double w[NLAYERS][WIDEST * WIDEST], b[NLAYERS][WIDEST], a[NLAYERS + 1][BATCH * WIDEST],
        dz[BATCH * WIDEST], da[BATCH * WIDEST];
    for (int l = 0; l < NLAYERS; l++) {
        for (int k = 0; k < sizes[l] * sizes[l + 1]; k++)
            w[l][k] = pr->w[l][k];
        for (int j = 0; j < sizes[l + 1]; j++)
            b[l][j] = pr->b[l][j];
    }
    for (int k = 0; k < BATCH * sizes[0]; k++)
        a[0][k] = pr->x[k];
    for (int step = 0; step < STEPS; step++) {
        for (int l = 0; l < NLAYERS; l++) {
            const int n_in = sizes[l], n_out = sizes[l + 1];
            for (int e = 0; e < BATCH; e++)
                for (int j = 0; j < n_out; j++) {
                    double s = b[l][j];
                    for (int i = 0; i < n_in; i++)
                        s += a[l][e * n_in + i] * w[l][i * n_out + j];
                    a[l + 1][e * n_out + j] = l + 1 < NLAYERS && s < 0 ? 0 : s;
                }
        }
        const int n_o = sizes[NLAYERS];
        double loss = 0;
        for (int k = 0; k < BATCH * n_o; k++) {
            const double d = a[NLAYERS][k] - pr->t[k];
            loss += d * d;
            dz[k] = 2 * d / BATCH;
        }
        losses[step] = loss / BATCH;
        for (int l = NLAYERS - 1; l >= 0; l--) {
            const int n_in = sizes[l], n_out = sizes[l + 1];
            for (int i = 0; i < n_in && l > 0; i++) /* da uses W before its update */
                for (int e = 0; e < BATCH; e++) {
                    double s = 0;
                    for (int j = 0; j < n_out; j++)
                        s += dz[e * n_out + j] * w[l][i * n_out + j];
                    da[e * n_in + i] = a[l][e * n_in + i] > 0 ? s : 0;
                }
            for (int i = 0; i < n_in; i++)
                for (int j = 0; j < n_out; j++) {
                    double g = 0;
                    for (int e = 0; e < BATCH; e++)
                        g += a[l][e * n_in + i] * dz[e * n_out + j];
                    w[l][i * n_out + j] -= LEARNING_RATE * g;
                }
            for (int j = 0; j < n_out; j++) {
                double g = 0;
                for (int e = 0; e < BATCH; e++)
                    g += dz[e * n_out + j];
                b[l][j] -= LEARNING_RATE * g;
            }
            memcpy(dz, da, sizeof(double) * (size_t)(BATCH * n_in));
        }
    }
}

static void destroy_layout(layout *lay)
{
    spmd_sharding_destroy(lay->batch);
    for (int l = 0; l < NLAYERS; l++) {
        spmd_sharding_destroy(lay->w[l]);
        spmd_sharding_destroy(lay->b[l]);
    }
    spmd_mesh_destroy(lay->mesh);
}

int main(void)
{
    CHECK(spmd_init(NULL));
    if (spmd_device_count() != 8) {
        fprintf(stderr,
                "distributed_arrays needs 8 devices, got %d; run with SPMD_NUM_CPU_DEVICES=8, "
                "or under spmd launch --layouts 1x8,2x4,4x2,8x1\n",
                spmd_device_count());
        spmd_finalize();
        return 2;
    }
    if (spmd_process_index() == 0)
        fprintf(stderr, "distributed_arrays: %d process(es) x %d device(s)\n", spmd_process_count(),
                spmd_local_device_count());

    say("# Part 1: distributed arrays (8192 -> %d)\n\n", N);
    cells();

    say("\n# Part 2: the neural network, layers");
    for (int l = 0; l <= NLAYERS; l++)
        say("%s%d", l ? "-" : " ", sizes[l]);
    say(" relu, batch %d, SGD lr %g, %d steps\n", BATCH, LEARNING_RATE, STEPS);

    /* (a) one device: the notebook's unsharded baseline (a mesh of no axes holds one device) */
    layout one = {"(a) unsharded: device 0", NULL, NULL, {NULL}, {NULL}, {NULL}};
    const int device0 = 0;
    CHECK(spmd_mesh_create(0, NULL, NULL, &device0, 1, &one.mesh));
    one.batch = make_sharding(one.mesh, "P()");
    /* (b) 8-way batch data parallelism: the batch over 'batch', the parameters replicated */
    layout dp = {
        "(b) 8-way batch data parallelism: mesh ('batch': 8)", NULL, NULL, {NULL}, {NULL}, {NULL}};
    const int eight = 8;
    const char *batch_name = "batch";
    CHECK(spmd_mesh_create(1, &eight, &batch_name, NULL, 0, &dp.mesh));
    dp.batch = make_sharding(dp.mesh, "P('batch', None)");
    /* (c) 4 x 2 data and model parallelism: the batch over 'batch', the hidden dimension over
     * 'model', alternately the columns and the rows of the weights (the notebook splits W2
     * over both axes; in explicit mode its backward dz2 @ W2^T would then use 'batch' twice) */
    layout mp = {"(c) 4x2 batch data parallelism and model tensor parallelism: mesh ('batch': "
                 "4, 'model': 2)",
                 NULL,
                 NULL,
                 {NULL},
                 {NULL},
                 {NULL}};
    const int four_two[2] = {4, 2};
    const char *mp_names[2] = {"batch", "model"};
    CHECK(spmd_mesh_create(2, four_two, mp_names, NULL, 0, &mp.mesh));
    mp.batch = make_sharding(mp.mesh, "P('batch', None)");
    static const char *const mp_w[NLAYERS] = {"P(None, 'model')", "P('model', None)",
                                              "P(None, 'model')", "P('model', None)"};
    static const char *const mp_b[NLAYERS] = {"P('model')", "P()", "P('model')", "P()"};
    for (int l = 0; l < NLAYERS; l++) {
        one.w[l] = make_sharding(one.mesh, "P()");
        one.b[l] = make_sharding(one.mesh, "P()");
        dp.w[l] = make_sharding(dp.mesh, "P()");
        dp.b[l] = make_sharding(dp.mesh, "P()");
        mp.w[l] = make_sharding(mp.mesh, mp_w[l]);
        mp.b[l] = make_sharding(mp.mesh, mp_b[l]);
    }
    /* after a W split by rows over 'model', the products are partial sums over 'model': the
     * rules refuse them until told the layout, which here keeps the batch split (a psum) */
    mp.act[1] = mp.act[3] = mp.batch;

    problem pr;
    init_problem(dp.mesh, &pr);
    double ref[STEPS];
    reference(&pr, ref);
    float losses[3][STEPS];
    layout *lays[3] = {&one, &dp, &mp};
    const int have_one = spmd_mesh_num_local_devices(one.mesh) > 0;
    for (int k = 0; k < 3; k++)
        if (k > 0 || have_one)
            train(&pr, lays[k], losses[k]);

    /* Against the reference; process 0 prints (only it ran (a)), each process checks its own. */
    say("\n== losses against a host reference (double, plain loops)\n");
    double worst = 0;
    for (int k = have_one ? 0 : 1; k < 3; k++) {
        double largest = 0;
        int same = 0;
        for (int s = 0; s < STEPS; s++) {
            const double d = fabs(losses[k][s] - ref[s]) / fabs(ref[s]);
            largest = d > largest ? d : largest;
            same += have_one && memcmp(&losses[k][s], &losses[0][s], sizeof(float)) == 0;
        }
        say("%s: largest relative difference %.3g; bit-identical to (a) at %d of %d steps\n",
            lays[k]->title, largest, same, STEPS);
        worst = largest > worst ? largest : worst;
    }
    const int ok = worst <= TOLERANCE;
    say("largest relative difference %.3g: %s (tolerance %g)\n", worst, ok ? "ok" : "TOO LARGE",
        TOLERANCE);
    fflush(stdout);

    free_problem(&pr);
    for (int k = 0; k < 3; k++)
        destroy_layout(lays[k]);
    CHECK(spmd_finalize());
    return ok ? 0 : 1;
}
