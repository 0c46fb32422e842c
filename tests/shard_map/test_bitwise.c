/*
 * spmd_op_binary and spmd_op_binary_scalar with SPMD_BINARY_AND, _OR and _XOR
 * (jnp.bitwise_and / _or / _xor): int32, int64, uint8 and bool (logical), b of a's shape, one
 * element, a row, a host scalar, and in place; on the host (ctx NULL) and inside fn on every
 * device (kernels on CUDA devices), against a host reference loop in each type.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { ROWS = 5, COLS = 8, N = ROWS * COLS, MODES = 5 };
enum { SAME, ONE, ROW, SCALAR, IN_PLACE };

static const spmd_dtype dtypes[] = {SPMD_DTYPE_I32, SPMD_DTYPE_I64, SPMD_DTYPE_U8, SPMD_DTYPE_BOOL};
#define NDT 4
static const spmd_binary_op ops[] = {SPMD_BINARY_AND, SPMD_BINARY_OR, SPMD_BINARY_XOR};
#define NOPS 3
#define SCALAR_VALUE (-21.0) /* ...1101011 in two's complement: a sign bit to keep */

/* element i of a (salt 1) or b (salt 2), as int64: extremes, signs and every bit pattern */
static int64_t value(spmd_dtype t, int salt, int i)
{
    static const int64_t edges[] = {0, -1, 1, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX, 0x55};
    int64_t v =
        i % 5 == 0 ? edges[(i / 5 + salt) % 8] : (int64_t)(i * 2654435761u) * (salt * 2 - 3);
    switch (t) {
    case SPMD_DTYPE_I32:
        return (int32_t)(uint32_t)(uint64_t)v;
    case SPMD_DTYPE_U8:
        return (uint8_t)(uint64_t)v;
    case SPMD_DTYPE_BOOL:
        return ((uint64_t)v >> salt & 1) != 0;
    default:
        return v;
    }
}

static void store(spmd_dtype t, void *p, int i, int64_t v)
{
    switch (t) {
    case SPMD_DTYPE_I32: {
        int32_t x = (int32_t)v;
        memcpy((char *)p + 4 * i, &x, 4);
        break;
    }
    case SPMD_DTYPE_I64:
        memcpy((char *)p + 8 * i, &v, 8);
        break;
    default:
        ((uint8_t *)p)[i] = (uint8_t)v;
    }
}

/* the reference, in the dtype's own C type */
static int64_t apply(spmd_binary_op op, spmd_dtype t, int64_t a, int64_t b)
{
    if (t == SPMD_DTYPE_BOOL) {
        int x = a != 0, y = b != 0;
        return op == SPMD_BINARY_AND ? (x && y) : op == SPMD_BINARY_OR ? (x || y) : (x != y);
    }
    if (t == SPMD_DTYPE_U8) {
        uint8_t x = (uint8_t)a, y = (uint8_t)b;
        return (uint8_t)(op == SPMD_BINARY_AND ? x & y : op == SPMD_BINARY_OR ? x | y : x ^ y);
    }
    if (t == SPMD_DTYPE_I32) {
        uint32_t x = (uint32_t)a, y = (uint32_t)b;
        return (int32_t)(op == SPMD_BINARY_AND ? x & y : op == SPMD_BINARY_OR ? x | y : x ^ y);
    }
    uint64_t x = (uint64_t)a, y = (uint64_t)b;
    return (int64_t)(op == SPMD_BINARY_AND ? x & y : op == SPMD_BINARY_OR ? x | y : x ^ y);
}

/* the element of b that element i of a meets in `mode` */
static int64_t b_for(spmd_dtype t, int mode, int i)
{
    if (mode == SCALAR) /* the host scalar run() passes, in a's type */
        return t == SPMD_DTYPE_BOOL ? 1 : t == SPMD_DTYPE_U8 ? 235 : (int64_t)SCALAR_VALUE;
    return value(t, 2, mode == ONE ? 4 : mode == ROW ? i % COLS : i); /* 4: a true bool */
}

static size_t case_bytes(spmd_dtype t) { return 2 * N * spmd_dtype_size(t); }

/* results: per dtype, op and mode, the output then the reference */
static int run(spmd_ctx *ctx, unsigned char *results)
{
    int failures = 0;
    size_t at = 0;
    for (int d = 0; d < NDT; d++)
        for (int o = 0; o < NOPS; o++)
            for (int mode = 0; mode < MODES; mode++) {
                spmd_dtype t = dtypes[d];
                size_t elem = spmd_dtype_size(t);
                int64_t shape[2] = {ROWS, COLS}, one[1] = {1}, row[1] = {COLS};
                spmd_block a, b, out;
                static unsigned char ha[N * 8], hb[N * 8], ho[N * 8];
                int bdim = mode == ONE ? 0 : mode == ROW ? 1 : 2;
                const int64_t *bshape = mode == ONE ? one : mode == ROW ? row : shape;
                if (ctx) {
                    if (spmd_ctx_alloc(ctx, 2, shape, t, &a) != SPMD_OK ||
                        spmd_ctx_alloc(ctx, bdim, bshape, t, &b) != SPMD_OK ||
                        spmd_ctx_alloc(ctx, 2, shape, t, &out) != SPMD_OK)
                        return -1;
                } else {
                    a = (spmd_block){ha, t, 2, {ROWS, COLS}};
                    out = (spmd_block){ho, t, 2, {ROWS, COLS}};
                    b = (spmd_block){hb, t, bdim, {0}};
                    memcpy(b.shape, bshape, (size_t)bdim * sizeof bshape[0]);
                }
                for (int i = 0; i < N; i++) {
                    store(t, a.data, i, value(t, 1, i));
                    store(t, b.data, i % (int)spmd_block_size(&b), b_for(t, mode, i));
                }
                spmd_block *dst = mode == IN_PLACE ? &a : &out;
                spmd_status st = mode == SCALAR
                                     ? spmd_op_binary_scalar(ctx, ops[o], &a,
                                                             t == SPMD_DTYPE_BOOL ? 1.0
                                                             : t == SPMD_DTYPE_U8 ? 235.0
                                                                                  : SCALAR_VALUE,
                                                             dst)
                                     : spmd_op_binary(ctx, ops[o], &a, &b, dst);
                unsigned char want[N * 8];
                for (int i = 0; i < N; i++)
                    store(t, want, i, apply(ops[o], t, value(t, 1, i), b_for(t, mode, i)));
                if (st != SPMD_OK) {
                    printf("%s op %d mode %d: %s\n", spmd_dtype_name(t), o, mode,
                           spmd_last_error());
                    failures++;
                } else if (results) { /* the host side checks it: the reference beside */
                    memcpy(results + at, dst->data, N * elem);
                    memcpy(results + at + N * elem, want, N * elem);
                } else if (memcmp(dst->data, want, N * elem) != 0) {
                    printf("%s op %d mode %d: differs from the reference\n", spmd_dtype_name(t), o,
                           mode);
                    failures++;
                }
                at += case_bytes(t);
            }
    return failures;
}

static size_t total(void)
{
    size_t t = 0;
    for (int d = 0; d < NDT; d++)
        t += NOPS * MODES * case_bytes(dtypes[d]);
    return t;
}

static void check(const unsigned char *got, int shard)
{
    size_t at = 0;
    for (int d = 0; d < NDT; d++)
        for (int o = 0; o < NOPS; o++)
            for (int mode = 0; mode < MODES; mode++) {
                size_t half = case_bytes(dtypes[d]) / 2;
                SPMD_TEST_CHECK(memcmp(got + at, got + at + half, half) == 0,
                                "shard %d: %s op %d mode %d differs from the reference", shard,
                                spmd_dtype_name(dtypes[d]), o, mode);
                at += 2 * half;
            }
}

int main(void)
{
    spmd_test_init();
    /* floats are refused, with the dtype named */
    float f[2] = {1, 2};
    spmd_block fb = {f, SPMD_DTYPE_F32, 1, {2}};
    SPMD_TEST_CHECK(spmd_op_binary(NULL, SPMD_BINARY_AND, &fb, &fb, &fb) == SPMD_ERR_UNSUPPORTED &&
                        strstr(spmd_last_error(), "float32"),
                    "a float bitwise and: %s", spmd_last_error());
    int failures = spmd_test_block_op(run, total(), check);
    return spmd_test_finish(failures + spmd_test_failed_checks());
}
