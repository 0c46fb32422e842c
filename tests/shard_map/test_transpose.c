/*
 * spmd_op_transpose (jnp.transpose): ranks 0 to 4, every permutation of rank 3 and some of rank
 * 4, perm NULL (reversed axes), every dtype width, on the host (ctx NULL) and inside fn on
 * every device (kernels on CUDA devices), against a reference computed from coordinates.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

typedef struct tcase {
    int ndim;
    int64_t shape[4];
    int perm[4];
    int null_perm;
} tcase;

static const tcase cases[] = {
    {0, {0}, {0}, 0},
    {1, {7}, {0}, 0},
    {2, {3, 5}, {1, 0}, 0},
    {2, {4, 1}, {0, 1}, 1},
    {3, {2, 3, 4}, {0, 1, 2}, 0},
    {3, {2, 3, 4}, {0, 2, 1}, 0},
    {3, {2, 3, 4}, {1, 0, 2}, 0},
    {3, {2, 3, 4}, {1, 2, 0}, 0},
    {3, {2, 3, 4}, {2, 0, 1}, 0},
    {3, {2, 3, 4}, {2, 1, 0}, 0},
    {3, {2, 3, 4}, {0}, 1},
    {4, {2, 3, 1, 5}, {3, 1, 0, 2}, 0},
    {4, {3, 2, 2, 3}, {1, 3, 2, 0}, 0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
static const spmd_dtype dtypes[] = {SPMD_DTYPE_U8, SPMD_DTYPE_BF16, SPMD_DTYPE_F32, SPMD_DTYPE_F64};
#define NDT 4
enum { MAXN = 128 };

static int64_t count(const tcase *c)
{
    int64_t n = 1;
    for (int j = 0; j < c->ndim; j++)
        n *= c->shape[j];
    return n;
}

static void input(spmd_dtype t, int64_t n, unsigned char *p)
{
    size_t elem = spmd_dtype_size(t);
    for (size_t k = 0; k < (size_t)n * elem; k++)
        p[k] = (unsigned char)(k * 13 + elem + 3);
}

/* out[i] = in[the input coordinates of out's coordinates of i] */
static void reference(const tcase *c, size_t elem, const unsigned char *in, unsigned char *out)
{
    int nd = c->ndim, perm[4];
    int64_t oshape[4], istride[4], s = 1;
    for (int j = 0; j < nd; j++)
        perm[j] = c->null_perm ? nd - 1 - j : c->perm[j];
    for (int j = nd - 1; j >= 0; j--)
        istride[j] = s, s *= c->shape[j];
    for (int j = 0; j < nd; j++)
        oshape[j] = c->shape[perm[j]];
    for (int64_t i = 0; i < count(c); i++) {
        int64_t rest = i, from = 0;
        for (int j = nd - 1; j >= 0; j--) {
            from += (rest % oshape[j]) * istride[perm[j]];
            rest /= oshape[j];
        }
        memcpy(out + (size_t)i * elem, in + (size_t)from * elem, elem);
    }
}

/* Every case with ctx (NULL: the host); each result appended to `results` when given. */
static int run(spmd_ctx *ctx, unsigned char *results)
{
    int failures = 0;
    size_t at = 0;
    for (int d = 0; d < NDT; d++)
        for (int k = 0; k < NCASES; k++) {
            const tcase *c = &cases[k];
            spmd_dtype t = dtypes[d];
            size_t elem = spmd_dtype_size(t), n = (size_t)count(c);
            int perm[4];
            for (int j = 0; j < c->ndim; j++)
                perm[j] = c->null_perm ? c->ndim - 1 - j : c->perm[j];
            spmd_block in, out;
            unsigned char hin[MAXN * 8], hout[MAXN * 8], want[MAXN * 8];
            int64_t oshape[4];
            for (int j = 0; j < c->ndim; j++)
                oshape[j] = c->shape[perm[j]];
            if (ctx) {
                if (spmd_ctx_alloc(ctx, c->ndim, c->shape, t, &in) != SPMD_OK ||
                    spmd_ctx_alloc(ctx, c->ndim, oshape, t, &out) != SPMD_OK)
                    return -1;
            } else {
                in = (spmd_block){hin, t, c->ndim, {0}};
                out = (spmd_block){hout, t, c->ndim, {0}};
                memcpy(in.shape, c->shape, sizeof c->shape);
                memcpy(out.shape, oshape, sizeof oshape);
            }
            input(t, (int64_t)n, in.data);
            spmd_status st = spmd_op_transpose(ctx, &in, c->null_perm ? NULL : c->perm, &out);
            if (st != SPMD_OK) {
                printf("transpose case %d %s: %s\n", k, spmd_dtype_name(t), spmd_last_error());
                failures++;
                continue;
            }
            input(t, (int64_t)n, hin);
            reference(c, elem, hin, want);
            if (results)
                memcpy(results + at, out.data, n * elem);
            else if (memcmp(out.data, want, n * elem) != 0) {
                printf("transpose case %d %s: differs from the reference\n", k, spmd_dtype_name(t));
                failures++;
            }
            at += n * elem;
        }
    return failures;
}

static size_t total_bytes(void)
{
    size_t total = 0;
    for (int d = 0; d < NDT; d++)
        for (int k = 0; k < NCASES; k++)
            total += (size_t)count(&cases[k]) * spmd_dtype_size(dtypes[d]);
    return total;
}

static unsigned char want[1 << 16];
static size_t want_bytes;

static void check(const unsigned char *got, int shard)
{
    SPMD_TEST_CHECK(memcmp(got, want, want_bytes) == 0,
                    "shard %d: transposes inside fn differ from the reference", shard);
}

int main(void)
{
    spmd_test_init();
    want_bytes = total_bytes();
    SPMD_TEST_CHECK(want_bytes <= sizeof want, "the cases need %zu bytes", want_bytes);
    size_t at = 0;
    for (int d = 0; d < NDT; d++) /* the same cases on the host, in the same order */
        for (int k = 0; k < NCASES; k++) {
            size_t elem = spmd_dtype_size(dtypes[d]), cnt = (size_t)count(&cases[k]);
            unsigned char hin[MAXN * 8];
            input(dtypes[d], (int64_t)cnt, hin);
            reference(&cases[k], elem, hin, want + at);
            at += cnt * elem;
        }
    int failures = spmd_test_block_op(run, want_bytes, check);
    return spmd_test_finish(failures + spmd_test_failed_checks());
}
