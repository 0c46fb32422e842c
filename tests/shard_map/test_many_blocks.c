/*
 * Collectives over many blocks at once (spmd_psum_many, _pmean_, _pmax_, _pmin_,
 * spmd_all_gather_many): mixed dtypes (f32, f64, i32, i64, bf16, f16, bool) and shapes (rank 0
 * to 2, small ones fused and large ones on their own, one in place), over a line of every
 * device and over each axis of a (processes x local devices) grid, in shard_map and pmap
 * bodies. Every result is checked against a host loop over the group's members, and against
 * the one-block collective on the same block; plus n = 0, and mismatches between devices.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MAX_DEV 64
#define MAX_BLOCKS 16

static int N, P, L; /* devices, processes, local devices */

#define CHECK SPMD_TEST_TRY
static atomic_int wrong;

/* Device data: mesh position d, block b, element k; small integers, so every sum is exact. */
static double value(int d, int b, int64_t k)
{
    return (double)((d * 31 + b * 17 + k * 7) % 23) - 11;
}

typedef struct block_spec {
    spmd_dtype dtype;
    int ndim;
    int64_t shape[3];
    int in_place; /* out is in */
} block_spec;

/* The mix a step might reduce: small ones of every dtype (fused), large ones (their own MPI
 * operations between processes), one split between the local threads but fused, one in place. */
static const block_spec specs[] = {
    {SPMD_DTYPE_F32, 1, {5}, 0},     {SPMD_DTYPE_F64, 2, {3, 4}, 0},
    {SPMD_DTYPE_I32, 0, {0}, 0},     {SPMD_DTYPE_I64, 1, {7}, 0},
    {SPMD_DTYPE_BF16, 2, {2, 3}, 0}, {SPMD_DTYPE_F16, 1, {4}, 0},
    {SPMD_DTYPE_F32, 1, {70000}, 0}, {SPMD_DTYPE_F64, 2, {200, 200}, 0},
    {SPMD_DTYPE_I32, 1, {20000}, 0}, {SPMD_DTYPE_F32, 1, {100000}, 1},
    {SPMD_DTYPE_F32, 2, {1, 1}, 1},  {SPMD_DTYPE_BF16, 1, {150000}, 0},
    {SPMD_DTYPE_F32, 1, {4096}, 0}, /* 16 KiB: the first that one process splits in pieces */
};
#define NSPECS ((int)(sizeof specs / sizeof specs[0]))

/* Mixed dtypes fused into 32-64 KiB between processes (about 45 and 61 KiB with a bool): two
 * processes without rings send such a buffer in halves, which must not split an element. */
static const block_spec mid_specs[2][4] = {
    {{SPMD_DTYPE_F32, 1, {6001}, 0},
     {SPMD_DTYPE_F64, 2, {10, 101}, 0},
     {SPMD_DTYPE_I32, 1, {1003}, 0},
     {SPMD_DTYPE_BF16, 1, {2001}, 0}},
    {{SPMD_DTYPE_F32, 1, {10001}, 0},
     {SPMD_DTYPE_F64, 2, {10, 101}, 0},
     {SPMD_DTYPE_I32, 1, {1003}, 1},
     {SPMD_DTYPE_F16, 1, {2001}, 0}},
};

typedef enum kind { PSUM, PMEAN, PMAX, PMIN, GATHER, GATHER_STACKED } kind;

typedef struct job {
    kind k;
    const char *axes;  /* over a grid "p", "l" or "p,l"; over the line "x" */
    int grid;          /* 1: the (P, L) grid; 0: the line of N */
    int with_bool;     /* psum and pmean: a bool block too (counted, averaged) */
    int integer_pmean; /* pmean: i32 blocks into f32 outs */
    int mid;           /* > 0: mid_specs[mid - 1] in place of specs */
} job;

/* The mesh position of the member at position `pos` of d's group. */
static int member(const job *j, int d, int pos)
{
    if (!j->grid || strcmp(j->axes, "p,l") == 0)
        return pos;
    int p = d / L, l = d % L;
    return strcmp(j->axes, "l") == 0 ? p * L + pos : pos * L + l;
}

static int group_size(const job *j)
{
    if (!j->grid || strcmp(j->axes, "p,l") == 0)
        return N;
    return strcmp(j->axes, "l") == 0 ? L : P;
}

static spmd_status alloc_fill(spmd_ctx *ctx, const block_spec *s, spmd_dtype t, int d, int b,
                              spmd_block *blk)
{
    CHECK(spmd_ctx_alloc(ctx, s->ndim, s->shape, t, blk));
    int64_t n = spmd_block_size(blk);
    for (int64_t k = 0; k < n; k++) {
        double v = value(d, b, k);
        spmd_test_store(t, blk->data, k, t == SPMD_DTYPE_BOOL ? (double)(v > 0) : v);
    }
    return SPMD_OK;
}

static void expect(int d, int b, int64_t k, double got, double want, double tol)
{
    if (fabs(got - want) <= tol * (1 + fabs(want)))
        return;
    if (atomic_fetch_add(&wrong, 1) < 10)
        print_error("device %d block %d element %lld: got %g, expected %g\n", d, b, (long long)k,
                    got, want);
}

static spmd_status many_body(spmd_ctx *ctx, int nin, const spmd_block *in_arrays, int nout,
                             spmd_block *out_arrays, void *user)
{
    (void)nin, (void)in_arrays, (void)nout, (void)out_arrays;
    const job *j = user;
    int d = 0, n = group_size(j), me = 0;
    CHECK(spmd_axis_index(ctx, j->grid ? "p,l" : "x", &d));
    CHECK(spmd_axis_index(ctx, j->axes, &me));
    int nb = 0;
    block_spec s[MAX_BLOCKS];
    spmd_dtype in_t[MAX_BLOCKS], out_t[MAX_BLOCKS];
    const block_spec *set = j->mid ? mid_specs[j->mid - 1] : specs;
    int nset = j->mid ? 4 : NSPECS;
    for (int b = 0; b < nset; b++) {
        s[nb] = set[b];
        in_t[nb] = out_t[nb] = set[b].dtype;
        if (j->k == PMEAN && j->integer_pmean && in_t[nb] == SPMD_DTYPE_I32)
            out_t[nb] = SPMD_DTYPE_F32, s[nb].in_place = 0;
        if (j->k == PMEAN && in_t[nb] == SPMD_DTYPE_I64)
            continue; /* an integer needs a float out: covered by i32 */
        if ((j->k == PMEAN && !j->integer_pmean) && in_t[nb] == SPMD_DTYPE_I32)
            continue;
        nb++;
    }
    if (j->with_bool) {
        s[nb] = (block_spec){SPMD_DTYPE_BOOL, 2, {3, 5}, 0};
        in_t[nb] = SPMD_DTYPE_BOOL;
        out_t[nb++] = j->k == PSUM ? SPMD_DTYPE_I32 : SPMD_DTYPE_F32;
    }
    int gather = j->k == GATHER || j->k == GATHER_STACKED;
    spmd_block in[MAX_BLOCKS], out[MAX_BLOCKS], single[MAX_BLOCKS];
    for (int b = 0; b < nb; b++) {
        CHECK(alloc_fill(ctx, &s[b], in_t[b], d, b, &in[b]));
        block_spec o = s[b];
        if (gather && j->k == GATHER) {
            if (o.ndim == 0)
                o.ndim = 1, o.shape[0] = n; /* a tiled gather needs rank >= 1: stack instead */
            else
                o.shape[0] *= n;
        } else if (gather) {
            o.ndim = s[b].ndim + 1;
            o.shape[0] = n;
            for (int a = s[b].ndim - 1; a >= 0; a--)
                o.shape[a + 1] = s[b].shape[a];
        }
        if (s[b].in_place && !gather)
            out[b] = in[b];
        else
            CHECK(spmd_ctx_alloc(ctx, o.ndim, o.shape, out_t[b], &out[b]));
        CHECK(spmd_ctx_alloc(ctx, o.ndim, o.shape, out_t[b], &single[b]));
    }
    /* rank-0 blocks cannot be tiled: gathered stacked, in a call of their own */
    int ntiled = nb;
    if (j->k == GATHER) {
        for (int b = 0; b < nb; b++)
            if (s[b].ndim == 0) {
                spmd_block stacked = out[b];
                stacked.ndim = 1;
                stacked.shape[0] = n;
                CHECK(spmd_all_gather_many(ctx, 1, &in[b], &stacked, j->axes, 0, 0));
                out[b] = stacked;
                s[b].ndim = -1; /* checked as stacked below */
            }
    }
    /* the one-block collectives first (an in-place block is still intact) */
    for (int b = 0; b < nb; b++) {
        if (j->k == GATHER && s[b].ndim < 0)
            continue;
        switch (j->k) {
        case PSUM:
            CHECK(spmd_psum(ctx, &in[b], &single[b], j->axes));
            break;
        case PMEAN:
            CHECK(spmd_pmean(ctx, &in[b], &single[b], j->axes));
            break;
        case PMAX:
            CHECK(spmd_pmax(ctx, &in[b], &single[b], j->axes));
            break;
        case PMIN:
            CHECK(spmd_pmin(ctx, &in[b], &single[b], j->axes));
            break;
        default:
            CHECK(spmd_all_gather(ctx, &in[b], &single[b], j->axes, 0, j->k == GATHER));
        }
    }
    spmd_status st = SPMD_OK;
    switch (j->k) {
    case PSUM:
        st = spmd_psum_many(ctx, nb, in, out, j->axes);
        break;
    case PMEAN:
        st = spmd_pmean_many(ctx, nb, in, out, j->axes);
        break;
    case PMAX:
        st = spmd_pmax_many(ctx, nb, in, out, j->axes);
        break;
    case PMIN:
        st = spmd_pmin_many(ctx, nb, in, out, j->axes);
        break;
    case GATHER: { /* the rank >= 1 blocks together */
        spmd_block ti[MAX_BLOCKS], to[MAX_BLOCKS];
        int t = 0;
        for (int b = 0; b < nb; b++)
            if (s[b].ndim >= 0) {
                ti[t] = in[b];
                to[t++] = out[b];
            }
        ntiled = t;
        st = spmd_all_gather_many(ctx, t, ti, to, j->axes, 0, 1);
        break;
    }
    case GATHER_STACKED:
        st = spmd_all_gather_many(ctx, nb, in, out, j->axes, 0, 0);
        break;
    }
    CHECK(st);
    (void)ntiled;
    for (int b = 0; b < nb; b++) {
        int64_t count = spmd_block_size(&out[b]), per = gather ? count / n : count;
        int half = in_t[b] == SPMD_DTYPE_BF16 || in_t[b] == SPMD_DTYPE_F16;
        for (int64_t k = 0; k < count; k++) {
            double want = 0;
            if (gather) { /* member k / per's element k % per (tiled and stacked along 0) */
                int64_t rows = s[b].ndim > 0 ? s[b].shape[0] : 1, inner = per / rows;
                int src = j->k == GATHER && s[b].ndim > 0 ? (int)(k / inner % (rows * n) / rows)
                                                          : (int)(k / per);
                int64_t e = j->k == GATHER && s[b].ndim > 0 ? (k / inner % rows) * inner + k % inner
                                                            : k % per;
                want = value(member(j, d, src), b, e);
            } else {
                double acc = j->k == PMAX ? -INFINITY : j->k == PMIN ? INFINITY : 0;
                for (int m = 0; m < n; m++) {
                    double v = value(member(j, d, m), b, k);
                    if (in_t[b] == SPMD_DTYPE_BOOL)
                        v = v > 0;
                    acc = j->k == PMAX ? fmax(acc, v) : j->k == PMIN ? fmin(acc, v) : acc + v;
                }
                want = j->k == PMEAN ? acc / n : acc;
            }
            double got = spmd_test_load(out_t[b], out[b].data, k);
            expect(d, b, k, got, want, j->k == PMEAN ? (half ? 1e-2 : 1e-6) : 0);
            if (j->k == GATHER && s[b].ndim < 0)
                continue;
            /* the same numbers as the one-block collective */
            expect(d, b, k, got, spmd_test_load(out_t[b], single[b].data, k), 0);
        }
    }
    (void)me;
    return SPMD_OK;
}

static spmd_mesh *line, *grid;

static void run(const job *j)
{
    spmd_mesh *m = j->grid ? grid : line;
    atomic_store(&wrong, 0);
    assert_ok(spmd_shard_map(m, many_body, (void *)j, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL));
    if (atomic_load(&wrong))
        fail_msg("%d wrong elements (kind %d over %s of the %s)", atomic_load(&wrong), j->k,
                 j->axes, j->grid ? "grid" : "line");
}

static void test_reductions(void **state)
{
    (void)state;
    const char *grid_axes[] = {"p", "l", "p,l"};
    for (int k = PSUM; k <= PMIN; k++) {
        job j = {(kind)k, "x", 0, k == PSUM || k == PMEAN, k == PMEAN, 0};
        run(&j);
        for (int a = 0; a < 3; a++) {
            job g = {(kind)k, grid_axes[a], 1, k == PSUM, 0, 0};
            run(&g);
        }
    }
}

/* Fused buffers of 32-64 KiB between processes, whatever the transport (test_many_blocks_np2_*
 * _mpi_only sends them without rings, as between machines). */
static void test_mid_sizes(void **state)
{
    (void)state;
    for (int mid = 1; mid <= 2; mid++)
        for (int k = PSUM; k <= PMAX; k++) {
            job j = {(kind)k, "x", 0, k == PSUM, 0, mid};
            run(&j);
            job g = {(kind)k, "p", 1, k == PSUM, 0, mid};
            run(&g);
        }
}

static void test_gathers(void **state)
{
    (void)state;
    const char *grid_axes[] = {"p", "l", "p,l"};
    for (int k = GATHER; k <= GATHER_STACKED; k++) {
        job j = {(kind)k, "x", 0, 0, 0, 0};
        run(&j);
        for (int a = 0; a < 3; a++) {
            job g = {(kind)k, grid_axes[a], 1, 0, 0, 0};
            run(&g);
        }
    }
}

/* ---- n = 0, mismatches, and a pmap body ---- */

static spmd_status empty_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)out, (void)user;
    CHECK(spmd_psum_many(ctx, 0, NULL, NULL, "x"));
    CHECK(spmd_all_gather_many(ctx, 0, NULL, NULL, "x", 0, 1));
    /* a one-element psum after them: nothing was left half done */
    int64_t one = 1;
    spmd_block b;
    CHECK(spmd_ctx_alloc(ctx, 1, &one, SPMD_DTYPE_I32, &b));
    ((int32_t *)b.data)[0] = 1;
    CHECK(spmd_psum(ctx, &b, &b, "x"));
    if (((int32_t *)b.data)[0] != N)
        atomic_fetch_add(&wrong, 1);
    return SPMD_OK;
}

static void test_empty(void **state)
{
    (void)state;
    atomic_store(&wrong, 0);
    assert_ok(spmd_shard_map(line, empty_body, NULL, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL));
    assert_int_equal(atomic_load(&wrong), 0);
}

/* The last device passes one block fewer, or the same count with another shape. */
static spmd_status mismatch_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                 spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)out;
    int shape_differs = *(const int *)user, d = 0;
    CHECK(spmd_axis_index(ctx, "x", &d));
    int64_t shape = d == N - 1 && shape_differs ? 5 : 4;
    spmd_block b[3];
    for (int i = 0; i < 3; i++) {
        CHECK(spmd_ctx_alloc(ctx, 1, &shape, SPMD_DTYPE_F32, &b[i]));
        memset(b[i].data, 0, (size_t)shape * sizeof(float));
    }
    int n = d == N - 1 && !shape_differs ? 2 : 3;
    return spmd_psum_many(ctx, n, b, b, "x");
}

static void test_mismatch(void **state)
{
    (void)state;
    if (N < 2)
        skip();
    for (int shape_differs = 0; shape_differs < 2; shape_differs++)
        assert_status(spmd_shard_map(line, mismatch_body, &shape_differs, 0, NULL, NULL, 0, NULL,
                                     NULL, NULL, NULL),
                      SPMD_ERR_COLLECTIVE_MISMATCH, "psum of ", "blocks");
}

/* A data-parallel step in a pmap body: the gradients of three parameters, psum'd together. */
static spmd_status pmap_body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_pmean_many(ctx, 3, in, out, "i");
}

static void test_pmap(void **state)
{
    (void)state;
    /* host-local inputs, as pmap takes them on several processes: this process's rows */
    const char *name = "i";
    int64_t shapes[3][2] = {{L, 3}, {L, 70000}, {L, 2}};
    spmd_dtype types[3] = {SPMD_DTYPE_F32, SPMD_DTYPE_F32, SPMD_DTYPE_F64};
    int ids[MAX_DEV], first = spmd_process_index() * L;
    for (int i = 0; i < L; i++)
        ids[i] = spmd_local_device_id(i);
    spmd_mesh *m = NULL;
    assert_ok(spmd_mesh_create(1, &L, &name, ids, L, &m));
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create_parse(m, "'i'", &sh));
    spmd_array *x[3] = {NULL, NULL, NULL}, *y[3] = {NULL, NULL, NULL};
    int in_axes[3] = {0, 0, 0}, out_axes[3] = {0, 0, 0};
    spmd_out_desc descs[3];
    for (int a = 0; a < 3; a++) {
        size_t elems = (size_t)shapes[a][0] * (size_t)shapes[a][1];
        double *host = malloc(elems * sizeof *host);
        float *host32 = malloc(elems * sizeof *host32);
        assert_non_null(host);
        assert_non_null(host32);
        for (size_t k = 0; k < elems; k++) {
            host[k] = value(first + (int)(k / (size_t)shapes[a][1]), a,
                            (int64_t)(k % (size_t)shapes[a][1]));
            host32[k] = (float)host[k];
        }
        assert_ok(spmd_device_put(types[a] == SPMD_DTYPE_F64 ? (void *)host : (void *)host32, 2,
                                  shapes[a], types[a], sh, &x[a]));
        descs[a] = (spmd_out_desc){1, {shapes[a][1]}, types[a]};
        free(host);
        free(host32);
    }
    assert_ok(spmd_pmap(pmap_body, NULL, 3, x, in_axes, 3, descs, out_axes, "i", NULL, 0, NULL, y));
    for (int a = 0; a < 3; a++) {
        int64_t w = shapes[a][1];
        double *got = malloc((size_t)w * sizeof *got);
        assert_non_null(got);
        /* every row is the same mean: this process's first row */
        assert_ok(spmd_array_shard_to_host(y[a], 0, got, (size_t)w * sizeof *got));
        for (int64_t k = 0; k < w; k++) {
            double mean = 0;
            for (int dv = 0; dv < N; dv++)
                mean += value(dv, a, k);
            mean /= N;
            double g = spmd_test_load(types[a], got, k);
            if (fabs(g - mean) > 1e-5 * (1 + fabs(mean)))
                fail_msg("pmap pmean_many: array %d element %lld is %g, expected %g", a,
                         (long long)k, g, mean);
        }
        free(got);
        spmd_array_destroy(x[a]);
        spmd_array_destroy(y[a]);
    }
    spmd_sharding_destroy(sh);
    spmd_mesh_destroy(m);
}

int main(void)
{
    spmd_test_init();
    N = spmd_device_count();
    P = spmd_process_count();
    L = spmd_local_device_count();
    if (N > MAX_DEV)
        return SPMD_TEST_SKIP;
    const char *x = "x", *pl[2] = {"p", "l"};
    int shape[2] = {P, L};
    if (spmd_mesh_create(1, &N, &x, NULL, 0, &line) != SPMD_OK ||
        spmd_mesh_create(2, shape, pl, NULL, 0, &grid) != SPMD_OK) {
        print_error("mesh: %s\n", spmd_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reductions), cmocka_unit_test(test_gathers),
        cmocka_unit_test(test_empty),      cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_pmap),       cmocka_unit_test(test_mid_sizes),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    spmd_mesh_destroy(line);
    spmd_mesh_destroy(grid);
    return spmd_test_finish(failures);
}
