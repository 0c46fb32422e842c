/*
 * spmd_op_take (jnp.take: fill, clip and wrap modes, negative and far indices, index blocks of
 * rank 0 to 2, every axis), spmd_op_concatenate (ranks 1 to 3, every axis, an empty part),
 * spmd_op_softmax (float32 and float64, every axis, NaN and -inf lines) and spmd_op_reduce
 * with keepdims, on the host (ctx NULL) and inside fn on every device (kernels on CUDA
 * devices), each against a reference loop over coordinates written here.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { MAXN = 256, CASES = 64 };

static int64_t size_of(int nd, const int64_t *s)
{
    int64_t n = 1;
    for (int j = 0; j < nd; j++)
        n *= s[j];
    return n;
}

static void pattern(unsigned char *p, size_t bytes, int salt)
{
    for (size_t k = 0; k < bytes; k++)
        p[k] = (unsigned char)(k * 37 + (size_t)salt * 13 + 3);
}

/* a block on the device (ctx) or in `host` */
static int make(spmd_ctx *ctx, unsigned char *host, spmd_dtype t, int nd, const int64_t *shape,
                spmd_block *b)
{
    if (ctx)
        return spmd_ctx_alloc(ctx, nd, shape, t, b) == SPMD_OK;
    *b = (spmd_block){host, t, nd, {0}};
    memcpy(b->shape, shape, (size_t)nd * sizeof shape[0]);
    return 1;
}

/* ---- take ---- */

/* the reference's reading of jnp.take's modes, one branch per mode */
static int64_t take_position(spmd_take_mode mode, int64_t k, int64_t n)
{
    switch (mode) {
    case SPMD_TAKE_CLIP:
        if (k < 0)
            return 0;
        return k > n - 1 ? n - 1 : k;
    case SPMD_TAKE_WRAP:
        return ((k % n) + n) % n;
    default:
        if (k >= -n && k < 0)
            return k + n;
        return k >= 0 && k < n ? k : -1;
    }
}

static void fill_bits(spmd_dtype t, unsigned char *to)
{
    uint64_t v = t == SPMD_DTYPE_F32    ? 0x7fc00000u
                 : t == SPMD_DTYPE_F64  ? 0x7ff8000000000000u
                 : t == SPMD_DTYPE_I32  ? 0x80000000u
                 : t == SPMD_DTYPE_I64  ? 0x8000000000000000u
                 : t == SPMD_DTYPE_F16  ? 0x7e00u
                 : t == SPMD_DTYPE_BF16 ? 0x7fc0u
                 : t == SPMD_DTYPE_U8   ? 0xffu
                                        : 1u;
    memcpy(to, &v, spmd_dtype_size(t)); /* little-endian */
}

typedef struct take_case {
    spmd_dtype t, index_t;
    int ndim, axis;
    int64_t shape[3];
    int index_ndim;
    int64_t index_shape[2];
} take_case;

static const take_case takes[] = {
    {SPMD_DTYPE_F32, SPMD_DTYPE_I32, 2, 0, {3, 5}, 1, {6}},
    {SPMD_DTYPE_F32, SPMD_DTYPE_I64, 2, 1, {3, 5}, 2, {2, 3}},
    {SPMD_DTYPE_I64, SPMD_DTYPE_I32, 2, -1, {4, 3}, 1, {6}},
    {SPMD_DTYPE_U8, SPMD_DTYPE_I64, 3, 1, {2, 4, 3}, 0, {0}},
    {SPMD_DTYPE_BOOL, SPMD_DTYPE_I32, 1, 0, {5}, 2, {3, 2}},
    {SPMD_DTYPE_F16, SPMD_DTYPE_I32, 3, 2, {2, 2, 4}, 1, {6}},
    {SPMD_DTYPE_I32, SPMD_DTYPE_I64, 3, 0, {3, 2, 2}, 1, {6}},
};
#define NTAKE ((int)(sizeof takes / sizeof takes[0]))
/* negative within range, far beyond both ends, in range, the ends */
static const int64_t index_values[] = {-1, 7, 2, -4, 0, -100, 100, 1, -2, 3};

static int run_take(spmd_ctx *ctx, const take_case *c, spmd_take_mode mode)
{
    int a = c->axis < 0 ? c->axis + c->ndim : c->axis;
    int64_t out_shape[4];
    int out_nd = 0;
    for (int j = 0; j < c->ndim; j++)
        if (j == a)
            for (int i = 0; i < c->index_ndim; i++)
                out_shape[out_nd++] = c->index_shape[i];
        else
            out_shape[out_nd++] = c->shape[j];
    static unsigned char hi[MAXN * 8], hx[MAXN * 8], ho[MAXN * 8]; /* the host's (one thread) */
    unsigned char want[MAXN * 8];
    spmd_block in, idx, out;
    if (!make(ctx, hi, c->t, c->ndim, c->shape, &in) ||
        !make(ctx, hx, c->index_t, c->index_ndim, c->index_shape, &idx) ||
        !make(ctx, ho, c->t, out_nd, out_shape, &out))
        return 0;
    size_t elem = spmd_dtype_size(c->t);
    int64_t n_in = size_of(c->ndim, c->shape), n_idx = size_of(c->index_ndim, c->index_shape);
    pattern(in.data, (size_t)n_in * elem, 1);
    if (c->t == SPMD_DTYPE_BOOL)
        for (int64_t k = 0; k < n_in; k++)
            ((unsigned char *)in.data)[k] &= 1;
    for (int64_t k = 0; k < n_idx; k++) {
        int64_t v = index_values[k % 10];
        if (c->index_t == SPMD_DTYPE_I32)
            ((int32_t *)idx.data)[k] = (int32_t)v;
        else
            ((int64_t *)idx.data)[k] = v;
    }
    if (spmd_op_take(ctx, &in, &idx, c->axis, mode, &out) != SPMD_OK) {
        printf("take: %s\n", spmd_last_error());
        return 0;
    }
    /* reference: each output coordinate, from in's coordinates */
    int64_t n_out = size_of(out_nd, out_shape), extent = c->shape[a];
    for (int64_t e = 0; e < n_out; e++) {
        int64_t coord[4] = {0}, rest = e;
        for (int j = out_nd - 1; j >= 0; j--) {
            coord[j] = rest % out_shape[j];
            rest /= out_shape[j];
        }
        int64_t k = 0; /* the flat index into indices */
        for (int i = 0; i < c->index_ndim; i++)
            k = k * c->index_shape[i] + coord[a + i];
        int64_t from = take_position(mode, index_values[k % 10], extent);
        if (from < 0) {
            fill_bits(c->t, want + e * (int64_t)elem);
            continue;
        }
        int64_t src = 0;
        for (int j = 0, o = 0; j < c->ndim; j++) {
            int64_t x = j == a ? from : coord[o];
            o += j == a ? c->index_ndim : 1;
            src = src * c->shape[j] + x;
        }
        memcpy(want + e * (int64_t)elem, (unsigned char *)in.data + src * (int64_t)elem, elem);
    }
    return memcmp(out.data, want, (size_t)n_out * elem) == 0;
}

/* ---- concatenate ---- */

typedef struct concat_case {
    spmd_dtype t;
    int ndim, axis, n;
    int64_t out_shape[3];
    int64_t along[3]; /* each part's extent along the axis */
} concat_case;

static const concat_case concats[] = {
    {SPMD_DTYPE_F32, 1, 0, 3, {9}, {2, 4, 3}},     {SPMD_DTYPE_I64, 2, 0, 2, {5, 3}, {2, 3}},
    {SPMD_DTYPE_U8, 2, 1, 3, {2, 8}, {3, 1, 4}},   {SPMD_DTYPE_F16, 3, 1, 3, {2, 6, 3}, {1, 2, 3}},
    {SPMD_DTYPE_F64, 3, -1, 2, {2, 2, 5}, {4, 1}}, {SPMD_DTYPE_BOOL, 3, 0, 2, {3, 2, 2}, {1, 2}},
};
#define NCONCAT ((int)(sizeof concats / sizeof concats[0]))

static int run_concat(spmd_ctx *ctx, const concat_case *c)
{
    int a = c->axis < 0 ? c->axis + c->ndim : c->axis;
    static unsigned char hp[3][MAXN * 8], ho[MAXN * 8]; /* the host's (one thread) */
    unsigned char want[MAXN * 8];
    size_t elem = spmd_dtype_size(c->t);
    spmd_block parts[3], out;
    for (int k = 0; k < c->n; k++) {
        int64_t shape[3];
        memcpy(shape, c->out_shape, sizeof shape);
        shape[a] = c->along[k];
        if (!make(ctx, hp[k], c->t, c->ndim, shape, &parts[k]))
            return 0;
        pattern(parts[k].data, (size_t)size_of(c->ndim, shape) * elem, k + 1);
    }
    if (!make(ctx, ho, c->t, c->ndim, c->out_shape, &out))
        return 0;
    if (spmd_op_concatenate(ctx, c->n, parts, c->axis, &out) != SPMD_OK) {
        printf("concatenate: %s\n", spmd_last_error());
        return 0;
    }
    int64_t n_out = size_of(c->ndim, c->out_shape);
    for (int64_t e = 0; e < n_out; e++) {
        int64_t coord[3] = {0}, rest = e;
        for (int j = c->ndim - 1; j >= 0; j--) {
            coord[j] = rest % c->out_shape[j];
            rest /= c->out_shape[j];
        }
        int k = 0; /* which part holds coord[a] */
        while (coord[a] >= c->along[k]) {
            coord[a] -= c->along[k];
            k++;
        }
        int64_t src = 0;
        for (int j = 0; j < c->ndim; j++)
            src = src * (j == a ? c->along[k] : c->out_shape[j]) + coord[j];
        memcpy(want + e * (int64_t)elem, (unsigned char *)parts[k].data + src * (int64_t)elem,
               elem);
    }
    return memcmp(out.data, want, (size_t)n_out * elem) == 0;
}

/* ---- softmax and keepdims ---- */

static double element(spmd_dtype t, const void *p, int64_t i)
{
    return t == SPMD_DTYPE_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

static int run_softmax(spmd_ctx *ctx, spmd_dtype t, int axis, int in_place)
{
    const int64_t shape[2] = {4, 6};
    static unsigned char hi[MAXN * 8], ho[MAXN * 8];
    spmd_block in, out;
    if (!make(ctx, hi, t, 2, shape, &in) || !make(ctx, ho, t, 2, shape, &out))
        return 0;
    double src[24];
    for (int i = 0; i < 24; i++) {
        src[i] = (double)((i * 7) % 11) * 0.75 - 3.0;
        if (t == SPMD_DTYPE_F32)
            ((float *)in.data)[i] = (float)src[i];
        else
            ((double *)in.data)[i] = src[i];
    }
    /* row 1 holds a NaN; row 2 is all -inf (both NaN throughout along axis 1) */
    src[1 * 6 + 2] = NAN;
    for (int j = 0; j < 6; j++)
        src[2 * 6 + j] = -INFINITY;
    for (int i = 6; i < 18; i++) {
        if (t == SPMD_DTYPE_F32)
            ((float *)in.data)[i] = (float)src[i];
        else
            ((double *)in.data)[i] = src[i];
    }
    spmd_block *dst = in_place ? &in : &out;
    if (spmd_op_softmax(ctx, &in, axis, dst) != SPMD_OK) {
        printf("softmax: %s\n", spmd_last_error());
        return 0;
    }
    int a = axis < 0 ? axis + 2 : axis, ok = 1;
    int64_t lines = a == 1 ? 4 : 6, extent = shape[a], step = a == 1 ? 1 : 6;
    for (int64_t l = 0; l < lines; l++) {
        int64_t first = a == 1 ? l * 6 : l;
        double top = -INFINITY, sum = 0;
        int nan = 0;
        for (int64_t e = 0; e < extent; e++) {
            double v =
                t == SPMD_DTYPE_F32 ? (double)(float)src[first + e * step] : src[first + e * step];
            nan |= isnan(v);
            top = fmax(top, v);
        }
        for (int64_t e = 0; e < extent; e++)
            sum += exp((t == SPMD_DTYPE_F32 ? (double)(float)src[first + e * step]
                                            : src[first + e * step]) -
                       top);
        for (int64_t e = 0; e < extent; e++) {
            double x =
                t == SPMD_DTYPE_F32 ? (double)(float)src[first + e * step] : src[first + e * step];
            double want = exp(x - top) / sum, got = element(t, dst->data, first + e * step);
            /* a float rounds the double once; a GPU's exp may differ in a double's last bit */
            double tol = t == SPMD_DTYPE_F32 ? 1.2e-7 * fabs(want) : 1e-14 * fabs(want);
            if (nan || isinf(top))
                ok &= isnan(got);
            else
                ok &= fabs(got - want) <= tol;
        }
    }
    return ok;
}

static int run_keepdims(spmd_ctx *ctx, spmd_reduce_kind kind, int axis)
{
    const int64_t shape[2] = {3, 4}, kept[2] = {axis == 0 ? 1 : 3, axis == 0 ? 4 : 1},
                  dropped[1] = {axis == 0 ? 4 : 3};
    static unsigned char hi[MAXN * 8], hk[MAXN * 8], hd[MAXN * 8];
    spmd_block in, k, d;
    spmd_dtype out_t = kind == SPMD_REDUCE_ARGMAX ? SPMD_DTYPE_I32 : SPMD_DTYPE_F32;
    if (!make(ctx, hi, SPMD_DTYPE_F32, 2, shape, &in) || !make(ctx, hk, out_t, 2, kept, &k) ||
        !make(ctx, hd, out_t, 1, dropped, &d))
        return 0;
    for (int i = 0; i < 12; i++)
        ((float *)in.data)[i] = (float)((i * 5) % 7) - 2.5f;
    if (spmd_op_reduce(ctx, kind, &in, axis, &k) != SPMD_OK ||
        spmd_op_reduce(ctx, kind, &in, axis, &d) != SPMD_OK) {
        printf("reduce keepdims: %s\n", spmd_last_error());
        return 0;
    }
    /* the same values either way, and the sum / argmax by a loop here */
    int ok = memcmp(k.data, d.data, (size_t)dropped[0] * 4) == 0;
    for (int64_t l = 0; l < dropped[0]; l++) {
        double sum = 0, best = -INFINITY;
        int at = 0;
        for (int e = 0; e < shape[axis]; e++) {
            float v = ((float *)in.data)[axis == 0 ? e * 4 + l : l * 4 + e];
            sum += v;
            if (v > best)
                best = v, at = e;
        }
        ok &= kind == SPMD_REDUCE_ARGMAX ? ((int32_t *)k.data)[l] == at
                                         : ((float *)k.data)[l] == (float)sum;
    }
    return ok;
}

/* every case; results[c] = 1 when case c matched its reference */
static int run(spmd_ctx *ctx, unsigned char *results)
{
    int failures = 0, c = 0;
    unsigned char ok[CASES];
    for (int k = 0; k < NTAKE; k++)
        for (int mode = 0; mode < 3; mode++)
            ok[c++] = (unsigned char)run_take(ctx, &takes[k], (spmd_take_mode)mode);
    for (int k = 0; k < NCONCAT; k++)
        ok[c++] = (unsigned char)run_concat(ctx, &concats[k]);
    for (int axis = -1; axis < 2; axis++)
        for (int in_place = 0; in_place < 2; in_place++) {
            ok[c++] = (unsigned char)run_softmax(ctx, SPMD_DTYPE_F32, axis, in_place);
            ok[c++] = (unsigned char)run_softmax(ctx, SPMD_DTYPE_F64, axis, in_place);
        }
    for (int axis = 0; axis < 2; axis++) {
        ok[c++] = (unsigned char)run_keepdims(ctx, SPMD_REDUCE_SUM, axis);
        ok[c++] = (unsigned char)run_keepdims(ctx, SPMD_REDUCE_ARGMAX, axis);
    }
    for (int k = 0; k < c; k++) {
        if (!ok[k]) {
            printf("case %d%s differs from its reference\n", k, ctx ? " (on a device)" : "");
            failures++;
        }
        if (results)
            results[k] = ok[k];
    }
    return failures;
}

static int count_cases(void) { return NTAKE * 3 + NCONCAT + 12 + 4; }

static void check(const unsigned char *got, int shard)
{
    for (int k = 0; k < count_cases(); k++)
        SPMD_TEST_CHECK(got[k] == 1, "shard %d: case %d differs from its reference", shard, k);
}

int main(void)
{
    spmd_test_init();
    SPMD_TEST_CHECK(count_cases() <= CASES, "more cases than room");
    int failures = spmd_test_block_op(run, (size_t)count_cases(), check);
    return spmd_test_finish(failures + spmd_test_failed_checks());
}
