/*
 * spmd_op_slice and spmd_op_update_slice (lax.slice, lax.dynamic_update_slice with a static
 * start): boxes of ranks 1 to 4 at every corner and inside, into a new block and in place, every
 * dtype width, on the host and inside fn on every device, against coordinate loops.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

typedef struct box_case {
    int ndim;
    int64_t shape[4], start[4], extent[4];
} box_case;

static const box_case cases[] = {
    {1, {9}, {0}, {9}},
    {1, {9}, {4}, {5}},
    {2, {4, 6}, {1, 2}, {2, 3}},
    {2, {4, 6}, {3, 0}, {1, 6}},
    {3, {3, 4, 5}, {0, 1, 2}, {3, 2, 3}},
    {3, {3, 4, 5}, {2, 3, 4}, {1, 1, 1}},
    {4, {2, 3, 2, 4}, {1, 0, 1, 1}, {1, 3, 1, 2}},
};
#define NC ((int)(sizeof cases / sizeof cases[0]))
static const spmd_dtype dtypes[] = {SPMD_DTYPE_U8, SPMD_DTYPE_F16, SPMD_DTYPE_I32, SPMD_DTYPE_F64};
#define NDT 4
enum { MAXN = 128 };

static int64_t size_of(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int j = 0; j < nd; j++)
        n *= s[j];
    return n;
}

/* whether flat element k of the big array lies in the box, and its index in the box */
static int in_box(const box_case *c, int64_t k, int64_t *at)
{
    int64_t rest = k, idx = 0, mult = 1;
    for (int j = c->ndim - 1; j >= 0; j--) {
        int64_t x = rest % c->shape[j] - c->start[j];
        rest /= c->shape[j];
        if (x < 0 || x >= c->extent[j])
            return 0;
        idx += x * mult;
        mult *= c->extent[j];
    }
    *at = idx;
    return 1;
}

static void pattern(unsigned char *p, size_t bytes, int salt)
{
    for (size_t k = 0; k < bytes; k++)
        p[k] = (unsigned char)(k * 29 + (size_t)salt * 11 + 5);
}

/* slice: results[] gets the slice then the updated array, per case and dtype */
static int run(spmd_ctx *ctx, unsigned char *results)
{
    int failures = 0;
    size_t at = 0;
    for (int d = 0; d < NDT; d++)
        for (int k = 0; k < NC; k++)
            for (int in_place = 0; in_place < 2; in_place++) {
                const box_case *c = &cases[k];
                spmd_dtype t = dtypes[d];
                size_t elem = spmd_dtype_size(t), big = (size_t)size_of(c->ndim, c->shape),
                       small = (size_t)size_of(c->ndim, c->extent);
                spmd_block a, s, u, o;
                static unsigned char ha[MAXN * 8], hs[MAXN * 8], hu[MAXN * 8], ho[MAXN * 8];
                if (ctx) {
                    if (spmd_ctx_alloc(ctx, c->ndim, c->shape, t, &a) != SPMD_OK ||
                        spmd_ctx_alloc(ctx, c->ndim, c->extent, t, &s) != SPMD_OK ||
                        spmd_ctx_alloc(ctx, c->ndim, c->extent, t, &u) != SPMD_OK ||
                        spmd_ctx_alloc(ctx, c->ndim, c->shape, t, &o) != SPMD_OK)
                        return -1;
                } else {
                    a = (spmd_block){ha, t, c->ndim, {0}};
                    o = (spmd_block){ho, t, c->ndim, {0}};
                    s = (spmd_block){hs, t, c->ndim, {0}};
                    u = (spmd_block){hu, t, c->ndim, {0}};
                    memcpy(a.shape, c->shape, sizeof c->shape);
                    memcpy(o.shape, c->shape, sizeof c->shape);
                    memcpy(s.shape, c->extent, sizeof c->extent);
                    memcpy(u.shape, c->extent, sizeof c->extent);
                }
                pattern(a.data, big * elem, 1);
                pattern(u.data, small * elem, 2);
                spmd_block *dst = in_place ? &a : &o;
                spmd_status st = spmd_op_slice(ctx, &a, c->start, &s);
                if (st == SPMD_OK)
                    st = spmd_op_update_slice(ctx, &a, &u, c->start, dst);
                if (st != SPMD_OK) {
                    printf("case %d %s: %s\n", k, spmd_dtype_name(t), spmd_last_error());
                    failures++;
                    continue;
                }
                /* the reference, from coordinates */
                unsigned char A[MAXN * 8], U[MAXN * 8], want_s[MAXN * 8], want_o[MAXN * 8];
                pattern(A, big * elem, 1);
                pattern(U, small * elem, 2);
                memcpy(want_o, A, big * elem);
                for (int64_t e = 0; e < (int64_t)big; e++) {
                    int64_t b;
                    if (in_box(c, e, &b)) {
                        memcpy(want_s + b * (int64_t)elem, A + e * (int64_t)elem, elem);
                        memcpy(want_o + e * (int64_t)elem, U + b * (int64_t)elem, elem);
                    }
                }
                if (results) {
                    memcpy(results + at, s.data, small * elem);
                    memcpy(results + at + small * elem, dst->data, big * elem);
                } else if (memcmp(s.data, want_s, small * elem) ||
                           memcmp(dst->data, want_o, big * elem)) {
                    printf("case %d %s in place %d: differs from the reference\n", k,
                           spmd_dtype_name(t), in_place);
                    failures++;
                }
                if (results) { /* the host side checks it: keep the reference beside */
                    memcpy(results + at + (small + big) * elem, want_s, small * elem);
                    memcpy(results + at + (2 * small + big) * elem, want_o, big * elem);
                }
                at += 2 * (small + big) * elem;
            }
    return failures;
}

static size_t total(void)
{
    size_t t = 0;
    for (int d = 0; d < NDT; d++)
        for (int k = 0; k < NC; k++)
            t += 2 * 2 *
                 (size_t)(size_of(cases[k].ndim, cases[k].shape) +
                          size_of(cases[k].ndim, cases[k].extent)) *
                 spmd_dtype_size(dtypes[d]);
    return t;
}

/* each case wrote its results, then the reference computed beside them on the device */
static void check(const unsigned char *got, int shard)
{
    size_t at = 0;
    for (int d = 0; d < NDT; d++)
        for (int c = 0; c < NC; c++)
            for (int in_place = 0; in_place < 2; in_place++) {
                size_t both = (size_t)(size_of(cases[c].ndim, cases[c].shape) +
                                       size_of(cases[c].ndim, cases[c].extent)) *
                              spmd_dtype_size(dtypes[d]);
                SPMD_TEST_CHECK(memcmp(got + at, got + at + both, both) == 0,
                                "shard %d case %d %s: differs from the reference", shard, c,
                                spmd_dtype_name(dtypes[d]));
                at += 2 * both;
            }
}

int main(void)
{
    spmd_test_init();
    int failures = spmd_test_block_op(run, total(), check);
    return spmd_test_finish(failures + spmd_test_failed_checks());
}
