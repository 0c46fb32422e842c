/*
 * Reductions between processes of one device each read the input where it is (no copy into the
 * output first): psum, pmean, pmax, pmin, psum_scatter (of dimension 0, and of dimension 1: the
 * whole sum between processes) and psum_many, at sizes across every path (combined with the
 * agreement, by halves, streamed through the rings, read straight), separate and in place.
 * Each result is checked against a host loop over every device's values, each separate output
 * starts from a value no result has, and each separate input must come back unchanged.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define CHECK SPMD_TEST_TRY

static int N;
static spmd_mesh *line;
static atomic_int wrong;

/* Device d's element k: small integers, so every sum is exact in each dtype. */
static double value(int d, int64_t k) { return (double)((d * 31 + k * 7) % 23) - 11; }

typedef enum kind { PSUM, PMEAN, PMAX, PMIN, SCATTER, SCATTER_INNER, MANY } kind;
typedef spmd_status (*reduction)(spmd_ctx *, const spmd_block *, spmd_block *, const char *);
static const reduction reductions[] = {spmd_psum, spmd_pmean, spmd_pmax, spmd_pmin};
static const char *const kind_names[] = {
    "psum", "pmean", "pmax", "pmin", "psum_scatter", "psum_scatter of dimension 1", "psum_many"};

/* What element `at` of the whole reduction is, over every device. */
static double reference(kind k, int64_t at)
{
    double acc = value(0, at);
    for (int d = 1; d < N; d++) {
        double v = value(d, at);
        acc = k == PMAX ? fmax(acc, v) : k == PMIN ? fmin(acc, v) : acc + v;
    }
    return k == PMEAN ? acc / N : acc;
}

typedef struct job {
    kind k;
    spmd_dtype dtype;
    int64_t count; /* elements of each input */
    int in_place;
} job;

static void expect(const job *j, int d, const char *what, int64_t k, double got, double want)
{
    /* exact but for the mean, which scales by 1/N in the dtype */
    double tol = j->k == PMEAN && strcmp(what, "output") == 0 ? 1e-6 * (1 + fabs(want)) : 0;
    if (fabs(got - want) <= tol)
        return;
    if (atomic_fetch_add(&wrong, 1) < 10)
        print_error("%s of %lld %s%s, device %d: %s element %lld is %g, expected %g\n",
                    kind_names[j->k], (long long)j->count, spmd_dtype_name(j->dtype),
                    j->in_place ? " in place" : "", d, what, (long long)k, got, want);
}

/* A block of device d's values, or (d < 0) of a value no result has: an output that is read
 * before the reduction writes it shows. */
static spmd_status block(spmd_ctx *ctx, spmd_dtype t, int ndim, const int64_t *shape, int d,
                         spmd_block *b)
{
    CHECK(spmd_ctx_alloc(ctx, ndim, shape, t, b));
    for (int64_t k = 0; k < spmd_block_size(b); k++)
        spmd_test_store(t, b->data, k, d < 0 ? -99 : value(d, k));
    return SPMD_OK;
}

/* Three blocks of count / 3 + 1, + 2 and + 3 elements: one psum_many. */
static spmd_status many(spmd_ctx *ctx, const job *j, int d)
{
    spmd_block in[3], out[3];
    for (int b = 0; b < 3; b++) {
        int64_t count = j->count / 3 + 1 + b;
        CHECK(block(ctx, j->dtype, 1, &count, d, &in[b]));
        if (j->in_place)
            out[b] = in[b];
        else
            CHECK(block(ctx, j->dtype, 1, &count, -1, &out[b]));
    }
    CHECK(spmd_psum_many(ctx, 3, in, out, "x"));
    for (int b = 0; b < 3; b++)
        for (int64_t k = 0; k < in[b].shape[0]; k++) {
            expect(j, d, "output", k, spmd_test_load(j->dtype, out[b].data, k), reference(PSUM, k));
            if (!j->in_place)
                expect(j, d, "input", k, spmd_test_load(j->dtype, in[b].data, k), value(d, k));
        }
    return SPMD_OK;
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in_arrays, int nout,
                        spmd_block *out_arrays, void *user)
{
    (void)nin, (void)in_arrays, (void)nout, (void)out_arrays;
    const job *j = user;
    int d = 0;
    CHECK(spmd_axis_index(ctx, "x", &d));
    if (j->k == MANY)
        return many(ctx, j, d);
    /* psum_scatter of dimension 1: two rows, each scattered (the whole sum between processes) */
    int inner = j->k == SCATTER_INNER, ndim = inner ? 2 : 1;
    int64_t in_shape[2] = {inner ? 2 : j->count, j->count / 2}, out_shape[2];
    memcpy(out_shape, in_shape, sizeof out_shape);
    if (j->k >= SCATTER)
        out_shape[ndim - 1] /= N;
    spmd_block in, out;
    CHECK(block(ctx, j->dtype, ndim, in_shape, d, &in));
    if (j->in_place && j->k < SCATTER)
        out = in;
    else
        CHECK(block(ctx, j->dtype, ndim, out_shape, -1, &out));
    if (j->k >= SCATTER)
        CHECK(spmd_psum_scatter(ctx, &in, &out, "x", ndim - 1, 1));
    else
        CHECK(reductions[j->k](ctx, &in, &out, "x"));
    int64_t cols = out_shape[ndim - 1];
    for (int64_t k = 0; k < spmd_block_size(&out); k++) { /* where out's element k lies in in */
        int64_t at = j->k < SCATTER ? k : (k / cols) * in_shape[ndim - 1] + d * cols + k % cols;
        expect(j, d, "output", k, spmd_test_load(j->dtype, out.data, k), reference(j->k, at));
    }
    for (int64_t k = 0; k < j->count && (!j->in_place || j->k >= SCATTER); k++)
        expect(j, d, "input", k, spmd_test_load(j->dtype, in.data, k), value(d, k));
    return SPMD_OK;
}

static void test_reductions(void **state)
{
    (void)state;
    /* 1 element to 3 MiB of float32: the combined exchange, the halves, the streamed rounds,
     * the hand-off read straight (from 512 KiB), odd counts that split unevenly */
    const int64_t counts[] = {1, 1000, 5000, 16387, 131075, 786433};
    const spmd_dtype dtypes[] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_I32, SPMD_DTYPE_I64};
    atomic_store(&wrong, 0);
    for (int k = PSUM; k <= MANY; k++)
        for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                for (int in_place = 0; in_place < 2; in_place++) {
                    job j = {(kind)k, dtypes[t], counts[c], in_place};
                    if (k == PMEAN && (dtypes[t] == SPMD_DTYPE_I32 || dtypes[t] == SPMD_DTYPE_I64))
                        continue;     /* an integer mean needs a float out: test_collectives */
                    if (k == SCATTER) /* N rows of the same length */
                        j.count = (counts[c] + N - 1) / N * N;
                    if (k == SCATTER_INNER) /* two rows of N columns' multiple */
                        j.count = 2 * ((counts[c] + 2 * N - 1) / (2 * N) * N);
                    assert_ok(
                        spmd_shard_map(line, body, &j, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL));
                }
    assert_int_equal(atomic_load(&wrong), 0);
}

int main(void)
{
    spmd_test_init();
    N = spmd_device_count();
    const char *x = "x";
    if (spmd_mesh_create(1, &N, &x, NULL, 0, &line) != SPMD_OK) {
        print_error("mesh: %s\n", spmd_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_reductions)};
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    spmd_mesh_destroy(line);
    return spmd_test_finish(failures);
}
