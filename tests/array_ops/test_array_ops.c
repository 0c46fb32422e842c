/* Operations on global arrays (spmd/array_ops.h): each rule of JAX's explicit mode gives the
 * output type and the plan it should, values equal a serial reference written here, refused ops
 * name their way out and leave their operands untouched, and every plan's collectives are those
 * the trace records. Runs on 8 devices in every layout (1 x 8 ... 8 x 1) on a 4 x 2 mesh, and
 * on a 3 x 2 mesh of 6 of them (extents of 3 shards: exact or refused). */
#define _GNU_SOURCE
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static spmd_mesh *mesh;   /* ('x': 4, 'y': 2) over every device */
static spmd_mesh *mesh6;  /* ('x': 3, 'y': 2) over devices 0..5 */
static spmd_mesh *single; /* ('z': 8), for "another mesh" */
static int me;

#define MAXE 4096

static spmd_sharding *sh_on(spmd_mesh *m, const char *spec)
{
    spmd_sharding *s = NULL;
    assert_ok(spmd_sharding_create_parse(m, spec, &s));
    return s;
}

static spmd_array *put_on(spmd_mesh *m, const double *host, int ndim, const int64_t *shape,
                          spmd_dtype dt, const char *spec)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    unsigned char *buf = malloc((size_t)n * 8 + 8);
    for (int64_t i = 0; i < n; i++)
        spmd_test_store(dt, buf, i, host[i]);
    spmd_sharding *s = sh_on(m, spec);
    spmd_array *x = NULL;
    assert_ok(spmd_device_put(buf, ndim, shape, dt, s, &x));
    spmd_sharding_destroy(s);
    free(buf);
    return x;
}

static spmd_array *put(const double *host, int ndim, const int64_t *shape, const char *spec)
{
    return put_on(mesh, host, ndim, shape, SPMD_DTYPE_F32, spec);
}

/* the whole value on every process's host, as doubles */
static void fetch(spmd_array *x, double *out)
{
    spmd_mesh *m = spmd_sharding_mesh(spmd_array_sharding(x));
    spmd_sharding *rep = sh_on(m, ""), *all = sh_on(mesh, "");
    spmd_array *y = NULL, *z = NULL;
    assert_ok(spmd_reshard(x, rep, NULL, &y));
    assert_ok(spmd_reshard(y, all, NULL, &z));
    int64_t n = spmd_array_size(x);
    size_t bytes = (size_t)n * spmd_dtype_size(spmd_array_dtype(x));
    unsigned char *buf = malloc(bytes + 8);
    assert_ok(spmd_array_to_host(z, buf, bytes));
    for (int64_t i = 0; i < n; i++)
        out[i] = spmd_test_load(spmd_array_dtype(x), buf, i);
    free(buf);
    spmd_array_destroy(y);
    spmd_array_destroy(z);
    spmd_sharding_destroy(rep);
    spmd_sharding_destroy(all);
}

static void check_type(const spmd_array *x, const char *want)
{
    char got[256];
    assert_ok(spmd_array_type_format(x, got, sizeof got));
    if (strcmp(got, want))
        fail_msg("type is %s, want %s", got, want);
}

static void check_values(spmd_array *x, const double *want, double tol, const char *what)
{
    static double got[MAXE];
    int64_t n = spmd_array_size(x);
    assert_true(n <= MAXE);
    fetch(x, got);
    for (int64_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]);
        int same_nan = isnan(got[i]) && isnan(want[i]);
        if (!same_nan && !(err <= tol * (1 + fabs(want[i]))))
            fail_msg("%s: element %lld is %.9g, want %.9g", what, (long long)i, got[i], want[i]);
    }
}

static void check_plan(const spmd_op_plan *p, const char *want)
{
    char got[1024];
    assert_ok(spmd_op_plan_format(p, got, sizeof got));
    if (strcmp(got, want))
        fail_msg("plan is\n  %s\nwant\n  %s", got, want);
}

/* small whole numbers: every sum and product below is exact in float32 */
static void fill(double *v, int64_t n, int seed)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)((i * 7 + seed * 3) % 9) - 4;
}

static void ref_matmul(const double *a, const double *b, double *c, int m, int k, int n)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int l = 0; l < k; l++)
                s += a[i * k + l] * b[l * n + j];
            c[i * n + j] = s;
        }
}

/* runs an op with a plan; returns it */
static spmd_op_options with_plan(spmd_op_plan *p)
{
    spmd_op_options o = SPMD_OP_OPTIONS_INIT;
    o.plan = p;
    o.where = "test_array_ops.c";
    return o;
}

/* ---- nullary ---- */

static void test_nullary(void **state)
{
    (void)state;
    spmd_op_plan p;
    spmd_op_options o = with_plan(&p);
    spmd_array *x = NULL;
    int64_t shape[] = {8, 4};
    static double want[32];
    assert_ok(spmd_array_zeros(mesh, 2, shape, SPMD_DTYPE_F32, NULL, &o, &x));
    check_type(x, "float32[8,4]");
    check_plan(&p, "zeros -> float32[8,4]: no communication");
    memset(want, 0, sizeof want);
    check_values(x, want, 0, "zeros");
    spmd_array_destroy(x);
    spmd_sharding *s = sh_on(mesh, "'x', 'y'");
    assert_ok(spmd_array_full(mesh, 2, shape, SPMD_DTYPE_F32, 2.5, s, &o, &x));
    check_type(x, "float32[8@x,4@y]");
    for (int i = 0; i < 32; i++)
        want[i] = 2.5;
    check_values(x, want, 0, "full");
    spmd_array_destroy(x);
    assert_ok(spmd_array_iota(mesh, 2, shape, SPMD_DTYPE_I32, 0, s, &o, &x));
    check_type(x, "int32[8@x,4@y]");
    for (int i = 0; i < 32; i++)
        want[i] = i / 4;
    check_values(x, want, 0, "iota along 0");
    spmd_array_destroy(x);
    assert_ok(spmd_array_iota(mesh, 2, shape, SPMD_DTYPE_F32, 1, NULL, &o, &x));
    for (int i = 0; i < 32; i++)
        want[i] = i % 4;
    check_values(x, want, 0, "iota along 1");
    spmd_array_destroy(x);
    /* random: the same values as spmd_array_random, whatever the sharding */
    spmd_array *r = NULL;
    assert_ok(spmd_array_random_values(mesh, 2, shape, SPMD_DTYPE_F32, 42, SPMD_RANDOM_NORMAL, s,
                                       &o, &x));
    spmd_sharding *rep = sh_on(mesh, "");
    assert_ok(spmd_array_random(2, shape, SPMD_DTYPE_F32, rep, 42, SPMD_RANDOM_NORMAL, &r));
    fetch(r, want);
    check_values(x, want, 0, "random");
    spmd_array_destroy(x);
    spmd_array_destroy(r);
    spmd_sharding_destroy(rep);
    spmd_sharding_destroy(s);
}

/* ---- elementwise ---- */

static void test_elementwise(void **state)
{
    (void)state;
    spmd_op_plan p;
    spmd_op_options o = with_plan(&p);
    static double a[32], b[32], row[4], want[32];
    fill(a, 32, 1);
    fill(b, 32, 2);
    fill(row, 4, 3);
    int64_t s84[] = {8, 4}, s14[] = {1, 4}, s4[] = {4};
    spmd_array *A = put(a, 2, s84, "'x', 'y'"), *B = put(b, 2, s84, "'x', 'y'");
    spmd_array *Bx = put(b, 2, s84, "'x'"), *By = put(b, 2, s84, "'y'");
    spmd_array *Bfull = put(b, 2, s84, ""), *R = put(row, 2, s14, ""), *R1 = put(row, 1, s4, "");
    spmd_array *y = NULL;
    /* unary: the input's type, no communication */
    assert_ok(spmd_array_unary(SPMD_UNARY_SIN, A, NULL, &o, &y));
    check_type(y, "float32[8@x,4@y]");
    check_plan(&p, "sin -> float32[8@x,4@y]: no communication");
    for (int i = 0; i < 32; i++)
        want[i] = (float)sin(a[i]);
    check_values(y, want, 1e-6, "sin");
    spmd_array_destroy(y);
    /* equal specs keep */
    assert_ok(spmd_array_binary(SPMD_BINARY_MUL, A, B, NULL, &o, &y));
    check_type(y, "float32[8@x,4@y]");
    check_plan(&p, "mul -> float32[8@x,4@y]: no communication");
    for (int i = 0; i < 32; i++)
        want[i] = a[i] * b[i];
    check_values(y, want, 0, "mul");
    spmd_array_destroy(y);
    /* a size-1 dimension and a lower rank take the other's spec */
    assert_ok(spmd_array_binary(SPMD_BINARY_SUB, R, A, NULL, &o, &y));
    check_type(y, "float32[8@x,4@y]");
    for (int i = 0; i < 32; i++)
        want[i] = row[i % 4] - a[i];
    check_values(y, want, 0, "row - a");
    spmd_array_destroy(y);
    assert_ok(spmd_array_binary(SPMD_BINARY_DIV, A, R1, NULL, &o, &y));
    check_type(y, "float32[8@x,4@y]");
    for (int i = 0; i < 32; i++)
        want[i] = (float)(a[i] / row[i % 4]);
    check_values(y, want, 1e-7, "a / row");
    spmd_array_destroy(y);
    /* a rank-0 operand broadcasts everywhere */
    spmd_array *Z0 = put((double[]){2.5}, 0, NULL, "");
    assert_ok(spmd_array_binary(SPMD_BINARY_SUB, Z0, A, NULL, &o, &y));
    check_type(y, "float32[8@x,4@y]");
    for (int i = 0; i < 32; i++)
        want[i] = 2.5 - a[i];
    check_values(y, want, 0, "scalar - a");
    spmd_array_destroy(y);
    spmd_array_destroy(Z0);
    /* an unsharded full-size operand takes the other's spec (no communication) */
    assert_ok(spmd_array_binary(SPMD_BINARY_ADD, Bfull, Bx, NULL, &o, &y));
    check_type(y, "float32[8@x,4]");
    check_plan(&p, "add -> float32[8@x,4]: no communication");
    for (int i = 0; i < 32; i++)
        want[i] = 2 * b[i];
    check_values(y, want, 0, "full + x");
    spmd_array_destroy(y);
    /* different axes on one dimension: refused, every way out named; operands untouched */
    assert_status(spmd_array_binary(SPMD_BINARY_ADD, Bx, By, NULL, &o, &y), SPMD_ERR_SPEC,
                  "incompatible shardings for broadcasting", "float32[8@x,4]", "float32[8@y,4]",
                  "dimension 0", "'x' in a", "'y' in b", "SPMD_REPLICATED", "B per device");
    assert_null(y);
    check_values(Bx, b, 0, "Bx after a refusal");
    /* ... and with an out_sharding, the operands are resharded to it */
    spmd_sharding *sy = sh_on(mesh, "'y'");
    assert_ok(spmd_array_binary(SPMD_BINARY_ADD, Bx, By, sy, &o, &y));
    check_type(y, "float32[8@y,4]");
    check_plan(&p, "add -> float32[8@y,4]: reshard float32[8@x,4] -> float32[8@y,4] 32 B");
    for (int i = 0; i < 32; i++)
        want[i] = 2 * b[i];
    check_values(y, want, 0, "x + y as y");
    spmd_array_destroy(y);
    assert_ok(spmd_array_binary(SPMD_BINARY_ADD, Bx, By, SPMD_REPLICATED, &o, &y));
    check_type(y, "float32[8,4]");
    check_values(y, want, 0, "x + y replicated");
    spmd_array_destroy(y);
    spmd_sharding_destroy(sy);
    /* scalar, astype, where */
    assert_ok(spmd_array_binary_scalar(SPMD_BINARY_MAX, A, 0.5, NULL, &o, &y));
    for (int i = 0; i < 32; i++)
        want[i] = a[i] > 0.5 ? a[i] : 0.5;
    check_values(y, want, 0, "max(a, 0.5)");
    spmd_array_destroy(y);
    assert_ok(spmd_array_astype(A, SPMD_DTYPE_I32, NULL, &o, &y));
    check_type(y, "int32[8@x,4@y]");
    check_values(y, a, 0, "astype");
    spmd_array_destroy(y);
    static double c[32];
    for (int i = 0; i < 32; i++)
        c[i] = (i % 3) == 0;
    spmd_array *C = put_on(mesh, c, 2, s84, SPMD_DTYPE_BOOL, "'x'");
    assert_ok(spmd_array_where(C, A, R, NULL, &o, &y));
    check_type(y, "float32[8@x,4@y]");
    for (int i = 0; i < 32; i++)
        want[i] = c[i] ? a[i] : row[i % 4];
    check_values(y, want, 0, "where");
    spmd_array_destroy(y);
    /* bad input: dtypes, shapes, meshes */
    spmd_array *I = put_on(mesh, a, 2, s84, SPMD_DTYPE_I32, "");
    assert_status(spmd_array_binary(SPMD_BINARY_ADD, A, I, NULL, NULL, &y),
                  SPMD_ERR_INVALID_ARGUMENT, "float32", "int32", "spmd_array_astype");
    spmd_array *W = put(a, 1, (int64_t[]){8}, "");
    assert_status(spmd_array_binary(SPMD_BINARY_ADD, A, W, NULL, NULL, &y), SPMD_ERR_SHAPE,
                  "do not broadcast");
    spmd_array *O = put_on(single, a, 2, s84, SPMD_DTYPE_F32, "'z'");
    assert_status(spmd_array_binary(SPMD_BINARY_ADD, A, O, NULL, NULL, &y),
                  SPMD_ERR_INVALID_ARGUMENT, "b is on", "one mesh");
    spmd_sharding *other = sh_on(single, "");
    assert_status(spmd_array_unary(SPMD_UNARY_NEG, A, other, NULL, &y), SPMD_ERR_INVALID_ARGUMENT,
                  "out_sharding is on");
    assert_null(y);
    check_values(A, a, 0, "A after refusals");
    spmd_sharding_destroy(other);
    spmd_array *arrays[] = {A, B, Bx, By, Bfull, R, R1, C, I, W, O};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        spmd_array_destroy(arrays[i]);
}

/* ---- reductions ---- */

static void test_reductions(void **state)
{
    (void)state;
    spmd_op_plan p;
    spmd_op_options o = with_plan(&p);
    static double a[64], want[64];
    fill(a, 64, 5);
    a[13] = 4; /* ties: the first index wins */
    int64_t s88[] = {8, 8};
    spmd_array *A = put(a, 2, s88, "'x', 'y'"), *y = NULL;
    /* over a dimension sharded on x: psum over x; the result keeps y */
    assert_ok(spmd_array_reduce(SPMD_REDUCE_SUM, A, 1, (int[]){0}, 0, NULL, &o, &y));
    check_type(y, "float32[8@y]");
    check_plan(&p, "sum -> float32[8@y]: psum float32[1,4] over ('x') 24 B");
    for (int j = 0; j < 8; j++) {
        want[j] = 0;
        for (int i = 0; i < 8; i++)
            want[j] += a[i * 8 + j];
    }
    check_values(y, want, 0, "sum over 0");
    spmd_array_destroy(y);
    /* keepdims, and every dimension */
    assert_ok(spmd_array_reduce(SPMD_REDUCE_MAX, A, 1, (int[]){-1}, 1, NULL, &o, &y));
    check_type(y, "float32[8@x,1]");
    check_plan(&p, "max -> float32[8@x,1]: pmax float32[2,1] over ('y') 8 B");
    for (int i = 0; i < 8; i++) {
        want[i] = -1e9;
        for (int j = 0; j < 8; j++)
            want[i] = fmax(want[i], a[i * 8 + j]);
    }
    check_values(y, want, 0, "max over 1");
    spmd_array_destroy(y);
    assert_ok(spmd_array_reduce(SPMD_REDUCE_MEAN, A, -1, NULL, 0, NULL, &o, &y));
    check_type(y, "float32[]");
    check_plan(&p, "mean -> float32[]: psum float32[1,1] over ('x', 'y') 7 B");
    double total = 0;
    for (int i = 0; i < 64; i++)
        total += a[i];
    check_values(y, (double[]){(float)(total / 64)}, 0, "mean");
    spmd_array_destroy(y);
    assert_ok(spmd_array_reduce(SPMD_REDUCE_MIN, A, 2, (int[]){1, 0}, 0, NULL, &o, &y));
    double lo = 1e9;
    for (int i = 0; i < 64; i++)
        lo = fmin(lo, a[i]);
    check_values(y, (double[]){lo}, 0, "min");
    spmd_array_destroy(y);
    /* argmax / argmin over a sharded dimension and over all (the flat index) */
    assert_ok(spmd_array_reduce(SPMD_REDUCE_ARGMAX, A, 1, (int[]){1}, 0, NULL, &o, &y));
    check_type(y, "int32[8@x]");
    for (int i = 0; i < 8; i++) {
        int best = 0;
        for (int j = 1; j < 8; j++)
            if (a[i * 8 + j] > a[i * 8 + best])
                best = j;
        want[i] = best;
    }
    check_values(y, want, 0, "argmax over 1");
    spmd_array_destroy(y);
    assert_ok(spmd_array_reduce(SPMD_REDUCE_ARGMIN, A, -1, NULL, 0, NULL, &o, &y));
    check_type(y, "int32[]");
    int best = 0;
    for (int i = 1; i < 64; i++)
        if (a[i] < a[best])
            best = i;
    check_values(y, (double[]){best}, 0, "argmin flat");
    spmd_array_destroy(y);
    /* NaNs on several devices: the first in index order wins, whatever the devices' order */
    static double n16[64];
    fill(n16, 64, 1);
    n16[5] = NAN;  /* row 0, column 5: device (0, 1) */
    n16[8] = NAN;  /* row 1, column 0: device (0, 0), the first in the devices' order */
    n16[33] = NAN; /* device (2, 0) */
    spmd_array *N16 = put(n16, 2, s88, "'x', 'y'");
    assert_ok(spmd_array_reduce(SPMD_REDUCE_ARGMAX, N16, -1, NULL, 0, NULL, &o, &y));
    check_values(y, (double[]){5}, 0, "argmax with NaNs on several devices");
    spmd_array_destroy(y);
    /* 64 elements on ('y', 'x'): block k is device (x = k % 4, y = k / 4); 9 is in block 1,
     * device (1, 0), after device (0, 1) which holds block 4 and 33 */
    static double m64[64];
    fill(m64, 64, 2);
    m64[9] = m64[33] = NAN;
    spmd_array *NyX = put(m64, 1, (int64_t[]){64}, "('y', 'x')");
    assert_ok(spmd_array_reduce(SPMD_REDUCE_ARGMIN, NyX, 1, (int[]){0}, 0, NULL, &o, &y));
    check_values(y, (double[]){9}, 0, "argmin with NaNs, a dimension on (y, x)");
    spmd_array_destroy(y);
    spmd_array_destroy(N16);
    spmd_array_destroy(NyX);
    /* int64 beyond 2^53 compares exactly */
    static int64_t big[8];
    for (int i = 0; i < 8; i++)
        big[i] = ((int64_t)1 << 53) + (i == 5);
    spmd_sharding *bx = sh_on(mesh, "'x'");
    spmd_array *Big = NULL;
    assert_ok(spmd_device_put(big, 1, (int64_t[]){8}, SPMD_DTYPE_I64, bx, &Big));
    assert_ok(spmd_array_reduce(SPMD_REDUCE_ARGMAX, Big, -1, NULL, 0, NULL, &o, &y));
    check_values(y, (double[]){5}, 0, "argmax of int64 beyond 2^53");
    spmd_array_destroy(y);
    spmd_array_destroy(Big);
    spmd_sharding_destroy(bx);
    /* out_sharding: unreduced over exactly the reduced axes (nothing moves), or scattered */
    spmd_sharding *u = NULL;
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'y', unreduced={'x'}", &spec));
    assert_ok(spmd_sharding_create(mesh, spec, &u));
    assert_ok(spmd_array_reduce(SPMD_REDUCE_SUM, A, 1, (int[]){0}, 0, u, &o, &y));
    check_type(y, "float32[8@y]{U:x}");
    check_plan(&p, "sum -> float32[8@y]{U:x}: no communication");
    for (int j = 0; j < 8; j++) {
        want[j] = 0;
        for (int i = 0; i < 8; i++)
            want[j] += a[i * 8 + j];
    }
    check_values(y, want, 0, "sum unreduced, added up");
    /* an unreduced operand is refused until it is added up */
    spmd_array *z = NULL;
    assert_status(spmd_array_unary(SPMD_UNARY_NEG, y, NULL, NULL, &z), SPMD_ERR_SPEC, "unreduced",
                  "spmd_array_reshard_to");
    spmd_array_destroy(y);
    spmd_spec_destroy(spec);
    spmd_sharding_destroy(u);
    spmd_array *Ax = put(a, 2, s88, "'x'");
    spmd_sharding *sx = sh_on(mesh, "'x'");
    assert_ok(spmd_array_reduce(SPMD_REDUCE_SUM, Ax, 1, (int[]){0}, 0, sx, &o, &y));
    check_type(y, "float32[8@x]");
    check_plan(&p, "sum -> float32[8@x]: psum_scatter float32[1,8] over ('x') 24 B");
    check_values(y, want, 0, "sum scattered");
    spmd_array_destroy(y);
    spmd_sharding_destroy(sx);
    /* bad input */
    assert_status(spmd_array_reduce(SPMD_REDUCE_SUM, A, 1, (int[]){2}, 0, NULL, NULL, &y),
                  SPMD_ERR_INVALID_ARGUMENT, "axes[0] is 2", "rank 2");
    assert_status(spmd_array_reduce(SPMD_REDUCE_SUM, A, 2, (int[]){1, -1}, 0, NULL, NULL, &y),
                  SPMD_ERR_INVALID_ARGUMENT, "listed twice");
    assert_status(spmd_array_reduce(SPMD_REDUCE_ARGMAX, A, 2, (int[]){0, 1}, 0, NULL, NULL, &y),
                  SPMD_ERR_INVALID_ARGUMENT, "one dimension");
    assert_null(y);
    check_values(A, a, 0, "A after refusals");
    spmd_array_destroy(A);
    spmd_array_destroy(Ax);
}

/* ---- dot_general: the four cases ---- */

static void test_dot_general(void **state)
{
    (void)state;
    spmd_op_plan p;
    spmd_op_options o = with_plan(&p);
    static double a[32], b[64], c[128];
    fill(a, 32, 7);
    fill(b, 64, 8);
    ref_matmul(a, b, c, 8, 4, 16);
    int64_t s84[] = {8, 4}, s416[] = {4, 16};
    spmd_array *y = NULL;
    /* (i) free dimensions on distinct axes: C[m@x, n@y], no communication */
    spmd_array *Ax = put(a, 2, s84, "'x'"), *By = put(b, 2, s416, "None, 'y'");
    assert_ok(spmd_array_matmul(Ax, By, NULL, &o, &y));
    check_type(y, "float32[8@x,16@y]");
    check_plan(&p, "matmul -> float32[8@x,16@y]: no communication");
    check_values(y, c, 0, "case i");
    spmd_array_destroy(y);
    /* (ii) k sharded on both sides: refused, then the four legal answers */
    spmd_array *Ak = put(a, 2, s84, "None, 'x'"), *Bk = put(b, 2, s416, "'x'");
    assert_status(spmd_array_matmul(Ak, Bk, NULL, &o, &y), SPMD_ERR_SPEC, "ambiguous",
                  "float32[8,4@x] @ float32[4@x,16]", "float32[8,16] (psum over 'x', 768 B",
                  "float32[8@x,16] (psum_scatter over 'x', 384 B", "float32[8,16@x] (psum_scatter",
                  "float32[8,16]{U:x} (unreduced");
    assert_null(y);
    assert_ok(spmd_array_matmul(Ak, Bk, SPMD_REPLICATED, &o, &y));
    check_type(y, "float32[8,16]");
    check_plan(&p, "matmul -> float32[8,16]: psum float32[8,16] over ('x') 768 B");
    check_values(y, c, 0, "case ii replicated");
    spmd_array_destroy(y);
    const char *scatters[][3] = {
        {"'x'", "float32[8@x,16]",
         "matmul -> float32[8@x,16]: psum_scatter float32[8,16] over ('x') 384 B"},
        {"None, 'x'", "float32[8,16@x]",
         "matmul -> float32[8,16@x]: psum_scatter float32[8,16] over ('x') 384 B"},
        {"unreduced={'x'}", "float32[8,16]{U:x}",
         "matmul -> float32[8,16]{U:x}: no communication"}};
    for (int k = 0; k < 3; k++) {
        spmd_spec *spec = NULL;
        spmd_sharding *s = NULL;
        assert_ok(spmd_spec_parse(scatters[k][0], &spec));
        assert_ok(spmd_sharding_create(mesh, spec, &s));
        assert_ok(spmd_array_matmul(Ak, Bk, s, &o, &y));
        check_type(y, scatters[k][1]);
        check_plan(&p, scatters[k][2]);
        check_values(y, c, 0, scatters[k][1]);
        spmd_array_destroy(y);
        spmd_sharding_destroy(s);
        spmd_spec_destroy(spec);
    }
    /* (iii) k sharded on one side: that operand is all-gathered along it */
    spmd_array *B = put(b, 2, s416, "");
    assert_ok(spmd_array_matmul(Ak, B, NULL, &o, &y));
    check_type(y, "float32[8,16]");
    check_plan(&p, "matmul -> float32[8,16]: all_gather float32[8,1] over ('x') 96 B");
    check_values(y, c, 0, "case iii");
    spmd_array_destroy(y);
    /* (iv) m and n on one axis: refused */
    spmd_array *Bx = put(b, 2, s416, "None, 'x'");
    assert_status(spmd_array_matmul(Ax, Bx, NULL, &o, &y), SPMD_ERR_SPEC, "'x' twice",
                  "float32[8@x,4] @ float32[4,16@x]");
    assert_null(y);
    /* batch dimensions alike; A.T @ A through einsum; an output permuted */
    static double ba[96], bb[144], bc[192];
    fill(ba, 96, 1);
    fill(bb, 144, 2);
    for (int g = 0; g < 8; g++)
        ref_matmul(ba + g * 12, bb + g * 18, bc + g * 24, 4, 3, 6);
    spmd_array *BA = put(ba, 3, (int64_t[]){8, 4, 3}, "'x'");
    spmd_array *BB = put(bb, 3, (int64_t[]){8, 3, 6}, "'x', None, 'y'");
    assert_ok(spmd_array_einsum("bij,bjk->bik", BA, BB, NULL, &o, &y));
    check_type(y, "float32[8@x,4,6@y]");
    check_values(y, bc, 0, "batched einsum");
    spmd_array_destroy(y);
    spmd_array *BBy = put(bb, 3, (int64_t[]){8, 3, 6}, "'y'");
    assert_status(spmd_array_matmul(BA, BBy, NULL, &o, &y), SPMD_ERR_SPEC,
                  "batch dimensions must be sharded alike");
    static double ata[16], ct[128];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            ata[i * 4 + j] = 0;
            for (int r = 0; r < 8; r++)
                ata[i * 4 + j] += a[r * 4 + i] * a[r * 4 + j];
        }
    assert_status(spmd_array_einsum("ri,rj->ij", Ax, Ax, NULL, &o, &y), SPMD_ERR_SPEC, "ambiguous");
    assert_ok(spmd_array_einsum("ri,rj->ij", Ax, Ax, SPMD_REPLICATED, &o, &y));
    check_type(y, "float32[4,4]");
    check_values(y, ata, 0, "A.T @ A");
    spmd_array_destroy(y);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 16; j++)
            ct[j * 8 + i] = c[i * 16 + j];
    assert_ok(spmd_array_einsum("ij,jk->ki", Ax, By, NULL, &o, &y));
    check_type(y, "float32[16@y,8@x]");
    check_values(y, ct, 0, "einsum ->ki");
    spmd_array_destroy(y);
    assert_ok(
        spmd_array_dot_general(By, Ax, 0, NULL, NULL, 1, (int[]){0}, (int[]){1}, NULL, &o, &y));
    check_type(y, "float32[16@y,8@x]");
    check_values(y, ct, 0, "dot_general b^T a^T");
    spmd_array_destroy(y);
    /* bad input */
    assert_status(spmd_array_matmul(Ax, Ax, NULL, NULL, &y), SPMD_ERR_SHAPE,
                  "contracting dimension");
    assert_status(spmd_array_einsum("ij,jk", Ax, By, NULL, NULL, &y), SPMD_ERR_INVALID_ARGUMENT,
                  "->");
    assert_status(spmd_array_dot_general(Ax, By, 0, NULL, NULL, 2, (int[]){1, 1}, (int[]){0, 1},
                                         NULL, NULL, &y),
                  SPMD_ERR_INVALID_ARGUMENT, "twice");
    assert_null(y);
    check_values(Ak, a, 0, "Ak after refusals");
    spmd_array *arrays[] = {Ax, By, Ak, Bk, B, Bx, BA, BB, BBy};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        spmd_array_destroy(arrays[i]);
}

/* ---- structure ---- */

static void test_structure(void **state)
{
    (void)state;
    spmd_op_plan p;
    spmd_op_options o = with_plan(&p);
    static double a[64], want[128];
    fill(a, 64, 9);
    int64_t s84[] = {8, 4}, s88[] = {8, 8};
    spmd_array *A = put(a, 2, s84, "'x', 'y'"), *y = NULL;
    assert_ok(spmd_array_transpose(A, NULL, NULL, &o, &y));
    check_type(y, "float32[4@y,8@x]");
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++)
            want[j * 8 + i] = a[i * 4 + j];
    check_values(y, want, 0, "transpose");
    spmd_array_destroy(y);
    /* reshape: a split gives the sharding to the major part; merges keep the major's */
    spmd_array *Ax = put(a, 2, s84, "'x'");
    assert_ok(spmd_array_reshape(Ax, 3, (int64_t[]){4, 2, 4}, NULL, &o, &y));
    check_type(y, "float32[4@x,2,4]");
    check_values(y, a, 0, "split");
    spmd_array_destroy(y);
    assert_ok(spmd_array_reshape(Ax, 3, (int64_t[]){1, 32, 1}, NULL, &o, &y));
    check_type(y, "float32[1,32@x,1]");
    check_values(y, a, 0, "merge");
    spmd_array_destroy(y);
    assert_status(spmd_array_reshape(A, 1, (int64_t[]){32}, NULL, &o, &y), SPMD_ERR_SPEC,
                  "minor dimension", "out_sharding");
    assert_ok(spmd_array_reshape(A, 1, (int64_t[]){32}, SPMD_REPLICATED, &o, &y));
    check_type(y, "float32[32]");
    check_values(y, a, 0, "merge with out_sharding");
    spmd_array_destroy(y);
    assert_status(spmd_array_reshape(Ax, 3, (int64_t[]){2, 4, 4}, NULL, &o, &y), SPMD_ERR_SPEC,
                  "not divisible");
    assert_status(spmd_array_reshape(Ax, 2, (int64_t[]){2, 16}, NULL, &o, &y), SPMD_ERR_SPEC,
                  "several dimensions are regrouped");
    assert_status(spmd_array_reshape(Ax, 2, (int64_t[]){5, 7}, NULL, &o, &y), SPMD_ERR_SHAPE,
                  "32 elements");
    /* slice: the spec kept; a cut sharded dimension is gathered first; uneven is refused */
    assert_ok(spmd_array_slice(Ax, (int64_t[]){4, 1}, (int64_t[]){8, 3}, NULL, &o, &y));
    check_type(y, "float32[4@x,2]");
    check_plan(&p, "slice -> float32[4@x,2]: all_gather float32[2,4] over ('x') 96 B");
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            want[i * 2 + j] = a[(4 + i) * 4 + 1 + j];
    check_values(y, want, 0, "slice");
    spmd_array_destroy(y);
    assert_status(spmd_array_slice(Ax, (int64_t[]){0, 0}, (int64_t[]){6, 4}, NULL, &o, &y),
                  SPMD_ERR_SPEC, "uneven", "never replicated silently", "out_sharding");
    assert_ok(spmd_array_slice(Ax, (int64_t[]){0, 0}, (int64_t[]){6, 4}, SPMD_REPLICATED, &o, &y));
    check_type(y, "float32[6,4]");
    check_values(y, a, 0, "uneven slice, replicated on request");
    spmd_array_destroy(y);
    /* take: the indexed dimension must be whole */
    static double idx[6] = {7, 0, -1, 3, 3, 5};
    spmd_array *I = put_on(mesh, idx, 1, (int64_t[]){6}, SPMD_DTYPE_I32, "");
    spmd_array *Ay = put(a, 2, s84, "None, 'y'");
    assert_ok(spmd_array_take(Ay, I, 0, SPMD_TAKE_FILL, NULL, &o, &y));
    check_type(y, "float32[6,4@y]");
    for (int k = 0; k < 6; k++)
        for (int j = 0; j < 4; j++)
            want[k * 4 + j] = a[(((int)idx[k] + 8) % 8) * 4 + j];
    check_values(y, want, 0, "take");
    spmd_array_destroy(y);
    assert_status(spmd_array_take(Ax, I, 0, SPMD_TAKE_FILL, NULL, &o, &y), SPMD_ERR_SPEC, "sharded",
                  "whole");
    /* concatenate: one sharding, the axis whole */
    spmd_array *Ax2 = put(a + 32, 2, s84, "'x'");
    assert_ok(spmd_array_concatenate(2, (spmd_array *[]){Ax, Ax2}, 1, NULL, &o, &y));
    check_type(y, "float32[8@x,8]");
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            want[i * 8 + j] = j < 4 ? a[i * 4 + j] : a[32 + i * 4 + j - 4];
    check_values(y, want, 0, "concatenate");
    spmd_array_destroy(y);
    assert_status(spmd_array_concatenate(2, (spmd_array *[]){Ax, Ax2}, 0, NULL, &o, &y),
                  SPMD_ERR_SPEC, "sharded along the axis");
    assert_status(spmd_array_concatenate(2, (spmd_array *[]){Ax, Ay}, 1, NULL, &o, &y),
                  SPMD_ERR_SPEC, "share one sharding");
    /* softmax along a sharded axis: pmax and psum over it */
    spmd_array *S = put(a, 2, s88, "'x', 'y'");
    assert_ok(spmd_array_softmax(S, 1, NULL, &o, &y));
    check_type(y, "float32[8@x,8@y]");
    check_plan(&p, "softmax -> float32[8@x,8@y]: pmax float64[2,1] over ('y') 16 B; psum "
                   "float64[2,1] over ('y') 16 B");
    for (int i = 0; i < 8; i++) {
        double m = -1e9, s = 0;
        for (int j = 0; j < 8; j++)
            m = fmax(m, a[i * 8 + j]);
        for (int j = 0; j < 8; j++)
            s += exp(a[i * 8 + j] - m);
        for (int j = 0; j < 8; j++)
            want[i * 8 + j] = (float)(exp(a[i * 8 + j] - m) / s);
    }
    check_values(y, want, 1e-7, "softmax");
    spmd_array_destroy(y);
    /* the assertion and the explicit change */
    spmd_sharding *sxy = sh_on(mesh, "'x', 'y'"), *sy = sh_on(mesh, "'y'");
    assert_ok(spmd_array_constrain(A, sxy));
    assert_status(spmd_array_constrain(A, sy), SPMD_ERR_SPEC, "float32[8@x,4@y]", "float32[8@y,4]",
                  "spmd_array_reshard_to");
    assert_ok(spmd_array_reshard_to(A, sy, &o, &y));
    check_type(y, "float32[8@y,4]");
    check_values(y, a, 0, "reshard_to");
    spmd_array_destroy(y);
    spmd_sharding_destroy(sxy);
    spmd_sharding_destroy(sy);
    check_values(Ax, a, 0, "Ax after refusals");
    spmd_array *arrays[] = {A, Ax, I, Ay, Ax2, S};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        spmd_array_destroy(arrays[i]);
}

/* ---- dry runs, budgets, plan texts ---- */

static void test_plans(void **state)
{
    (void)state;
    static double a[32], b[64];
    fill(a, 32, 1);
    fill(b, 64, 2);
    spmd_array *Ak = put(a, 2, (int64_t[]){8, 4}, "None, 'x'");
    spmd_array *Bk = put(b, 2, (int64_t[]){4, 16}, "'x'");
    spmd_op_plan p;
    spmd_op_options o = with_plan(&p);
    o.dry_run = 1;
    spmd_array *y = (spmd_array *)&o; /* must come back NULL */
    assert_ok(spmd_array_matmul(Ak, Bk, SPMD_REPLICATED, &o, &y));
    assert_null(y);
    check_plan(&p, "matmul -> float32[8,16]: psum float32[8,16] over ('x') 768 B");
    char json[1024];
    assert_ok(spmd_op_plan_json(&p, json, sizeof json));
    assert_string_equal(json, "{\"op\":\"matmul\",\"out_type\":\"float32[8,16]\","
                              "\"bytes_per_device\":768,\"steps\":[{\"kind\":\"psum\","
                              "\"axes\":\"x\",\"dtype\":\"float32\",\"bytes_per_device\":768,"
                              "\"text\":\"psum float32[8,16] over ('x')\"}]}");
    assert_status(spmd_op_plan_json(&p, json, 20), SPMD_ERR_INVALID_ARGUMENT, "too small");
    /* a step checked against a budget: the third matmul is refused before it runs */
    spmd_comm_budget budget = {1600, -1, 0, 0};
    spmd_op_options ob = SPMD_OP_OPTIONS_INIT;
    ob.budget = &budget;
    for (int k = 0; k < 2; k++) {
        assert_ok(spmd_array_matmul(Ak, Bk, SPMD_REPLICATED, &ob, &y));
        spmd_array_destroy(y);
    }
    assert_int_equal(budget.bytes_per_device, 1536);
    assert_int_equal(budget.collectives, 2);
    assert_status(spmd_array_matmul(Ak, Bk, SPMD_REPLICATED, &ob, &y), SPMD_ERR_SPEC,
                  "over the communication budget", "psum float32[8,16] over ('x') 768 B",
                  "1536 B spent", "nothing ran");
    assert_null(y);
    assert_int_equal(budget.bytes_per_device, 1536);
    spmd_op_options bad = SPMD_OP_OPTIONS_INIT;
    bad.version = 99;
    assert_status(spmd_array_matmul(Ak, Bk, SPMD_REPLICATED, &bad, &y), SPMD_ERR_INVALID_ARGUMENT,
                  "version");
    bad.version = SPMD_OP_OPTIONS_VERSION;
    bad.dry_run = 1;
    assert_status(spmd_array_matmul(Ak, Bk, SPMD_REPLICATED, &bad, &y), SPMD_ERR_INVALID_ARGUMENT,
                  "plan is NULL");
    spmd_array_destroy(Ak);
    spmd_array_destroy(Bk);
}

/* ---- what the trace records equals what the plan said ---- */

/* The collectives of op k's plan (reshards aside) against those traced for one device */
typedef struct traced_op {
    char texts[SPMD_OP_PLAN_MAX_STEPS * 2][SPMD_TRACE_TEXT];
    int ncollectives, nreshards;
    char what[SPMD_TRACE_TEXT];
} traced_op;

static void compare_with_plan(const traced_op *t, const spmd_op_plan *p)
{
    int n = 0, reshards = 0;
    for (int s = 0; s < p->nsteps; s++) {
        if (!strcmp(p->steps[s].kind, "reshard")) {
            reshards++;
            continue;
        }
        if (n >= t->ncollectives)
            fail_msg("%s: the plan's step %d (%s) was not traced", t->what, s, p->steps[s].text);
        size_t len = strlen(p->steps[s].text);
        if (strncmp(t->texts[n], p->steps[s].text, len) || strncmp(t->texts[n] + len, " #", 2))
            fail_msg("%s: traced '%s', the plan said '%s'", t->what, t->texts[n], p->steps[s].text);
        n++;
    }
    if (n != t->ncollectives)
        fail_msg("%s: %d collectives traced, the plan said %d", t->what, t->ncollectives, n);
    if (reshards != t->nreshards)
        fail_msg("%s: %d reshards traced, the plan said %d", t->what, t->nreshards, reshards);
}

static void test_trace_matches_plans(void **state)
{
    (void)state;
    char dir[] = "/tmp/spmd_test_array_ops.XXXXXX";
    assert_non_null(mkdtemp(dir));
    static double a[64];
    fill(a, 64, 3);
    spmd_array *Ak = put(a, 2, (int64_t[]){8, 4}, "None, 'x'");
    spmd_array *Bk = put(a, 2, (int64_t[]){4, 16}, "'x'");
    spmd_array *S = put(a, 2, (int64_t[]){8, 8}, "'x', 'y'");
    spmd_array *Ax = put(a, 2, (int64_t[]){8, 4}, "'x'");
    spmd_array *By = put(a, 2, (int64_t[]){8, 4}, "'y'");
    spmd_array *B = put(a, 2, (int64_t[]){4, 16}, "");
    spmd_array *I = put_on(mesh, a, 1, (int64_t[]){4}, SPMD_DTYPE_I32, "'x'");
    spmd_array *R4 = put(a, 4, (int64_t[]){2, 4, 2, 4}, "None, 'x', None, 'y'");
    enum { N = 17 };
    static spmd_op_plan plans[N], dry_plans[N];
    spmd_array *y[N] = {0};
    spmd_op_options o[N], dry[N];
    for (int k = 0; k < N; k++) {
        o[k] = (spmd_op_options)SPMD_OP_OPTIONS_INIT;
        o[k].plan = &plans[k];
        o[k].where = "test_array_ops.c:traced";
        dry[k] = o[k];
        dry[k].plan = &dry_plans[k];
        dry[k].dry_run = 1;
    }
    spmd_sharding *sx = sh_on(mesh, "'x'"), *sy = sh_on(mesh, "'y'");
    spmd_sharding *sxy = sh_on(mesh, "'x', 'y'");
    assert_ok(spmd_trace_start(dir, NULL));
    /* each op planned dry (nothing moves, no record), then run */
#define DRY_THEN_RUN(k, call)                                                                      \
    do {                                                                                           \
        spmd_op_options *O = &dry[k];                                                              \
        spmd_array **Y = &y[k];                                                                    \
        assert_ok(call);                                                                           \
        assert_null(y[k]);                                                                         \
        O = &o[k];                                                                                 \
        assert_ok(call);                                                                           \
        assert_non_null(y[k]);                                                                     \
    } while (0)
    DRY_THEN_RUN(0, spmd_array_matmul(Ak, Bk, SPMD_REPLICATED, O, Y));
    DRY_THEN_RUN(1, spmd_array_matmul(Ak, Bk, sx, O, Y));
    DRY_THEN_RUN(2, spmd_array_einsum("ij,jk->ki", Ak, Bk, SPMD_REPLICATED, O, Y));
    DRY_THEN_RUN(3, spmd_array_reduce(SPMD_REDUCE_SUM, S, -1, NULL, 0, NULL, O, Y));
    DRY_THEN_RUN(4, spmd_array_reduce(SPMD_REDUCE_ARGMAX, S, 1, (int[]){0}, 0, NULL, O, Y));
    DRY_THEN_RUN(5, spmd_array_softmax(S, 0, NULL, O, Y));
    DRY_THEN_RUN(6, spmd_array_binary(SPMD_BINARY_ADD, Ax, By, sx, O, Y));
    DRY_THEN_RUN(7, spmd_array_slice(Ax, (int64_t[]){0, 0}, (int64_t[]){4, 4}, NULL, O, Y));
    DRY_THEN_RUN(8, spmd_array_matmul(Ak, B, NULL, O, Y));
    DRY_THEN_RUN(9, spmd_array_reduce(SPMD_REDUCE_MAX, S, 1, (int[]){1}, 1, NULL, O, Y));
    DRY_THEN_RUN(10,
                 spmd_array_reduce(SPMD_REDUCE_MIN, S, 1, (int[]){0}, 0, SPMD_REPLICATED, O, Y));
    DRY_THEN_RUN(11, spmd_array_reduce(SPMD_REDUCE_MEAN, Ax, 1, (int[]){0}, 0, sx, O, Y));
    DRY_THEN_RUN(12, spmd_array_reshape(S, 1, (int64_t[]){64}, sx, O, Y));
    DRY_THEN_RUN(13, spmd_array_take(Ax, I, 0, SPMD_TAKE_CLIP, sy, O, Y));
    DRY_THEN_RUN(14, spmd_array_concatenate(2, (spmd_array *[]){Ax, By}, 1, sxy, O, Y));
    DRY_THEN_RUN(15, spmd_array_reshard_to(S, sy, O, Y));
    DRY_THEN_RUN(16, spmd_array_reshape(R4, 2, (int64_t[]){8, 8}, SPMD_REPLICATED, O, Y));
#undef DRY_THEN_RUN
    assert_ok(spmd_trace_stop());
    char path[512];
    snprintf(path, sizeof path, "%s/trace.%d.spmd", dir, me);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    spmd_trace_header h;
    unsigned char page[SPMD_TRACE_HEADER_BYTES];
    assert_int_equal(fread(page, 1, sizeof page, f), sizeof page);
    memcpy(&h, page, sizeof h);
    spmd_trace_record *r = calloc(h.capacity, sizeof *r);
    size_t got = fread(r, sizeof *r, h.capacity, f);
    fclose(f);
    unlink(path);
    rmdir(dir);
    assert_true(h.next < h.capacity); /* the ring did not go round: records in stamp order */
    static traced_op traced[N];
    memset(traced, 0, sizeof traced);
    int first_device = spmd_mesh_local_device_id(mesh, 0), op = -1;
    uint64_t call = 0;
    for (size_t k = 0; k < got && k < h.next; k++) {
        const spmd_trace_record *t = &r[k];
        if (t->kind == SPMD_TRACE_CALL && !t->nested && !strncmp(t->what, "spmd_array_", 11)) {
            assert_true(++op < N);
            call = t->call;
            snprintf(traced[op].what, sizeof traced[op].what, "%s", t->what);
            if (!strstr(t->what, " at test_array_ops.c:traced: "))
                fail_msg("the op's record does not say where it was called: %s", t->what);
            continue;
        }
        if (op < 0 || t->call != call)
            continue;
        if (t->kind == SPMD_TRACE_CALL && !strncmp(t->what, "spmd_reshard", 12))
            traced[op].nreshards++;
        if (t->kind == SPMD_TRACE_COLLECTIVE && t->device == first_device) {
            assert_true(traced[op].ncollectives < SPMD_OP_PLAN_MAX_STEPS * 2);
            memcpy(traced[op].texts[traced[op].ncollectives++], t->what, SPMD_TRACE_TEXT);
        }
    }
    free(r);
    assert_int_equal(op + 1, N);
    for (int k = 0; k < N; k++) {
        char a_line[1024], b_line[1024];
        assert_ok(spmd_op_plan_format(&plans[k], a_line, sizeof a_line));
        assert_ok(spmd_op_plan_format(&dry_plans[k], b_line, sizeof b_line));
        assert_string_equal(a_line, b_line); /* the dry run said what the run did */
        compare_with_plan(&traced[k], &plans[k]);
        assert_true(plans[k].nsteps > 0); /* each of these communicates */
    }
    for (int k = 0; k < N; k++)
        spmd_array_destroy(y[k]);
    spmd_array *arrays[] = {Ak, Bk, S, Ax, By, B, I, R4};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        spmd_array_destroy(arrays[i]);
    spmd_sharding_destroy(sx);
    spmd_sharding_destroy(sy);
    spmd_sharding_destroy(sxy);
}

/* ---- extents of 3 shards: exact or refused ---- */

static void test_uneven_mesh(void **state)
{
    (void)state;
    spmd_op_plan p;
    spmd_op_options o = with_plan(&p);
    static double a[36], b[24], c[36], want[36];
    fill(a, 36, 4);
    fill(b, 24, 5);
    spmd_array *A = put_on(mesh6, a, 2, (int64_t[]){6, 6}, SPMD_DTYPE_F32, "'x', 'y'");
    spmd_array *B = put_on(mesh6, b, 2, (int64_t[]){6, 4}, SPMD_DTYPE_F32, "'y'");
    spmd_array *y = NULL;
    assert_ok(spmd_array_matmul(A, B, SPMD_REPLICATED, &o, &y));
    check_type(y, "float32[6,4]");
    check_plan(&p, "matmul -> float32[6,4]: psum float32[2,4] over ('y') 32 B; reshard "
                   "float32[6@x,4] -> float32[6,4] 64 B");
    ref_matmul(a, b, c, 6, 6, 4);
    check_values(y, c, 0, "matmul on 3 x 2");
    spmd_array_destroy(y);
    assert_ok(spmd_array_reduce(SPMD_REDUCE_SUM, A, 1, (int[]){1}, 0, NULL, &o, &y));
    check_type(y, "float32[6@x]");
    for (int i = 0; i < 6; i++) {
        want[i] = 0;
        for (int j = 0; j < 6; j++)
            want[i] += a[i * 6 + j];
    }
    check_values(y, want, 0, "row sums on 3 x 2");
    spmd_array_destroy(y);
    /* 4 rows do not split over 3 shards: refused, never replicated silently */
    assert_status(spmd_array_slice(A, (int64_t[]){0, 0}, (int64_t[]){4, 6}, NULL, &o, &y),
                  SPMD_ERR_SPEC, "uneven", "3 shards");
    spmd_sharding *s = sh_on(mesh6, "'x'");
    assert_status(spmd_array_zeros(mesh6, 1, (int64_t[]){4}, SPMD_DTYPE_F32, s, &o, &y),
                  SPMD_ERR_SHAPE, "does not split evenly");
    assert_status(spmd_array_reshape(A, 2, (int64_t[]){4, 9}, NULL, &o, &y), SPMD_ERR_SPEC,
                  "out_sharding");
    assert_null(y);
    spmd_sharding_destroy(s);
    spmd_array_destroy(A);
    spmd_array_destroy(B);
}

/* ---- two threads making ops at once ---- */

typedef struct racer {
    spmd_array *x;
    const double *host; /* x's values */
    const char *name;
    int ok, refused, wrong;
} racer;

/* Named threads each sum their own array over its sharded rows (partial sums cross processes):
 * whatever order the processes take the two threads' calls in, a result is right or refused. */
static void *race(void *arg)
{
    racer *r = arg;
    if (spmd_thread_set_name(r->name) != SPMD_OK)
        r->wrong++;
    for (int k = 0; k < 12; k++) {
        spmd_array *y = NULL;
        spmd_status st =
            spmd_array_reduce(SPMD_REDUCE_SUM, r->x, 1, (int[]){0}, 0, SPMD_REPLICATED, NULL, &y);
        if (st == SPMD_ERR_COLLECTIVE_MISMATCH) {
            r->refused++;
            continue;
        }
        if (st != SPMD_OK) {
            r->wrong++;
            fprintf(stderr, "process %d: %s: %s\n", me, spmd_status_name(st), spmd_last_error());
            continue;
        }
        int same = 1;
        for (int i = 0; i < spmd_array_num_shards(y); i++) {
            float buf[8];
            same &= spmd_array_shard_to_host(y, i, buf, sizeof buf) == SPMD_OK;
            for (int col = 0; col < 8 && same; col++) {
                double want = 0;
                for (int row = 0; row < 8; row++)
                    want += r->host[row * 8 + col];
                same &= buf[col] == (float)want;
            }
        }
        r->ok += same;
        r->wrong += !same;
        if (!same)
            fprintf(stderr, "process %d: thread %s got another array's sum\n", me, r->name);
        spmd_array_destroy(y);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    static double a[64], b[64];
    fill(a, 64, 6);
    fill(b, 64, 7);
    racer r[2] = {{put(a, 2, (int64_t[]){8, 8}, "'x', 'y'"), a, "sum-a", 0, 0, 0},
                  {put(b, 2, (int64_t[]){8, 8}, "'x', 'y'"), b, "sum-b", 0, 0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    SPMD_TEST_CHECK(r[0].wrong + r[1].wrong == 0, "%d calls gave wrong data or another error",
                    r[0].wrong + r[1].wrong);
    SPMD_TEST_CHECK(r[0].ok + r[1].ok + r[0].refused + r[1].refused == 24,
                    "%d ok and %d refused of 24", r[0].ok + r[1].ok, r[0].refused + r[1].refused);
    for (int i = 0; i < 2; i++)
        spmd_array_destroy(r[i].x);
    assert_ok(spmd_thread_set_name(NULL));
}

int main(void)
{
    spmd_test_init();
    if (spmd_device_count() != 8) {
        fprintf(stderr, "test_array_ops: needs 8 devices in all, not %d\n", spmd_device_count());
        spmd_finalize();
        return SPMD_TEST_SKIP;
    }
    me = spmd_process_index();
    const char *xy[] = {"x", "y"}, *z[] = {"z"};
    assert_ok(spmd_mesh_create(2, (int[]){4, 2}, xy, NULL, 0, &mesh));
    assert_ok(spmd_mesh_create(2, (int[]){3, 2}, xy, (int[]){0, 1, 2, 3, 4, 5}, 6, &mesh6));
    assert_ok(spmd_mesh_create(1, (int[]){8}, z, NULL, 0, &single));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nullary),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_dot_general),
        cmocka_unit_test(test_structure),
        cmocka_unit_test(test_plans),
        cmocka_unit_test(test_trace_matches_plans),
        cmocka_unit_test(test_uneven_mesh),
        cmocka_unit_test(test_threads),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    spmd_mesh_destroy(mesh);
    spmd_mesh_destroy(mesh6);
    spmd_mesh_destroy(single);
    return spmd_test_finish(failures + spmd_test_failed_checks());
}
