/* Block operations and in-process collectives on CUDA devices (kernels, cuBLAS, device
 * copies; within axis_index_groups too), checked element by element against plain host loops over
 * the same inputs. Runs on CUDA devices unless SPMD_PLATFORM says cpu (then the same checks hold
 * the host code to the same numbers); skips (77) where no GPU is usable. Each device's fn records
 * its mismatches; the main thread asserts on them. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* 64 x 512 elements: every operand reaches the kernel threshold (64 KiB) even in 16 bits */
enum { MAX_DEV = 64, ROWS = 64, COLS = 512 };

/* In fn: a failing call ends fn with its status (and message). */
#define TRY SPMD_TEST_TRY

typedef struct result {
    int checked, wrong;
    char first[160];
} result;

static result results[MAX_DEV];

static void note(result *r, int ok, const char *what, int64_t i, double got, double want)
{
    r->checked++;
    if (ok)
        return;
    if (!r->wrong++)
        snprintf(r->first, sizeof r->first, "%s: element %lld is %.9g, expected %.9g", what,
                 (long long)i, got, want);
}

static int close_to(double got, double want, double rel)
{
    if (want != want)
        return got != got;
    return fabs(got - want) <= rel * fmax(1.0, fabs(want));
}

static int64_t count_of(const spmd_block *b) { return spmd_block_size(b); }

/* v rounded to dtype t, as storing it in a block of t does. */
static double rounded(spmd_dtype t, double v)
{
    double cell;
    spmd_test_store(t, &cell, 0, v);
    return spmd_test_load(t, &cell, 0);
}

/* out must hold `want(i)` rounded to its dtype exactly (rel = 0) or within rel. */
static void expect(result *r, const char *what, const spmd_block *out, double rel,
                   double (*want)(const spmd_block *in, int64_t i), const spmd_block *in)
{
    for (int64_t i = 0; i < count_of(out); i++) {
        double g = spmd_test_load(out->dtype, out->data, i), w = rounded(out->dtype, want(in, i));
        note(r, rel == 0 ? (g == w || (g != g && w != w)) : close_to(g, w, rel), what, i, g, w);
    }
}

static double x_of(const spmd_block *in, int64_t i)
{
    return spmd_test_load(in->dtype, in->data, i);
}
static double neg_of(const spmd_block *in, int64_t i) { return -x_of(in, i); }
static double exp_of(const spmd_block *in, int64_t i) { return exp(x_of(in, i)); }
static double relu_of(const spmd_block *in, int64_t i) { return x_of(in, i) > 0 ? x_of(in, i) : 0; }
static double rounded(spmd_dtype t, double v);
/* b[j] = j is stored in the dtype first (bfloat16 holds 257 as 256) */
static double twice_plus_row(const spmd_block *in, int64_t i)
{
    return 2 * x_of(in, i) + rounded(in->dtype, (double)(i % COLS));
}
static double truncated(const spmd_block *in, int64_t i) { return trunc(x_of(in, i)); }

/* Values exactly representable in every float dtype (multiples of 1/4 below 64). */
static double value_at(int device, int64_t i)
{
    return (double)((i * 7 + device * 3) % 97 - 48) / 4;
}

static spmd_status fn_ops(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    (void)nin, (void)in, (void)nout, (void)out, (void)user;
    int d = spmd_ctx_device(ctx) - spmd_local_device_id(0);
    result *r = &results[d];
    int cuda = spmd_runtime_platform() == SPMD_PLATFORM_CUDA;
    note(r, (spmd_ctx_stream(ctx) != NULL) == cuda, "spmd_ctx_stream", 0, 0, cuda);
    static const spmd_dtype floats[] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_F16,
                                        SPMD_DTYPE_BF16};
    int64_t shape[2] = {ROWS, COLS}, row[1] = {COLS};
    for (int t = 0; t < 4; t++) {
        spmd_dtype dt = floats[t];
        spmd_block x, y, z, b;
        TRY(spmd_ctx_alloc(ctx, 2, shape, dt, &x));
        TRY(spmd_ctx_alloc(ctx, 2, shape, dt, &y));
        TRY(spmd_ctx_alloc(ctx, 2, shape, dt, &z));
        TRY(spmd_ctx_alloc(ctx, 1, row, dt, &b));
        TRY(spmd_op_iota(ctx, &b, 0, 1));         /* b[j] = j */
        for (int64_t i = 0; i < ROWS * COLS; i++) /* the host writes device memory */
            spmd_test_store(dt, x.data, i, value_at(d, i));
        TRY(spmd_op_unary(ctx, SPMD_UNARY_NEG, &x, &y));
        expect(r, "neg", &y, 0, neg_of, &x);
        TRY(spmd_op_unary(ctx, SPMD_UNARY_RELU, &x, &y));
        expect(r, "relu", &y, 0, relu_of, &x);
        if (dt == SPMD_DTYPE_F32 || dt == SPMD_DTYPE_F64) {
            TRY(spmd_op_unary(ctx, SPMD_UNARY_EXP, &x, &y));
            expect(r, "exp", &y, 1e-6, exp_of, &x);
        }
        TRY(spmd_op_binary_scalar(ctx, SPMD_BINARY_MUL, &x, 2.0, &y));
        TRY(spmd_op_binary(ctx, SPMD_BINARY_ADD, &y, &b, &z)); /* row broadcast */
        expect(r, "2x + row", &z, 0, twice_plus_row, &x);
        spmd_block xi;
        TRY(spmd_ctx_alloc(ctx, 2, shape, SPMD_DTYPE_I32, &xi));
        TRY(spmd_op_copy(ctx, &x, &xi));
        expect(r, "float to int32", &xi, 0, truncated, &x);
        /* sum and max over rows, against host loops */
        spmd_block s;
        TRY(spmd_ctx_alloc(ctx, 1, row, dt, &s));
        for (int kind = SPMD_REDUCE_SUM; kind <= SPMD_REDUCE_MAX; kind++) {
            TRY(spmd_op_reduce(ctx, kind, &x, 0, &s));
            for (int j = 0; j < COLS; j++) {
                double acc = x_of(&x, j);
                for (int i = 1; i < ROWS; i++)
                    acc = kind == SPMD_REDUCE_SUM ? acc + x_of(&x, i * COLS + j)
                                                  : fmax(acc, x_of(&x, i * COLS + j));
                double got = spmd_test_load(dt, s.data, j);
                acc = rounded(dt, acc);
                note(r, got == acc, kind == SPMD_REDUCE_SUM ? "reduce sum" : "reduce max", j, got,
                     acc);
            }
        }
    }
    /* gemm: C (ROWS x ROWS) = X X^T + C / 2 through cuBLAS, against a host triple loop */
    for (int t = 0; t < 4; t++) {
        spmd_dtype dt = floats[t];
        int64_t cshape[2] = {ROWS, ROWS};
        spmd_block x, c;
        TRY(spmd_ctx_alloc(ctx, 2, shape, dt, &x));
        TRY(spmd_ctx_alloc(ctx, 2, cshape, dt, &c));
        for (int64_t i = 0; i < ROWS * COLS; i++)
            spmd_test_store(dt, x.data, i, value_at(d, i) / 8);
        TRY(spmd_op_fill(ctx, &c, 1.0));
        TRY(spmd_op_gemm(ctx, 0, 1, 1.0, &x, &x, 0.5, &c));
        double tol = dt == SPMD_DTYPE_F32 ? 1e-5 : dt == SPMD_DTYPE_F64 ? 1e-12 : 1e-2;
        for (int i = 0; i < ROWS; i++)
            for (int j = 0; j < ROWS; j++) {
                double acc = 0.5;
                for (int k = 0; k < COLS; k++)
                    acc += x_of(&x, i * COLS + k) * x_of(&x, j * COLS + k);
                double got = spmd_test_load(dt, c.data, i * ROWS + j);
                note(r, close_to(got, acc, tol), "gemm", i * ROWS + j, got, acc);
            }
    }
    /* integers: wrap-around of sums and of INT64_MIN / -1, as on CPU devices */
    spmd_block a, q;
    int64_t two[1] = {2};
    TRY(spmd_ctx_alloc(ctx, 1, two, SPMD_DTYPE_I64, &a));
    TRY(spmd_ctx_alloc(ctx, 1, two, SPMD_DTYPE_I64, &q));
    ((int64_t *)a.data)[0] = INT64_MIN;
    ((int64_t *)a.data)[1] = 7;
    TRY(spmd_op_binary_scalar(ctx, SPMD_BINARY_DIV, &a, -1, &q));
    note(r, ((int64_t *)q.data)[0] == INT64_MIN && ((int64_t *)q.data)[1] == -7, "int64 div -1", 0,
         (double)((int64_t *)q.data)[1], -7);
    return SPMD_OK;
}

/* psum, pmax and pmean of f32, i32 and bf16 over every device, each element checked. */
static spmd_status fn_collectives(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                  spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)out;
    int n = *(const int *)user;
    int d = spmd_ctx_device(ctx) - spmd_local_device_id(0);
    result *r = &results[d];
    static const spmd_dtype types[] = {SPMD_DTYPE_F32, SPMD_DTYPE_I32, SPMD_DTYPE_BF16,
                                       SPMD_DTYPE_F64};
    int64_t len[1] = {100003}; /* odd: slices of unequal length */
    for (int t = 0; t < 4; t++) {
        spmd_dtype dt = types[t];
        spmd_block x, y;
        TRY(spmd_ctx_alloc(ctx, 1, len, dt, &x));
        TRY(spmd_ctx_alloc(ctx, 1, len, dt, &y));
        TRY(spmd_op_iota(ctx, &x, d, 1)); /* x[i] = d + i, on the device */
        TRY(spmd_psum(ctx, &x, &y, "x"));
        for (int64_t i = 0; i < len[0]; i += 7) {
            /* bf16 inputs are d + i rounded; they are summed in float32 and rounded once */
            double want = 0;
            for (int k = 0; k < n; k++)
                want += dt == SPMD_DTYPE_BF16 ? spmd_bf16_to_f32(spmd_f32_to_bf16((float)(k + i)))
                                              : (double)(k + i);
            if (dt == SPMD_DTYPE_BF16)
                want = spmd_bf16_to_f32(spmd_f32_to_bf16((float)want));
            note(r, spmd_test_load(dt, y.data, i) == want, "psum", i, spmd_test_load(dt, y.data, i),
                 want);
        }
        TRY(spmd_pmax(ctx, &x, &y, "x"));
        double top = (double)(n - 1) + 5;
        note(r, spmd_test_load(dt, y.data, 5) == top, "pmax", 5, spmd_test_load(dt, y.data, 5),
             top);
        if (dt == SPMD_DTYPE_F32 || dt == SPMD_DTYPE_F64) {
            TRY(spmd_pmean(ctx, &x, &y, "x"));
            double mean = (n - 1) / 2.0 + 11;
            note(r, close_to(spmd_test_load(dt, y.data, 11), mean, 1e-6), "pmean", 11,
                 spmd_test_load(dt, y.data, 11), mean);
        }
    }
    return SPMD_OK;
}

/* The copying collectives and psum_scatter on device memory: x[i] = d + i on device d. */
static spmd_status fn_moves(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin, (void)in, (void)nout, (void)out;
    int n = *(const int *)user;
    int d = spmd_ctx_device(ctx) - spmd_local_device_id(0);
    result *r = &results[d];
    static const spmd_dtype types[] = {SPMD_DTYPE_F32, SPMD_DTYPE_BF16, SPMD_DTYPE_I64};
    const int64_t L = (1 << 17) / n * n; /* 128 Ki elements, divisible by n */
    int64_t len[1] = {L}, all[1] = {L * n}, part[1] = {L / n};
    int64_t c = L / n;
    int *pairs = malloc(2 * (size_t)n * sizeof *pairs);
    if (!pairs)
        return SPMD_ERR_OUT_OF_MEMORY;
    for (int k = 0; k < n; k++) { /* device k sends to k + 1 */
        pairs[2 * k] = k;
        pairs[2 * k + 1] = (k + 1) % n;
    }
    spmd_status st = SPMD_OK;
    for (int t = 0; t < 3 && st == SPMD_OK; t++) {
        spmd_dtype dt = types[t];
        spmd_block x, g, s, p, a;
        TRY(spmd_ctx_alloc(ctx, 1, len, dt, &x));
        TRY(spmd_ctx_alloc(ctx, 1, all, dt, &g));
        TRY(spmd_ctx_alloc(ctx, 1, part, dt, &s));
        TRY(spmd_ctx_alloc(ctx, 1, len, dt, &p));
        TRY(spmd_ctx_alloc(ctx, 1, len, dt, &a));
        TRY(spmd_op_iota(ctx, &x, d, 1));
        TRY(spmd_all_gather(ctx, &x, &g, "x", 0, 1));
        TRY(spmd_psum_scatter(ctx, &x, &s, "x", 0, 1));
        TRY(spmd_ppermute(ctx, &x, &p, "x", pairs, n));
        TRY(spmd_all_to_all(ctx, &x, &a, "x", 0, 0, 1));
        for (int64_t i = 0; i < L; i += 5) {
            int from = (d + n - 1) % n;
            double want = rounded(dt, (double)(from + i));
            note(r, spmd_test_load(dt, p.data, i) == want, "ppermute", i,
                 spmd_test_load(dt, p.data, i), want);
            int64_t k = i / c; /* all_to_all: chunk k is chunk d of device k */
            want = rounded(dt, (double)(k + d * c + i % c));
            note(r, spmd_test_load(dt, a.data, i) == want, "all_to_all", i,
                 spmd_test_load(dt, a.data, i), want);
        }
        for (int64_t i = 0; i < L * n; i += 7) {
            double want = rounded(dt, (double)(i / L + i % L));
            note(r, spmd_test_load(dt, g.data, i) == want, "all_gather", i,
                 spmd_test_load(dt, g.data, i), want);
        }
        for (int64_t i = 0; i < c; i += 3) {
            double want = 0; /* summed in float32 for bfloat16, rounded once */
            for (int k = 0; k < n; k++)
                want += rounded(dt, (double)(k + d * c + i));
            want = rounded(dt, want);
            note(r, spmd_test_load(dt, s.data, i) == want, "psum_scatter", i,
                 spmd_test_load(dt, s.data, i), want);
        }
    }
    free(pairs);
    return st;
}

/* The same moves within axis_index_groups: one group listing the devices in reverse (member m
 * is device n-1-m), and a psum over pairs; x[i] = d + i on device d. */
static spmd_status fn_grouped(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)out;
    int n = *(const int *)user;
    int d = spmd_ctx_device(ctx) - spmd_local_device_id(0), m = n - 1 - d;
    result *r = &results[d];
    int positions[MAX_DEV], pairs[MAX_DEV];
    for (int k = 0; k < n; k++) {
        positions[k] = n - 1 - k;
        pairs[k] = k;
    }
    const spmd_axis_groups reversed = {1, NULL, positions}, by_pairs = {n / 2, NULL, pairs};
    const int64_t L = (1 << 17) / n * n, c = L / n;
    int64_t len[1] = {L}, all[1] = {L * n}, part[1] = {c};
    static const spmd_dtype types[] = {SPMD_DTYPE_F32, SPMD_DTYPE_BF16};
    for (int t = 0; t < 2; t++) {
        spmd_dtype dt = types[t];
        spmd_block x, g, s, a, y;
        TRY(spmd_ctx_alloc(ctx, 1, len, dt, &x));
        TRY(spmd_ctx_alloc(ctx, 1, all, dt, &g));
        TRY(spmd_ctx_alloc(ctx, 1, part, dt, &s));
        TRY(spmd_ctx_alloc(ctx, 1, len, dt, &a));
        TRY(spmd_ctx_alloc(ctx, 1, len, dt, &y));
        TRY(spmd_op_iota(ctx, &x, d, 1));
        TRY(spmd_all_gather_groups(ctx, &x, &g, "x", 0, 1, &reversed));
        TRY(spmd_psum_scatter_groups(ctx, &x, &s, "x", 0, 1, &reversed));
        TRY(spmd_all_to_all_groups(ctx, &x, &a, "x", 0, 0, 1, &reversed));
        if (n % 2 == 0)
            TRY(spmd_psum_groups(ctx, &x, &y, "x", &by_pairs));
        for (int64_t i = 0; i < L * n; i += 7) { /* chunk k: member k's block */
            double want = rounded(dt, (double)(n - 1 - i / L + i % L));
            note(r, spmd_test_load(dt, g.data, i) == want, "grouped all_gather", i,
                 spmd_test_load(dt, g.data, i), want);
        }
        for (int64_t i = 0; i < c; i += 3) { /* chunk m of the sum */
            double want = 0;
            for (int k = 0; k < n; k++)
                want += rounded(dt, (double)(k + m * c + i));
            want = rounded(dt, want);
            note(r, spmd_test_load(dt, s.data, i) == want, "grouped psum_scatter", i,
                 spmd_test_load(dt, s.data, i), want);
        }
        for (int64_t i = 0; i < L; i += 5) {
            int64_t h = i / c; /* slot h: chunk m of member h's block */
            double want = rounded(dt, (double)(n - 1 - h + m * c + i % c));
            note(r, spmd_test_load(dt, a.data, i) == want, "grouped all_to_all", i,
                 spmd_test_load(dt, a.data, i), want);
            if (n % 2 == 0) {
                want =
                    rounded(dt, rounded(dt, (double)(d + i)) + rounded(dt, (double)((d ^ 1) + i)));
                note(r, spmd_test_load(dt, y.data, i) == want, "grouped psum", i,
                     spmd_test_load(dt, y.data, i), want);
            }
        }
    }
    return SPMD_OK;
}

static void run_on_all(spmd_fn fn, void *user)
{
    int n = spmd_local_device_count();
    assert_true(n <= MAX_DEV);
    memset(results, 0, sizeof results);
    const char *name = "x";
    int ids[MAX_DEV];
    for (int k = 0; k < n; k++)
        ids[k] = spmd_local_device_id(k);
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, &n, &name, ids, n, &mesh));
    assert_ok(spmd_shard_map(mesh, fn, user, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL));
    for (int k = 0; k < n; k++) {
        if (results[k].wrong)
            fail_msg("device %d: %d of %d checks wrong; first: %s", k, results[k].wrong,
                     results[k].checked, results[k].first);
        assert_true(results[k].checked > 100);
    }
    spmd_mesh_destroy(mesh);
}

static void test_ops(void **state)
{
    (void)state;
    run_on_all(fn_ops, NULL);
}

static void test_collectives(void **state)
{
    (void)state;
    int n = spmd_local_device_count();
    run_on_all(fn_collectives, &n);
}

static void test_moves(void **state)
{
    (void)state;
    int n = spmd_local_device_count();
    run_on_all(fn_moves, &n);
}

static void test_grouped(void **state)
{
    (void)state;
    int n = spmd_local_device_count();
    run_on_all(fn_grouped, &n);
}

int main(void)
{
    if (!getenv("SPMD_PLATFORM"))
        setenv("SPMD_PLATFORM", "cuda", 1);
    if (!getenv("SPMD_CUDA_DEVICES_PER_GPU"))
        setenv("SPMD_CUDA_DEVICES_PER_GPU", "4", 1);
    spmd_status st = spmd_init(NULL);
    if (st != SPMD_OK) {
        printf("skipped: %s\n", spmd_last_error());
        return SPMD_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops), cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_moves), cmocka_unit_test(test_grouped)};
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failures);
}
