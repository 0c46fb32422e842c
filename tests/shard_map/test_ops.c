/* Block operations (ops.h) against host reference loops, on host blocks with ctx NULL and once
 * inside a shard_map body with a real ctx: fill, iota, copy between every pair of dtypes, unary,
 * binary (same shape, scalar and row broadcast, in place), binary_scalar, reduce (per axis and
 * over all axes) and gemm (every transpose combination, alpha/beta, 16-bit floats), plus the
 * documented errors and NULL arguments. The float16/bfloat16 references are rounded here from
 * the exact double value (round to nearest even), independently of the library's converters. */
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Value mismatches are reported one by one and fail the test at its end, so that a run lists
 * every failing case rather than the first. */
static int soft;

#define SOFT_FAIL(...)                                                                             \
    do {                                                                                           \
        print_error(__VA_ARGS__);                                                                  \
        print_error("\n");                                                                         \
        soft++;                                                                                    \
    } while (0)

static void soft_end(void)
{
    int n = soft;
    soft = 0;
    if (n)
        fail_msg("%d value mismatch(es), listed above", n);
}

/* ---- reference math -------------------------------------------------------------------- */

/* The test is not linked with libm, and the library computes with it: the references below are
 * written out here (range reduction and series), accurate to a few units in the last place of
 * a double over the arguments used. frexp and ldexp come from the C library proper. */

static double fmax_ref(double a, double b) { return a > b ? a : b; }

/* Round to the nearest integer, ties to even, for 0 <= x < 2^52. */
static double rint_even(double x)
{
    double i = (double)(int64_t)x, f = x - i;
    if (f > 0.5 || (f == 0.5 && ((int64_t)i & 1)))
        i += 1;
    return i;
}

static double nearest_int(double x) { return x < 0 ? -rint_even(-x) : rint_even(x); }

#define LN2_HI 6.93147180369123816490e-01 /* fdlibm's split of ln 2 */
#define LN2_LO 1.90821492927058770002e-10
#define PIO2_HI 1.57079632673412561417e+00 /* pi/2 in two parts */
#define PIO2_LO 6.07710050650619224932e-11

static double exp_ref(double x)
{
    double k = nearest_int(x / (LN2_HI + LN2_LO));
    double r = (x - k * LN2_HI) - k * LN2_LO; /* |r| <= ln2 / 2 */
    double term = 1, sum = 1;
    for (int n = 1; n < 30; n++) {
        term *= r / n;
        sum += term;
    }
    return ldexp(sum, (int)k);
}

/* exp(x) - 1 for |x| <= 1, without cancellation. */
static double expm1_small(double x)
{
    double term = x, sum = x;
    for (int n = 2; n < 30; n++) {
        term *= x / n;
        sum += term;
    }
    return sum;
}

static double log_ref(double x)
{
    int e;
    double m = frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
    if (m < 0.70710678118654752440) {
        m *= 2;
        e--;
    }
    double s = (m - 1) / (m + 1), s2 = s * s, term = s, sum = 0;
    for (int n = 1; n < 60; n += 2) {
        sum += term / n;
        term *= s2;
    }
    return 2 * sum + e * LN2_LO + e * LN2_HI;
}

/* sin and cos of |r| <= pi/4 by their series. */
static double sin_series(double r)
{
    double term = r, sum = r, r2 = r * r;
    for (int n = 3; n < 40; n += 2) {
        term *= -r2 / ((n - 1) * n);
        sum += term;
    }
    return sum;
}

static double cos_series(double r)
{
    double term = 1, sum = 1, r2 = r * r;
    for (int n = 2; n < 40; n += 2) {
        term *= -r2 / ((n - 1) * n);
        sum += term;
    }
    return sum;
}

/* sin (want_cos 0) or cos (1) for |x| up to a few hundred. */
static double sincos_ref(double x, int want_cos)
{
    double k = nearest_int(x / (PIO2_HI + PIO2_LO));
    double r = (x - k * PIO2_HI) - k * PIO2_LO;
    int q = (int)((int64_t)k & 3);
    if (want_cos)
        q = (q + 1) & 3; /* cos x = sin(x + pi/2) */
    switch (q) {
    case 0:
        return sin_series(r);
    case 1:
        return cos_series(r);
    case 2:
        return -sin_series(r);
    default:
        return -cos_series(r);
    }
}

static double tanh_ref(double x)
{
    double a = fabs(x), t;
    if (a <= 0.5) {
        double e = expm1_small(2 * a);
        t = e / (e + 2);
    } else if (a > 20) {
        t = 1;
    } else {
        double e = exp_ref(2 * a);
        t = (e - 1) / (e + 1);
    }
    return signbit(x) ? -t : t;
}

/* ---- reference dtypes ------------------------------------------------------------------ */

static const spmd_dtype all_dtypes[] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_I32,
                                        SPMD_DTYPE_I64, SPMD_DTYPE_F16, SPMD_DTYPE_BF16,
                                        SPMD_DTYPE_U8,  SPMD_DTYPE_BOOL};
#define NDTYPES ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))
static const spmd_dtype float_dtypes[] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_F16,
                                          SPMD_DTYPE_BF16};
static const spmd_dtype number_dtypes[] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_I32,
                                           SPMD_DTYPE_I64, SPMD_DTYPE_F16, SPMD_DTYPE_BF16};

static size_t esize(spmd_dtype t)
{
    switch (t) {
    case SPMD_DTYPE_F64:
    case SPMD_DTYPE_I64:
        return 8;
    case SPMD_DTYPE_F32:
    case SPMD_DTYPE_I32:
        return 4;
    case SPMD_DTYPE_F16:
    case SPMD_DTYPE_BF16:
        return 2;
    default:
        return 1;
    }
}

static int is_float(spmd_dtype t)
{
    return t == SPMD_DTYPE_F32 || t == SPMD_DTYPE_F64 || t == SPMD_DTYPE_F16 ||
           t == SPMD_DTYPE_BF16;
}

/* Exact double -> binary16, round to nearest even (one rounding). */
static uint16_t ref_f16(double x)
{
    if (isnan(x))
        return 0x7e00;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (a >= 65520.0) /* halfway between 65504 and 2^16 rounds to even: infinity */
        return sign | 0x7c00;
    if (a < ldexp(1.0, -14)) /* subnormal: units of 2^-24 (1024 units is the smallest normal) */
        return sign | (uint16_t)rint_even(ldexp(a, 24));
    int e;
    frexp(a, &e);                           /* a = m 2^e, m in [0.5, 1) */
    double q = rint_even(ldexp(a, 11 - e)); /* 1024 .. 2048 */
    int E = e - 1;
    if (q == 2048.0) {
        q = 1024.0;
        E++;
    }
    if (E > 15)
        return sign | 0x7c00;
    return sign | (uint16_t)((E + 15) << 10) | (uint16_t)((int)q - 1024);
}

static double ref_f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

/* Exact double -> bfloat16, round to nearest even. */
static uint16_t ref_bf16(double x)
{
    if (isnan(x))
        return 0x7fc0;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (a >= ldexp(2.0 - ldexp(1.0, -8), 127))
        return sign | 0x7f80;
    if (a < ldexp(1.0, -126))
        return sign | (uint16_t)rint_even(ldexp(a, 133));
    int e;
    frexp(a, &e);
    double q = rint_even(ldexp(a, 8 - e)); /* 128 .. 256 */
    int E = e - 1;
    if (q == 256.0) {
        q = 128.0;
        E++;
    }
    if (E > 127)
        return sign | 0x7f80;
    return sign | (uint16_t)((E + 127) << 7) | (uint16_t)((int)q - 128);
}

static double ref_bf16_value(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Element i of a buffer of dtype t, exactly, as a double (int64 beyond 2^53 rounds). */
static double get(spmd_dtype t, const void *p, size_t i)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        return ((const float *)p)[i];
    case SPMD_DTYPE_F64:
        return ((const double *)p)[i];
    case SPMD_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case SPMD_DTYPE_I64:
        return (double)((const int64_t *)p)[i];
    case SPMD_DTYPE_F16:
        return ref_f16_value(((const uint16_t *)p)[i]);
    case SPMD_DTYPE_BF16:
        return ref_bf16_value(((const uint16_t *)p)[i]);
    case SPMD_DTYPE_U8:
        return ((const uint8_t *)p)[i];
    case SPMD_DTYPE_BOOL:
        return ((const uint8_t *)p)[i];
    default:
        return NAN;
    }
}

/* Stores v converted as numpy's astype does for in-range values: floats round to nearest even
 * once, integers truncate toward zero, bool is v != 0. */
static void put(spmd_dtype t, void *p, size_t i, double v)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        ((float *)p)[i] = (float)v;
        break;
    case SPMD_DTYPE_F64:
        ((double *)p)[i] = v;
        break;
    case SPMD_DTYPE_I32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case SPMD_DTYPE_I64:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    case SPMD_DTYPE_F16:
        ((uint16_t *)p)[i] = ref_f16(v);
        break;
    case SPMD_DTYPE_BF16:
        ((uint16_t *)p)[i] = ref_bf16(v);
        break;
    case SPMD_DTYPE_U8:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    case SPMD_DTYPE_BOOL:
        ((uint8_t *)p)[i] = v != 0;
        break;
    default:
        break;
    }
}

/* v survives a round trip through t unchanged. */
static int representable(spmd_dtype t, double v)
{
    unsigned char buf[8];
    if (t == SPMD_DTYPE_U8 && (v < 0 || v > 255))
        return 0;
    if (t == SPMD_DTYPE_BOOL && v != 0 && v != 1)
        return 0;
    if ((t == SPMD_DTYPE_I32 && fabs(v) > 2e9) || (t == SPMD_DTYPE_I64 && fabs(v) > 9e18))
        return 0;
    put(t, buf, 0, v);
    return get(t, buf, 0) == v && signbit(get(t, buf, 0)) == signbit(v);
}

/* ---- blocks ---------------------------------------------------------------------------- */

typedef struct hblock {
    spmd_block b;
    void *mem;
} hblock;

/* A host block of dtype t and the given extents (ints), zero-filled. */
static hblock hb(spmd_dtype t, int ndim, ...)
{
    hblock h;
    memset(&h, 0, sizeof h);
    h.b.dtype = t;
    h.b.ndim = ndim;
    size_t n = 1;
    va_list ap;
    va_start(ap, ndim);
    for (int j = 0; j < ndim; j++) {
        h.b.shape[j] = va_arg(ap, int);
        n *= (size_t)h.b.shape[j];
    }
    va_end(ap);
    h.mem = calloc(n ? n : 1, esize(t));
    assert_non_null(h.mem);
    h.b.data = h.mem;
    return h;
}

static void hb_free(hblock *h)
{
    free(h->mem);
    h->mem = NULL;
    h->b.data = NULL;
}

static size_t nelem(const spmd_block *b)
{
    size_t n = 1;
    for (int j = 0; j < b->ndim; j++)
        n *= (size_t)b->shape[j];
    return n;
}

static const char *dn(spmd_dtype t) { return spmd_dtype_name(t); }

/* |got - want| within rel * |want| + abs, or both NaN / the same infinity. */
static int close_to(double got, double want, double rel, double abs_tol)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= rel * fabs(want) + abs_tol;
}

/* Relative tolerance of one rounding to dtype t (twice its unit roundoff). */
static double ulp_rel(spmd_dtype t)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        return 2.5e-7;
    case SPMD_DTYPE_F64:
        return 5e-16;
    case SPMD_DTYPE_F16:
        return 1.0e-3;
    case SPMD_DTYPE_BF16:
        return 8.0e-3;
    default:
        return 0;
    }
}

/* ---- fill and iota --------------------------------------------------------------------- */

static void test_fill_iota(void **state)
{
    (void)state;
    for (int d = 0; d < NDTYPES; d++) {
        spmd_dtype t = all_dtypes[d];
        double values[] = {0, 1, 7, 100};
        for (int v = 0; v < 4; v++) {
            hblock h = hb(t, 2, 3, 5);
            memset(h.mem, 0xA5, 15 * esize(t));
            assert_ok(spmd_op_fill(NULL, &h.b, values[v]));
            unsigned char w[8];
            put(t, w, 0, values[v]);
            for (size_t i = 0; i < 15; i++)
                if (get(t, h.mem, i) != get(t, w, 0))
                    SOFT_FAIL("fill %s with %g: element %zu is %g", dn(t), values[v], i,
                              get(t, h.mem, i));
            hb_free(&h);
        }
        /* rank 0 */
        hblock s = hb(t, 0);
        assert_ok(spmd_op_fill(NULL, &s.b, 1));
        assert_true(get(t, s.mem, 0) == 1);
        hb_free(&s);
    }
    /* fractional and negative fills of floats */
    for (int d = 0; d < 4; d++) {
        spmd_dtype t = float_dtypes[d];
        hblock h = hb(t, 1, 4);
        assert_ok(spmd_op_fill(NULL, &h.b, -2.75));
        for (size_t i = 0; i < 4; i++)
            assert_true(get(t, h.mem, i) == -2.75);
        hb_free(&h);
    }
    /* fill with 2 into bool is true */
    {
        hblock h = hb(SPMD_DTYPE_BOOL, 1, 3);
        assert_ok(spmd_op_fill(NULL, &h.b, 2));
        for (size_t i = 0; i < 3; i++)
            assert_int_equal(((uint8_t *)h.mem)[i], 1);
        hb_free(&h);
    }

    /* iota: out[i] = start + i * step over the row-major flat index */
    struct {
        spmd_dtype t;
        double start, step;
    } cases[] = {
        {SPMD_DTYPE_F32, 0.5, 0.25}, {SPMD_DTYPE_F64, -3, 1.5}, {SPMD_DTYPE_I32, 3, 2},
        {SPMD_DTYPE_I64, -10, 7},    {SPMD_DTYPE_F16, 1, 0.5},  {SPMD_DTYPE_BF16, -4, 1},
        {SPMD_DTYPE_U8, 240, 1},     {SPMD_DTYPE_BOOL, 0, 1},   {SPMD_DTYPE_I64, 1e12, 1e11}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        hblock h = hb(cases[c].t, 3, 2, 3, 2);
        assert_ok(spmd_op_iota(NULL, &h.b, cases[c].start, cases[c].step));
        unsigned char want[8];
        for (size_t i = 0; i < 12; i++) {
            put(cases[c].t, want, 0, cases[c].start + (double)i * cases[c].step);
            if (get(cases[c].t, h.mem, i) != get(cases[c].t, want, 0))
                SOFT_FAIL("iota %s start %g step %g: element %zu is %g, expected %g",
                          dn(cases[c].t), cases[c].start, cases[c].step, i,
                          get(cases[c].t, h.mem, i), get(cases[c].t, want, 0));
        }
        hb_free(&h);
    }

    /* errors */
    hblock h = hb(SPMD_DTYPE_F32, 1, 3);
    assert_status(spmd_op_fill(NULL, NULL, 1), SPMD_ERR_INVALID_ARGUMENT, "out");
    assert_status(spmd_op_iota(NULL, NULL, 0, 1), SPMD_ERR_INVALID_ARGUMENT, "out");
    h.b.data = NULL;
    assert_status(spmd_op_fill(NULL, &h.b, 1), SPMD_ERR_INVALID_ARGUMENT, "data");
    h.b.data = h.mem;
    h.b.dtype = SPMD_DTYPE_COUNT;
    assert_status(spmd_op_fill(NULL, &h.b, 1), SPMD_ERR_INVALID_ARGUMENT, "dtype");
    h.b.dtype = SPMD_DTYPE_F32;
    h.b.shape[0] = 0;
    assert_status(spmd_op_fill(NULL, &h.b, 1), SPMD_ERR_SHAPE, "extent");
    h.b.shape[0] = 3;
    h.b.ndim = -1;
    assert_status(spmd_op_iota(NULL, &h.b, 0, 1), SPMD_ERR_SHAPE, "rank");
    hb_free(&h);
    soft_end();
}

/* ---- copy: every dtype to every dtype -------------------------------------------------- */

static void test_copy(void **state)
{
    (void)state;
    /* candidate values; each source takes those it represents exactly */
    const double base[] = {0,
                           1,
                           2,
                           7,
                           100,
                           200,
                           255,
                           -1,
                           -0.0,
                           2.5,
                           -2.5,
                           3.75,
                           0.5,
                           0.1,
                           1.0 / 3.0,
                           1000.7,
                           -70000.5,
                           300000,
                           1.0 + 0x1p-11 + 0x1p-40, /* f16: just above a tie after f32 rounding */
                           1.0 + 0x1p-8 + 0x1p-40,  /* bf16: the same */
                           65519,                   /* f16: rounds down to 65504 */
                           65520,                   /* f16: rounds to infinity */
                           0x1p-20,                 /* f16 subnormal */
                           123456789,
                           -2147483000.0};
    const size_t nbase = sizeof base / sizeof base[0];
    int checked = 0;
    for (int s = 0; s < NDTYPES; s++) {
        spmd_dtype from = all_dtypes[s];
        double vals[32];
        size_t n = 0;
        for (size_t k = 0; k < nbase; k++)
            if (representable(from, base[k]))
                vals[n++] = base[k];
        for (int d = 0; d < NDTYPES; d++) {
            spmd_dtype to = all_dtypes[d];
            /* leave out values whose conversion C leaves undefined (out of the target's range) */
            double use[32];
            size_t m = 0;
            for (size_t k = 0; k < n; k++) {
                double v = vals[k];
                if (to == SPMD_DTYPE_U8 && (v < 0 || v >= 256))
                    continue;
                if (to == SPMD_DTYPE_I32 && fabs(v) >= 2147483648.0)
                    continue;
                use[m++] = v;
            }
            hblock in = hb(from, 1, (int)m), out = hb(to, 1, (int)m), want = hb(to, 1, (int)m);
            for (size_t k = 0; k < m; k++) {
                put(from, in.mem, k, use[k]);
                put(to, want.mem, k, use[k]);
            }
            memset(out.mem, 0x5A, m * esize(to));
            assert_ok(spmd_op_copy(NULL, &in.b, &out.b));
            for (size_t k = 0; k < m; k++) {
                checked++;
                if (memcmp((char *)out.mem + k * esize(to), (char *)want.mem + k * esize(to),
                           esize(to)) != 0)
                    SOFT_FAIL("copy %s -> %s of %.17g gave %.17g, expected %.17g", dn(from), dn(to),
                              use[k], get(to, out.mem, k), get(to, want.mem, k));
            }
            hb_free(&in);
            hb_free(&out);
            hb_free(&want);
        }
    }
    print_message("copy: %d (source dtype, target dtype, value) conversions checked\n", checked);

    /* int64 values beyond 2^53 stay exact int64 -> int64, and round once to float64 */
    {
        hblock in = hb(SPMD_DTYPE_I64, 1, 2), o64 = hb(SPMD_DTYPE_I64, 1, 2),
               of = hb(SPMD_DTYPE_F64, 1, 2);
        ((int64_t *)in.mem)[0] = (INT64_C(1) << 60) + 1;
        ((int64_t *)in.mem)[1] = -(INT64_C(1) << 55) - 3;
        assert_ok(spmd_op_copy(NULL, &in.b, &o64.b));
        assert_memory_equal(in.mem, o64.mem, 16);
        assert_ok(spmd_op_copy(NULL, &in.b, &of.b));
        assert_true(((double *)of.mem)[0] == (double)((int64_t *)in.mem)[0]);
        assert_true(((double *)of.mem)[1] == (double)((int64_t *)in.mem)[1]);
        hb_free(&in);
        hb_free(&o64);
        hb_free(&of);
    }
    /* NaN and infinities between floats */
    for (int s = 0; s < 4; s++)
        for (int d = 0; d < 4; d++) {
            hblock in = hb(float_dtypes[s], 1, 3), out = hb(float_dtypes[d], 1, 3);
            put(float_dtypes[s], in.mem, 0, NAN);
            put(float_dtypes[s], in.mem, 1, INFINITY);
            put(float_dtypes[s], in.mem, 2, -INFINITY);
            assert_ok(spmd_op_copy(NULL, &in.b, &out.b));
            assert_true(isnan(get(float_dtypes[d], out.mem, 0)));
            assert_true(get(float_dtypes[d], out.mem, 1) == INFINITY);
            assert_true(get(float_dtypes[d], out.mem, 2) == -INFINITY);
            hb_free(&in);
            hb_free(&out);
        }
    /* multi-dimensional, in place for equal dtypes */
    {
        hblock a = hb(SPMD_DTYPE_F32, 3, 2, 3, 4);
        for (size_t i = 0; i < 24; i++)
            ((float *)a.mem)[i] = (float)i;
        assert_ok(spmd_op_copy(NULL, &a.b, &a.b));
        for (size_t i = 0; i < 24; i++)
            assert_true(((float *)a.mem)[i] == (float)i);
        hblock o = hb(SPMD_DTYPE_I64, 3, 2, 3, 4);
        assert_ok(spmd_op_copy(NULL, &a.b, &o.b));
        for (size_t i = 0; i < 24; i++)
            assert_true(((int64_t *)o.mem)[i] == (int64_t)i);
        /* errors */
        hblock wrong = hb(SPMD_DTYPE_F32, 3, 2, 4, 3);
        assert_status(spmd_op_copy(NULL, &a.b, &wrong.b), SPMD_ERR_SHAPE, "shape");
        hblock flat = hb(SPMD_DTYPE_F32, 1, 24);
        assert_status(spmd_op_copy(NULL, &a.b, &flat.b), SPMD_ERR_SHAPE, "shape");
        /* converting in place would overwrite what it reads */
        spmd_block alias = a.b;
        alias.dtype = SPMD_DTYPE_I32;
        assert_status(spmd_op_copy(NULL, &a.b, &alias), SPMD_ERR_INVALID_ARGUMENT, "place");
        assert_status(spmd_op_copy(NULL, NULL, &o.b), SPMD_ERR_INVALID_ARGUMENT, "in");
        assert_status(spmd_op_copy(NULL, &a.b, NULL), SPMD_ERR_INVALID_ARGUMENT, "out");
        hb_free(&a);
        hb_free(&o);
        hb_free(&wrong);
        hb_free(&flat);
    }
    soft_end();
}

/* ---- unary ----------------------------------------------------------------------------- */

static double ref_unary(spmd_unary_op op, double x)
{
    switch (op) {
    case SPMD_UNARY_NEG:
        return -x;
    case SPMD_UNARY_EXP:
        return exp_ref(x);
    case SPMD_UNARY_LOG:
        return log_ref(x);
    case SPMD_UNARY_SIN:
        return sincos_ref(x, 0);
    case SPMD_UNARY_COS:
        return sincos_ref(x, 1);
    case SPMD_UNARY_TANH:
        return tanh_ref(x);
    case SPMD_UNARY_RELU:
        return x > 0 ? x : 0;
    }
    return NAN;
}

static const char *unary_name(spmd_unary_op op)
{
    static const char *names[] = {"neg", "exp", "log", "sin", "cos", "tanh", "relu"};
    return names[op];
}

static void test_unary(void **state)
{
    (void)state;
    const double xs[] = {-3.0, -1.5, -0.5, -0.0, 0.25, 1.0, 2.0, 3.5, 7.25, 0.75};
    const double pos[] = {0.125, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 10.0, 100.0, 0.75};
    const size_t n = 10;
    for (int d = 0; d < 4; d++) {
        spmd_dtype t = float_dtypes[d];
        for (int op = SPMD_UNARY_NEG; op <= SPMD_UNARY_RELU; op++) {
            const double *src = op == SPMD_UNARY_LOG ? pos : xs;
            for (int inplace = 0; inplace < 2; inplace++) {
                hblock in = hb(t, 2, 2, 5), out = hb(t, 2, 2, 5);
                for (size_t i = 0; i < n; i++)
                    put(t, in.mem, i, src[i]);
                spmd_block *o = inplace ? &in.b : &out.b;
                assert_ok(spmd_op_unary(NULL, (spmd_unary_op)op, &in.b, o));
                for (size_t i = 0; i < n; i++) {
                    double x = src[i]; /* exact in every float dtype */
                    unsigned char w[8];
                    put(t, w, 0, ref_unary((spmd_unary_op)op, x));
                    double want = get(t, w, 0), got = get(t, o->data, i);
                    double rel = t == SPMD_DTYPE_F64 ? 1e-14 : ulp_rel(t);
                    if (!close_to(got, want, rel, rel * 1e-3))
                        SOFT_FAIL("%s %s(%g)%s = %.9g, expected %.9g", dn(t),
                                  unary_name((spmd_unary_op)op), x, inplace ? " in place" : "", got,
                                  want);
                }
                hb_free(&in);
                hb_free(&out);
            }
        }
    }
    /* neg and relu on integers, exactly */
    {
        hblock a = hb(SPMD_DTYPE_I32, 1, 5), b = hb(SPMD_DTYPE_I32, 1, 5);
        const int32_t v[5] = {-7, 0, 5, INT32_MAX, -INT32_MAX};
        memcpy(a.mem, v, sizeof v);
        assert_ok(spmd_op_unary(NULL, SPMD_UNARY_NEG, &a.b, &b.b));
        for (int i = 0; i < 5; i++)
            assert_int_equal(((int32_t *)b.mem)[i], -v[i]);
        assert_ok(spmd_op_unary(NULL, SPMD_UNARY_RELU, &a.b, &a.b));
        for (int i = 0; i < 5; i++)
            assert_int_equal(((int32_t *)a.mem)[i], v[i] > 0 ? v[i] : 0);
        hb_free(&a);
        hb_free(&b);
    }
    {
        hblock a = hb(SPMD_DTYPE_I64, 1, 4), b = hb(SPMD_DTYPE_I64, 1, 4);
        const int64_t v[4] = {-(INT64_C(1) << 60) - 1, 0, (INT64_C(1) << 53) + 1, 42};
        memcpy(a.mem, v, sizeof v);
        assert_ok(spmd_op_unary(NULL, SPMD_UNARY_NEG, &a.b, &b.b));
        for (int i = 0; i < 4; i++)
            assert_true(((int64_t *)b.mem)[i] == -v[i]);
        assert_ok(spmd_op_unary(NULL, SPMD_UNARY_RELU, &a.b, &b.b));
        for (int i = 0; i < 4; i++)
            assert_true(((int64_t *)b.mem)[i] == (v[i] > 0 ? v[i] : 0));
        hb_free(&a);
        hb_free(&b);
    }
    /* errors */
    hblock i32 = hb(SPMD_DTYPE_I32, 1, 3), i64 = hb(SPMD_DTYPE_I64, 1, 3);
    hblock u8 = hb(SPMD_DTYPE_U8, 1, 3), f32 = hb(SPMD_DTYPE_F32, 1, 3);
    hblock f64 = hb(SPMD_DTYPE_F64, 1, 3), f32b = hb(SPMD_DTYPE_F32, 1, 4);
    assert_status(spmd_op_unary(NULL, SPMD_UNARY_EXP, &i32.b, &i32.b), SPMD_ERR_UNSUPPORTED,
                  "int32");
    assert_status(spmd_op_unary(NULL, SPMD_UNARY_LOG, &i64.b, &i64.b), SPMD_ERR_UNSUPPORTED,
                  "int64");
    assert_status(spmd_op_unary(NULL, SPMD_UNARY_TANH, &i32.b, &i32.b), SPMD_ERR_UNSUPPORTED, "");
    assert_status(spmd_op_unary(NULL, SPMD_UNARY_NEG, &u8.b, &u8.b), SPMD_ERR_UNSUPPORTED, "uint8");
    assert_status(spmd_op_unary(NULL, SPMD_UNARY_NEG, &f32.b, &f32b.b), SPMD_ERR_SHAPE, "shape");
    assert_status(spmd_op_unary(NULL, SPMD_UNARY_NEG, &f32.b, &f64.b), SPMD_ERR_INVALID_ARGUMENT,
                  "float64");
    assert_status(spmd_op_unary(NULL, (spmd_unary_op)99, &f32.b, &f32.b), SPMD_ERR_INVALID_ARGUMENT,
                  "op");
    assert_status(spmd_op_unary(NULL, SPMD_UNARY_NEG, NULL, &f32.b), SPMD_ERR_INVALID_ARGUMENT,
                  "in");
    assert_status(spmd_op_unary(NULL, SPMD_UNARY_NEG, &f32.b, NULL), SPMD_ERR_INVALID_ARGUMENT,
                  "out");
    hb_free(&i32);
    hb_free(&i64);
    hb_free(&u8);
    hb_free(&f32);
    hb_free(&f64);
    hb_free(&f32b);
    soft_end();
}

/* ---- binary ---------------------------------------------------------------------------- */

static const char *binary_name(spmd_binary_op op)
{
    static const char *names[] = {"add", "sub", "mul", "div", "max", "min"};
    return names[op];
}

static double ref_binary_float(spmd_binary_op op, double a, double b)
{
    switch (op) {
    case SPMD_BINARY_ADD:
        return a + b;
    case SPMD_BINARY_SUB:
        return a - b;
    case SPMD_BINARY_MUL:
        return a * b;
    case SPMD_BINARY_DIV:
        return a / b;
    case SPMD_BINARY_MAX:
        return a > b ? a : b;
    case SPMD_BINARY_MIN:
        return a < b ? a : b;
    case SPMD_BINARY_AND: /* bitwise: integers only (test_bitwise.c) */
    case SPMD_BINARY_OR:
    case SPMD_BINARY_XOR:
        break;
    }
    return NAN;
}

/* Integer arithmetic as JAX does it: wrapping, division truncating toward zero. */
static int64_t ref_binary_int(spmd_binary_op op, int64_t a, int64_t b, int bits)
{
    uint64_t r = 0;
    switch (op) {
    case SPMD_BINARY_ADD:
        r = (uint64_t)a + (uint64_t)b;
        break;
    case SPMD_BINARY_SUB:
        r = (uint64_t)a - (uint64_t)b;
        break;
    case SPMD_BINARY_MUL:
        r = (uint64_t)a * (uint64_t)b;
        break;
    case SPMD_BINARY_DIV:
        r = (uint64_t)(a / b);
        break;
    case SPMD_BINARY_MAX:
        r = (uint64_t)(a > b ? a : b);
        break;
    case SPMD_BINARY_MIN:
        r = (uint64_t)(a < b ? a : b);
        break;
    case SPMD_BINARY_AND:
        r = (uint64_t)a & (uint64_t)b;
        break;
    case SPMD_BINARY_OR:
        r = (uint64_t)a | (uint64_t)b;
        break;
    case SPMD_BINARY_XOR:
        r = (uint64_t)a ^ (uint64_t)b;
        break;
    }
    if (bits == 32)
        return (int64_t)(int32_t)(uint32_t)r;
    return (int64_t)r;
}

static int64_t geti(spmd_dtype t, const void *p, size_t i)
{
    return t == SPMD_DTYPE_I32 ? ((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

static void puti(spmd_dtype t, void *p, size_t i, int64_t v)
{
    if (t == SPMD_DTYPE_I32)
        ((int32_t *)p)[i] = (int32_t)v;
    else
        ((int64_t *)p)[i] = v;
}

/* Checks out = a op b(broadcast) for a of shape (rows, cols) given b's element for each i. */
static void check_binary_result(spmd_binary_op op, spmd_dtype t, const void *a, const void *b,
                                const void *out, size_t n, size_t period, const char *how)
{
    for (size_t i = 0; i < n; i++) {
        if (is_float(t)) {
            unsigned char w[8];
            put(t, w, 0, ref_binary_float(op, get(t, a, i), get(t, b, i % period)));
            double want = get(t, w, 0), got = get(t, out, i);
            if (!close_to(got, want, ulp_rel(t), 0))
                SOFT_FAIL("%s %s %s: element %zu: %.9g op %.9g = %.9g, expected %.9g", dn(t),
                          binary_name(op), how, i, get(t, a, i), get(t, b, i % period), got, want);
        } else {
            int64_t want = ref_binary_int(op, geti(t, a, i), geti(t, b, i % period),
                                          t == SPMD_DTYPE_I32 ? 32 : 64);
            int64_t got = geti(t, out, i);
            if (got != want)
                SOFT_FAIL("%s %s %s: element %zu: %lld op %lld = %lld, expected %lld", dn(t),
                          binary_name(op), how, i, (long long)geti(t, a, i),
                          (long long)geti(t, b, i % period), (long long)got, (long long)want);
        }
    }
}

/* Values of a (2, 3, 4) block and of b, nonzero (so that integer division is defined). */
static double a_value(size_t i) { return (double)((int)(i * 7 % 23) - 11) * 0.5; }
static double b_value(size_t i) { return (double)((int)(i * 5 % 13) - 6) * 0.25 + 0.125; }
static int64_t ai_value(size_t i) { return (int64_t)(i * 7 % 23) - 11; }
static int64_t bi_value(size_t i)
{
    int64_t v = (int64_t)(i * 5 % 13) - 6;
    return v == 0 ? 3 : v;
}

static void fill_operand(spmd_dtype t, void *p, size_t n, int which)
{
    for (size_t i = 0; i < n; i++) {
        if (is_float(t))
            put(t, p, i, which ? b_value(i) : a_value(i));
        else
            puti(t, p, i, which ? bi_value(i) : ai_value(i));
    }
}

static void test_binary(void **state)
{
    (void)state;
    for (int d = 0; d < 6; d++) {
        spmd_dtype t = number_dtypes[d];
        for (int op = SPMD_BINARY_ADD; op <= SPMD_BINARY_MIN; op++) {
            /* b: same shape, scalar (rank 0), one element (1,), a row (4,) */
            struct {
                int ndim;
                int shape[3];
                size_t period;
                const char *how;
            } bs[] = {{3, {2, 3, 4}, 24, "same shape"},
                      {0, {0}, 1, "scalar broadcast (rank 0)"},
                      {1, {1}, 1, "scalar broadcast (1,)"},
                      {1, {4}, 4, "row broadcast"}};
            for (size_t k = 0; k < 4; k++) {
                hblock a = hb(t, 3, 2, 3, 4), out = hb(t, 3, 2, 3, 4);
                hblock b = bs[k].ndim == 3   ? hb(t, 3, 2, 3, 4)
                           : bs[k].ndim == 0 ? hb(t, 0)
                                             : hb(t, 1, bs[k].shape[0]);
                fill_operand(t, a.mem, 24, 0);
                fill_operand(t, b.mem, bs[k].period, 1);
                assert_ok(spmd_op_binary(NULL, (spmd_binary_op)op, &a.b, &b.b, &out.b));
                check_binary_result((spmd_binary_op)op, t, a.mem, b.mem, out.mem, 24, bs[k].period,
                                    bs[k].how);
                /* in place: out is a */
                hblock a2 = hb(t, 3, 2, 3, 4);
                memcpy(a2.mem, a.mem, 24 * esize(t));
                assert_ok(spmd_op_binary(NULL, (spmd_binary_op)op, &a2.b, &b.b, &a2.b));
                assert_memory_equal(a2.mem, out.mem, 24 * esize(t));
                /* in place: out is b (same shape) */
                if (bs[k].ndim == 3) {
                    hblock b2 = hb(t, 3, 2, 3, 4);
                    memcpy(b2.mem, b.mem, 24 * esize(t));
                    assert_ok(spmd_op_binary(NULL, (spmd_binary_op)op, &a.b, &b2.b, &b2.b));
                    assert_memory_equal(b2.mem, out.mem, 24 * esize(t));
                    hb_free(&b2);
                }
                hb_free(&a);
                hb_free(&a2);
                hb_free(&b);
                hb_free(&out);
            }
        }
    }
    /* row broadcast on a 2-D block */
    {
        hblock a = hb(SPMD_DTYPE_F64, 2, 3, 2), b = hb(SPMD_DTYPE_F64, 1, 2);
        const double av[6] = {1, 2, 3, 4, 5, 6}, bv[2] = {10, 100};
        memcpy(a.mem, av, sizeof av);
        memcpy(b.mem, bv, sizeof bv);
        assert_ok(spmd_op_binary(NULL, SPMD_BINARY_MUL, &a.b, &b.b, &a.b));
        const double want[6] = {10, 200, 30, 400, 50, 600};
        assert_memory_equal(a.mem, want, sizeof want);
        hb_free(&a);
        hb_free(&b);
    }
    /* integer division truncates toward zero */
    {
        hblock a = hb(SPMD_DTYPE_I32, 1, 6), b = hb(SPMD_DTYPE_I32, 1, 6),
               o = hb(SPMD_DTYPE_I32, 1, 6);
        const int32_t av[6] = {7, -7, 7, -7, 1, -1}, bv[6] = {2, 2, -2, -2, 3, 3};
        const int32_t want[6] = {3, -3, -3, 3, 0, 0};
        memcpy(a.mem, av, sizeof av);
        memcpy(b.mem, bv, sizeof bv);
        assert_ok(spmd_op_binary(NULL, SPMD_BINARY_DIV, &a.b, &b.b, &o.b));
        assert_memory_equal(o.mem, want, sizeof want);
        /* dividing an integer by zero is an error */
        ((int32_t *)b.mem)[3] = 0;
        spmd_status st = spmd_op_binary(NULL, SPMD_BINARY_DIV, &a.b, &b.b, &o.b);
        assert_int_not_equal(st, SPMD_OK);
        assert_true(spmd_last_error()[0] != '\0');
        assert_true(strstr(spmd_last_error(), "zero") != NULL);
        hblock z = hb(SPMD_DTYPE_I64, 0), a64 = hb(SPMD_DTYPE_I64, 1, 3);
        assert_int_not_equal(spmd_op_binary(NULL, SPMD_BINARY_DIV, &a64.b, &z.b, &a64.b), SPMD_OK);
        assert_int_not_equal(spmd_op_binary_scalar(NULL, SPMD_BINARY_DIV, &a.b, 0.0, &o.b),
                             SPMD_OK);
        hb_free(&a);
        hb_free(&b);
        hb_free(&o);
        hb_free(&z);
        hb_free(&a64);
    }
    /* float division by zero is IEEE */
    {
        hblock a = hb(SPMD_DTYPE_F32, 1, 3), b = hb(SPMD_DTYPE_F32, 0);
        const float av[3] = {1, -1, 0};
        memcpy(a.mem, av, sizeof av);
        assert_ok(spmd_op_binary(NULL, SPMD_BINARY_DIV, &a.b, &b.b, &a.b));
        assert_true(((float *)a.mem)[0] == INFINITY && ((float *)a.mem)[1] == -INFINITY &&
                    isnan(((float *)a.mem)[2]));
        hb_free(&a);
        hb_free(&b);
    }
    /* max and min propagate NaN from either side, as lax.max / lax.min (XLA) do */
    for (int d = 0; d < 4; d++) {
        spmd_dtype t = float_dtypes[d];
        for (int op = SPMD_BINARY_MAX; op <= SPMD_BINARY_MIN; op++) {
            hblock a = hb(t, 1, 2), b = hb(t, 1, 2), o = hb(t, 1, 2);
            put(t, a.mem, 0, NAN);
            put(t, b.mem, 0, 1.0);
            put(t, a.mem, 1, 1.0);
            put(t, b.mem, 1, NAN);
            assert_ok(spmd_op_binary(NULL, (spmd_binary_op)op, &a.b, &b.b, &o.b));
            for (size_t i = 0; i < 2; i++)
                if (!isnan(get(t, o.mem, i)))
                    SOFT_FAIL("%s %s with NaN as %s operand gave %g, expected NaN", dn(t),
                              binary_name((spmd_binary_op)op), i ? "the second" : "the first",
                              get(t, o.mem, i));
            hb_free(&a);
            hb_free(&b);
            hb_free(&o);
        }
    }
    /* int64 arithmetic is exact beyond 2^53 */
    {
        hblock a = hb(SPMD_DTYPE_I64, 1, 3), b = hb(SPMD_DTYPE_I64, 1, 3),
               o = hb(SPMD_DTYPE_I64, 1, 3);
        const int64_t av[3] = {(INT64_C(1) << 53) + 1, INT64_C(3000000000), -(INT64_C(1) << 62)};
        const int64_t bv[3] = {1, INT64_C(3000000001), 7};
        memcpy(a.mem, av, sizeof av);
        memcpy(b.mem, bv, sizeof bv);
        assert_ok(spmd_op_binary(NULL, SPMD_BINARY_ADD, &a.b, &b.b, &o.b));
        for (int i = 0; i < 3; i++)
            if (((int64_t *)o.mem)[i] != av[i] + bv[i])
                SOFT_FAIL("int64 add %lld + %lld = %lld, expected %lld", (long long)av[i],
                          (long long)bv[i], (long long)((int64_t *)o.mem)[i],
                          (long long)(av[i] + bv[i]));
        assert_ok(spmd_op_binary(NULL, SPMD_BINARY_MUL, &a.b, &b.b, &o.b));
        if (((int64_t *)o.mem)[1] != av[1] * bv[1])
            SOFT_FAIL("int64 mul 3000000000 * 3000000001 = %lld, expected %lld",
                      (long long)((int64_t *)o.mem)[1], (long long)(av[1] * bv[1]));
        hb_free(&a);
        hb_free(&b);
        hb_free(&o);
    }
    /* int32 wraps on overflow, as in JAX */
    {
        hblock a = hb(SPMD_DTYPE_I32, 1, 2), b = hb(SPMD_DTYPE_I32, 1, 2),
               o = hb(SPMD_DTYPE_I32, 1, 2);
        const int32_t av[2] = {INT32_MAX, 65536}, bv[2] = {1, 65536};
        memcpy(a.mem, av, sizeof av);
        memcpy(b.mem, bv, sizeof bv);
        assert_ok(spmd_op_binary(NULL, SPMD_BINARY_ADD, &a.b, &b.b, &o.b));
        assert_int_equal(((int32_t *)o.mem)[0], INT32_MIN);
        assert_ok(spmd_op_binary(NULL, SPMD_BINARY_MUL, &a.b, &b.b, &o.b));
        if (((int32_t *)o.mem)[1] != 0)
            SOFT_FAIL("int32 mul 65536 * 65536 = %d, expected 0 (wrapping)", ((int32_t *)o.mem)[1]);
        hb_free(&a);
        hb_free(&b);
        hb_free(&o);
    }
    /* shape and dtype errors */
    {
        hblock a = hb(SPMD_DTYPE_F32, 2, 2, 3), bt = hb(SPMD_DTYPE_F32, 2, 3, 2);
        hblock col = hb(SPMD_DTYPE_F32, 1, 2), six = hb(SPMD_DTYPE_F32, 1, 6);
        hblock out_bad = hb(SPMD_DTYPE_F32, 2, 3, 2), b64 = hb(SPMD_DTYPE_F64, 2, 2, 3);
        hblock u8 = hb(SPMD_DTYPE_U8, 2, 2, 3), o64 = hb(SPMD_DTYPE_F64, 2, 2, 3);
        assert_status(spmd_op_binary(NULL, SPMD_BINARY_ADD, &a.b, &bt.b, &a.b), SPMD_ERR_SHAPE,
                      "b");
        assert_status(spmd_op_binary(NULL, SPMD_BINARY_ADD, &a.b, &col.b, &a.b), SPMD_ERR_SHAPE,
                      "b");
        assert_status(spmd_op_binary(NULL, SPMD_BINARY_ADD, &a.b, &six.b, &a.b), SPMD_ERR_SHAPE,
                      "b");
        assert_status(spmd_op_binary(NULL, SPMD_BINARY_ADD, &a.b, &a.b, &out_bad.b), SPMD_ERR_SHAPE,
                      "out");
        assert_int_not_equal(spmd_op_binary(NULL, SPMD_BINARY_ADD, &a.b, &b64.b, &a.b), SPMD_OK);
        assert_int_not_equal(spmd_op_binary(NULL, SPMD_BINARY_ADD, &a.b, &a.b, &o64.b), SPMD_OK);
        assert_int_not_equal(spmd_op_binary(NULL, SPMD_BINARY_ADD, &u8.b, &u8.b, &u8.b), SPMD_OK);
        assert_status(spmd_op_binary(NULL, (spmd_binary_op)42, &a.b, &a.b, &a.b),
                      SPMD_ERR_INVALID_ARGUMENT, "op");
        assert_status(spmd_op_binary(NULL, SPMD_BINARY_ADD, NULL, &a.b, &a.b),
                      SPMD_ERR_INVALID_ARGUMENT, "a");
        assert_status(spmd_op_binary(NULL, SPMD_BINARY_ADD, &a.b, NULL, &a.b),
                      SPMD_ERR_INVALID_ARGUMENT, "b");
        assert_status(spmd_op_binary(NULL, SPMD_BINARY_ADD, &a.b, &a.b, NULL),
                      SPMD_ERR_INVALID_ARGUMENT, "out");
        assert_status(spmd_op_binary_scalar(NULL, SPMD_BINARY_ADD, NULL, 1.0, &a.b),
                      SPMD_ERR_INVALID_ARGUMENT, "a");
        assert_status(spmd_op_binary_scalar(NULL, SPMD_BINARY_ADD, &a.b, 1.0, NULL),
                      SPMD_ERR_INVALID_ARGUMENT, "out");
        assert_status(spmd_op_binary_scalar(NULL, SPMD_BINARY_ADD, &a.b, 1.0, &out_bad.b),
                      SPMD_ERR_SHAPE, "out");
        hb_free(&a);
        hb_free(&bt);
        hb_free(&col);
        hb_free(&six);
        hb_free(&out_bad);
        hb_free(&b64);
        hb_free(&u8);
        hb_free(&o64);
    }
    soft_end();
}

static void test_binary_scalar(void **state)
{
    (void)state;
    const double floats[] = {2.5, -0.75, 3.0};
    const double ints[] = {3, -2, 7};
    for (int d = 0; d < 6; d++) {
        spmd_dtype t = number_dtypes[d];
        for (int op = SPMD_BINARY_ADD; op <= SPMD_BINARY_MIN; op++)
            for (int k = 0; k < 3; k++) {
                double s = is_float(t) ? floats[k] : ints[k];
                hblock a = hb(t, 2, 4, 5), out = hb(t, 2, 4, 5), sb = hb(t, 0);
                fill_operand(t, a.mem, 20, 0);
                put(t, sb.mem, 0, s);
                assert_ok(spmd_op_binary_scalar(NULL, (spmd_binary_op)op, &a.b, s, &out.b));
                char how[48];
                snprintf(how, sizeof how, "with the host scalar %g", s);
                check_binary_result((spmd_binary_op)op, t, a.mem, sb.mem, out.mem, 20, 1, how);
                /* in place */
                assert_ok(spmd_op_binary_scalar(NULL, (spmd_binary_op)op, &a.b, s, &a.b));
                assert_memory_equal(a.mem, out.mem, 20 * esize(t));
                hb_free(&a);
                hb_free(&out);
                hb_free(&sb);
            }
    }
    soft_end();
}

/* ---- reduce ---------------------------------------------------------------------------- */

static const char *reduce_name(spmd_reduce_kind k)
{
    return k == SPMD_REDUCE_SUM ? "sum" : k == SPMD_REDUCE_MAX ? "max" : "mean";
}

static void test_reduce(void **state)
{
    (void)state;
    const int shape[3] = {2, 3, 4};
    const spmd_reduce_kind kinds[3] = {SPMD_REDUCE_SUM, SPMD_REDUCE_MAX, SPMD_REDUCE_MEAN};
    const int axes[] = {0, 1, 2, -1, -2, -3, SPMD_ALL_AXES};
    for (int d = 0; d < 6; d++) {
        spmd_dtype t = number_dtypes[d];
        hblock in = hb(t, 3, 2, 3, 4);
        fill_operand(t, in.mem, 24, 0);
        for (int kk = 0; kk < 3; kk++) {
            spmd_reduce_kind kind = kinds[kk];
            /* a mean needs a float out: integers reduce into float64 */
            spmd_dtype ot = kind == SPMD_REDUCE_MEAN && !is_float(t) ? SPMD_DTYPE_F64 : t;
            for (size_t ax = 0; ax < sizeof axes / sizeof axes[0]; ax++) {
                int axis = axes[ax];
                int a = axis == SPMD_ALL_AXES ? -1 : axis < 0 ? axis + 3 : axis;
                hblock out;
                if (a < 0)
                    out = hb(ot, 0);
                else
                    out = hb(ot, 2, shape[a == 0 ? 1 : 0], shape[a == 2 ? 1 : 2]);
                assert_ok(spmd_op_reduce(NULL, kind, &in.b, axis, &out.b));
                size_t nout = nelem(&out.b);
                for (size_t o = 0; o < nout; o++) {
                    /* reference: visit the elements of `in` that land on o */
                    double acc = kind == SPMD_REDUCE_MAX ? -INFINITY : 0;
                    int count = 0;
                    for (int i = 0; i < 2; i++)
                        for (int j = 0; j < 3; j++)
                            for (int k = 0; k < 4; k++) {
                                int c[3] = {i, j, k}, rest[2], r = 0;
                                for (int q = 0; q < 3; q++)
                                    if (a >= 0 && q != a)
                                        rest[r++] = c[q];
                                size_t target =
                                    a < 0 ? 0 : (size_t)(rest[0] * shape[a == 2 ? 1 : 2] + rest[1]);
                                if (target != o)
                                    continue;
                                double v = get(t, in.mem, (size_t)((i * 3 + j) * 4 + k));
                                acc = kind == SPMD_REDUCE_MAX ? fmax_ref(acc, v) : acc + v;
                                count++;
                            }
                    if (kind == SPMD_REDUCE_MEAN)
                        acc /= count;
                    unsigned char w[8];
                    put(ot, w, 0, acc);
                    double want = get(ot, w, 0), got = get(ot, out.mem, o);
                    if (!close_to(got, want, ulp_rel(ot), 1e-12))
                        SOFT_FAIL("%s %s over axis %d: element %zu is %.9g, expected %.9g", dn(t),
                                  reduce_name(kind), axis, o, got, want);
                }
                hb_free(&out);
            }
        }
        hb_free(&in);
    }
    /* a max over values that include NaN is NaN, as jnp.max gives */
    for (int d = 0; d < 4; d++) {
        spmd_dtype t = float_dtypes[d];
        hblock in = hb(t, 1, 3), out = hb(t, 0);
        put(t, in.mem, 0, 1.0);
        put(t, in.mem, 1, NAN);
        put(t, in.mem, 2, 2.0);
        assert_ok(spmd_op_reduce(NULL, SPMD_REDUCE_MAX, &in.b, 0, &out.b));
        if (!isnan(get(t, out.mem, 0)))
            SOFT_FAIL("%s max of [1, NaN, 2] is %g, expected NaN", dn(t), get(t, out.mem, 0));
        assert_ok(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &in.b, 0, &out.b));
        assert_true(isnan(get(t, out.mem, 0)));
        hb_free(&in);
        hb_free(&out);
    }
    /* a mean of int32 into float32 */
    {
        hblock in = hb(SPMD_DTYPE_I32, 1, 4), out = hb(SPMD_DTYPE_F32, 0);
        const int32_t v[4] = {1, 2, 3, 5};
        memcpy(in.mem, v, sizeof v);
        assert_ok(spmd_op_reduce(NULL, SPMD_REDUCE_MEAN, &in.b, 0, &out.b));
        assert_true(((float *)out.mem)[0] == 2.75f);
        hb_free(&in);
        hb_free(&out);
    }
    /* int64 sums are exact beyond 2^53 */
    {
        hblock in = hb(SPMD_DTYPE_I64, 1, 3), out = hb(SPMD_DTYPE_I64, 0);
        const int64_t v[3] = {INT64_C(1) << 53, 1, 1};
        memcpy(in.mem, v, sizeof v);
        assert_ok(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &in.b, SPMD_ALL_AXES, &out.b));
        if (((int64_t *)out.mem)[0] != (INT64_C(1) << 53) + 2)
            SOFT_FAIL("int64 sum of [2^53, 1, 1] is %lld, expected %lld",
                      (long long)((int64_t *)out.mem)[0], (long long)((INT64_C(1) << 53) + 2));
        const int64_t w[3] = {(INT64_C(1) << 60) + 1, 5, -3};
        memcpy(in.mem, w, sizeof w);
        assert_ok(spmd_op_reduce(NULL, SPMD_REDUCE_MAX, &in.b, 0, &out.b));
        if (((int64_t *)out.mem)[0] != w[0])
            SOFT_FAIL("int64 max of [2^60 + 1, 5, -3] is %lld, expected %lld",
                      (long long)((int64_t *)out.mem)[0], (long long)w[0]);
        hb_free(&in);
        hb_free(&out);
    }
    /* a (1,)-shaped result of a 1-D reduction over all axes */
    {
        hblock in = hb(SPMD_DTYPE_F32, 2, 2, 2), out = hb(SPMD_DTYPE_F32, 1, 1);
        const float v[4] = {1, 2, 3, 4.5f};
        memcpy(in.mem, v, sizeof v);
        assert_ok(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &in.b, SPMD_ALL_AXES, &out.b));
        assert_true(((float *)out.mem)[0] == 10.5f);
        hb_free(&in);
        hb_free(&out);
    }
    /* errors */
    {
        hblock in = hb(SPMD_DTYPE_F32, 3, 2, 3, 4);
        hblock rank3 = hb(SPMD_DTYPE_F32, 3, 3, 4, 1), wrong = hb(SPMD_DTYPE_F32, 2, 3, 3);
        hblock swapped = hb(SPMD_DTYPE_F32, 2, 4, 3), two = hb(SPMD_DTYPE_F32, 1, 2);
        hblock good = hb(SPMD_DTYPE_F32, 2, 3, 4), iout = hb(SPMD_DTYPE_I32, 2, 3, 4);
        hblock iin = hb(SPMD_DTYPE_I32, 3, 2, 3, 4);
        assert_status(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &in.b, 0, &rank3.b), SPMD_ERR_SHAPE,
                      "rank");
        assert_status(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &in.b, 0, &wrong.b), SPMD_ERR_SHAPE,
                      "dimension");
        assert_status(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &in.b, 0, &swapped.b), SPMD_ERR_SHAPE,
                      "dimension");
        assert_status(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &in.b, SPMD_ALL_AXES, &two.b),
                      SPMD_ERR_SHAPE, "one element");
        assert_status(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &in.b, SPMD_ALL_AXES, &good.b),
                      SPMD_ERR_SHAPE, "one element");
        assert_int_not_equal(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &in.b, 3, &good.b), SPMD_OK);
        assert_int_not_equal(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &in.b, -4, &good.b), SPMD_OK);
        assert_status(spmd_op_reduce(NULL, SPMD_REDUCE_MEAN, &iin.b, 0, &iout.b),
                      SPMD_ERR_INVALID_ARGUMENT, "float");
        assert_status(spmd_op_reduce(NULL, (spmd_reduce_kind)7, &in.b, 0, &good.b),
                      SPMD_ERR_INVALID_ARGUMENT, "kind");
        assert_status(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, NULL, 0, &good.b),
                      SPMD_ERR_INVALID_ARGUMENT, "in");
        assert_status(spmd_op_reduce(NULL, SPMD_REDUCE_SUM, &in.b, 0, NULL),
                      SPMD_ERR_INVALID_ARGUMENT, "out");
        hb_free(&in);
        hb_free(&rank3);
        hb_free(&wrong);
        hb_free(&swapped);
        hb_free(&two);
        hb_free(&good);
        hb_free(&iout);
        hb_free(&iin);
    }
    soft_end();
}

/* ---- gemm ------------------------------------------------------------------------------ */

/* C = alpha op(A) op(B) + beta C, naive, in double, from the stored (rounded) values. */
static void ref_gemm(spmd_dtype t, int ta, int tb, int m, int n, int k, double alpha, const void *a,
                     const void *b, double beta, const void *c, double *out)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                double av = get(t, a, (size_t)(ta ? p * m + i : i * k + p));
                double bv = get(t, b, (size_t)(tb ? j * k + p : p * n + j));
                s += av * bv;
            }
            double cv = beta == 0 ? 0 : beta * get(t, c, (size_t)(i * n + j));
            out[i * n + j] = alpha * s + cv;
        }
}

static void run_gemm(spmd_dtype t, int ta, int tb, int m, int n, int k, double alpha, double beta,
                     int nan_c)
{
    hblock a = ta ? hb(t, 2, k, m) : hb(t, 2, m, k);
    hblock b = tb ? hb(t, 2, n, k) : hb(t, 2, k, n);
    hblock c = hb(t, 2, m, n);
    for (size_t i = 0; i < (size_t)(m * k); i++)
        put(t, a.mem, i, (double)((int)(i * 37 % 17) - 8) * 0.25);
    for (size_t i = 0; i < (size_t)(k * n); i++)
        put(t, b.mem, i, (double)((int)(i * 11 % 13) - 6) * 0.5);
    for (size_t i = 0; i < (size_t)(m * n); i++)
        put(t, c.mem, i, nan_c ? NAN : (double)((int)(i % 7) - 3));
    double *want = malloc((size_t)(m * n) * sizeof *want);
    assert_non_null(want);
    ref_gemm(t, ta, tb, m, n, k, alpha, a.mem, b.mem, beta, c.mem, want);
    assert_ok(spmd_op_gemm(NULL, ta, tb, alpha, &a.b, &b.b, beta, &c.b));
    /* tolerance relative to the magnitude of the terms */
    double scale = 0;
    for (size_t i = 0; i < (size_t)(m * n); i++)
        scale = fmax_ref(scale, fabs(want[i]));
    double tol = t == SPMD_DTYPE_F64   ? 1e-12
                 : t == SPMD_DTYPE_F32 ? 1e-5
                 : t == SPMD_DTYPE_F16 ? 2e-3
                                       : 1.6e-2;
    for (size_t i = 0; i < (size_t)(m * n); i++) {
        double got = get(t, c.mem, i);
        if (!(fabs(got - want[i]) <= tol * (scale + 1)))
            SOFT_FAIL("%s gemm trans_a=%d trans_b=%d (%dx%dx%d) alpha=%g beta=%g%s: C[%zu] = %.9g, "
                      "expected %.9g",
                      dn(t), ta, tb, m, n, k, alpha, beta, nan_c ? " (C was NaN)" : "", i, got,
                      want[i]);
    }
    free(want);
    hb_free(&a);
    hb_free(&b);
    hb_free(&c);
}

static void test_gemm(void **state)
{
    (void)state;
    for (int d = 0; d < 4; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                run_gemm(float_dtypes[d], ta, tb, 3, 5, 4, 1.0, 0.0, 0);
                run_gemm(float_dtypes[d], ta, tb, 3, 5, 4, 1.5, 0.5, 0);
                run_gemm(float_dtypes[d], ta, tb, 4, 2, 7, -2.0, 1.0, 0);
                run_gemm(float_dtypes[d], ta, tb, 1, 1, 1, 0.5, -1.0, 0);
                /* beta = 0: C is not read (BLAS convention), even when it holds NaN */
                run_gemm(float_dtypes[d], ta, tb, 3, 5, 4, 1.0, 0.0, 1);
            }
    /* larger, past the blocking of optimized kernels */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            run_gemm(SPMD_DTYPE_F32, ta, tb, 67, 33, 45, 1.0, 0.25, 0);
            run_gemm(SPMD_DTYPE_F64, ta, tb, 67, 33, 45, 0.75, 1.0, 0);
            run_gemm(SPMD_DTYPE_F16, ta, tb, 17, 9, 13, 1.0, 0.0, 0);
            run_gemm(SPMD_DTYPE_BF16, ta, tb, 17, 9, 13, 1.0, 0.5, 0);
        }

    /* errors */
    hblock a = hb(SPMD_DTYPE_F32, 2, 3, 4), b = hb(SPMD_DTYPE_F32, 2, 4, 5);
    hblock c = hb(SPMD_DTYPE_F32, 2, 3, 5), cbad = hb(SPMD_DTYPE_F32, 2, 3, 4);
    hblock b_bad = hb(SPMD_DTYPE_F32, 2, 5, 5), v = hb(SPMD_DTYPE_F32, 1, 4);
    hblock ai = hb(SPMD_DTYPE_I32, 2, 3, 4), bi = hb(SPMD_DTYPE_I32, 2, 4, 5);
    hblock ci = hb(SPMD_DTYPE_I32, 2, 3, 5), al = hb(SPMD_DTYPE_I64, 2, 3, 4);
    hblock bl = hb(SPMD_DTYPE_I64, 2, 4, 5), cl = hb(SPMD_DTYPE_I64, 2, 3, 5);
    hblock b64 = hb(SPMD_DTYPE_F64, 2, 4, 5);
    assert_ok(spmd_op_gemm(NULL, 0, 0, 1.0, &a.b, &b.b, 0.0, &c.b));
    assert_status(spmd_op_gemm(NULL, 0, 0, 1.0, &a.b, &b_bad.b, 0.0, &c.b), SPMD_ERR_SHAPE,
                  "multiply");
    assert_status(spmd_op_gemm(NULL, 0, 0, 1.0, &a.b, &b.b, 0.0, &cbad.b), SPMD_ERR_SHAPE,
                  "multiply");
    assert_status(spmd_op_gemm(NULL, 1, 0, 1.0, &a.b, &b.b, 0.0, &c.b), SPMD_ERR_SHAPE, "multiply");
    assert_status(spmd_op_gemm(NULL, 0, 1, 1.0, &a.b, &b.b, 0.0, &c.b), SPMD_ERR_SHAPE, "multiply");
    assert_status(spmd_op_gemm(NULL, 0, 0, 1.0, &v.b, &b.b, 0.0, &c.b), SPMD_ERR_SHAPE, "2-D");
    assert_status(spmd_op_gemm(NULL, 0, 0, 1.0, &ai.b, &bi.b, 0.0, &ci.b), SPMD_ERR_UNSUPPORTED,
                  "int32");
    assert_status(spmd_op_gemm(NULL, 0, 0, 1.0, &al.b, &bl.b, 0.0, &cl.b), SPMD_ERR_UNSUPPORTED,
                  "int64");
    assert_int_not_equal(spmd_op_gemm(NULL, 0, 0, 1.0, &a.b, &b64.b, 0.0, &c.b), SPMD_OK);
    assert_status(spmd_op_gemm(NULL, 0, 0, 1.0, NULL, &b.b, 0.0, &c.b), SPMD_ERR_INVALID_ARGUMENT,
                  "A");
    assert_status(spmd_op_gemm(NULL, 0, 0, 1.0, &a.b, NULL, 0.0, &c.b), SPMD_ERR_INVALID_ARGUMENT,
                  "B");
    assert_status(spmd_op_gemm(NULL, 0, 0, 1.0, &a.b, &b.b, 0.0, NULL), SPMD_ERR_INVALID_ARGUMENT,
                  "C");
    hblock *all[] = {&a, &b, &c, &cbad, &b_bad, &v, &ai, &bi, &ci, &al, &bl, &cl, &b64};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        hb_free(all[i]);
    soft_end();
}

/* ---- the same operations inside shard_map, with a real ctx ------------------------------ */

typedef struct body_result {
    int ran;
} body_result;

/* in[0]: x (2, 3) float32. Outputs:
 * 0: gemm x x^T (2, 2) f32;  1: sum over axis 1 of exp(x) (2,) f64;
 * 2: relu(x - 1) * 2 (2, 3) f32;  3: iota(2, 3) as int32 + (int32)x;  4: max(x) scalar bf16 */
static spmd_status body_ops(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    body_result *r = user;
    r->ran++;
    if (nin != 1 || nout != 5)
        return SPMD_ERR_INVALID_ARGUMENT;
    spmd_block e, t, xi, half;
    spmd_status st = spmd_op_gemm(ctx, 0, 1, 1.0, &in[0], &in[0], 0.0, &out[0]);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, in[0].shape, SPMD_DTYPE_F64, &e);
    if (st == SPMD_OK)
        st = spmd_op_copy(ctx, &in[0], &e);
    if (st == SPMD_OK)
        st = spmd_op_unary(ctx, SPMD_UNARY_EXP, &e, &e);
    if (st == SPMD_OK)
        st = spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &e, 1, &out[1]);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, in[0].shape, SPMD_DTYPE_F32, &t);
    if (st == SPMD_OK)
        st = spmd_op_fill(ctx, &t, 1.0);
    if (st == SPMD_OK)
        st = spmd_op_binary(ctx, SPMD_BINARY_SUB, &in[0], &t, &out[2]);
    if (st == SPMD_OK)
        st = spmd_op_unary(ctx, SPMD_UNARY_RELU, &out[2], &out[2]);
    if (st == SPMD_OK)
        st = spmd_op_binary_scalar(ctx, SPMD_BINARY_MUL, &out[2], 2.0, &out[2]);
    if (st == SPMD_OK)
        st = spmd_op_iota(ctx, &out[3], 0, 1);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, in[0].shape, SPMD_DTYPE_I32, &xi);
    if (st == SPMD_OK)
        st = spmd_op_copy(ctx, &in[0], &xi);
    if (st == SPMD_OK)
        st = spmd_op_binary(ctx, SPMD_BINARY_ADD, &out[3], &xi, &out[3]);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, in[0].shape, SPMD_DTYPE_BF16, &half);
    if (st == SPMD_OK)
        st = spmd_op_copy(ctx, &in[0], &half);
    if (st == SPMD_OK)
        st = spmd_op_reduce(ctx, SPMD_REDUCE_MAX, &half, SPMD_ALL_AXES, &out[4]);
    return st;
}

static void test_ops_in_shard_map(void **state)
{
    (void)state;
    int n = 1;
    const char *name = "x";
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, &n, &name, (int[]){spmd_local_device_id(0)}, 1, &mesh));
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create_parse(mesh, "", &sh));
    const float x[6] = {0.5f, -1.0f, 2.0f, 3.25f, 1.5f, -0.25f};
    spmd_array *in = NULL;
    assert_ok(spmd_device_put(x, 2, (int64_t[]){2, 3}, SPMD_DTYPE_F32, sh, &in));
    spmd_spec *p = NULL;
    assert_ok(spmd_spec_parse("", &p));
    const spmd_spec *specs[5] = {p, p, p, p, p};
    const spmd_out_desc d[5] = {{2, {2, 2}, SPMD_DTYPE_F32},
                                {1, {2}, SPMD_DTYPE_F64},
                                {2, {2, 3}, SPMD_DTYPE_F32},
                                {2, {2, 3}, SPMD_DTYPE_I32},
                                {0, {0}, SPMD_DTYPE_BF16}};
    spmd_array *out[5] = {NULL};
    body_result r = {0};
    assert_ok(spmd_shard_map(mesh, body_ops, &r, 1, &in, specs, 5, d, specs, NULL, out));
    assert_int_equal(r.ran, 1);

    float g[4];
    assert_ok(spmd_array_to_host(out[0], g, sizeof g));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double s = 0;
            for (int k = 0; k < 3; k++)
                s += (double)x[i * 3 + k] * x[j * 3 + k];
            assert_true(fabs(g[i * 2 + j] - s) <= 1e-5 * (fabs(s) + 1));
        }
    double sums[2];
    assert_ok(spmd_array_to_host(out[1], sums, sizeof sums));
    for (int i = 0; i < 2; i++) {
        double s = 0;
        for (int k = 0; k < 3; k++)
            s += exp_ref((double)x[i * 3 + k]);
        assert_true(fabs(sums[i] - s) <= 1e-12 * s);
    }
    float rl[6];
    assert_ok(spmd_array_to_host(out[2], rl, sizeof rl));
    for (int i = 0; i < 6; i++)
        assert_true(rl[i] == (x[i] - 1 > 0 ? (x[i] - 1) * 2 : 0));
    int32_t io[6];
    assert_ok(spmd_array_to_host(out[3], io, sizeof io));
    for (int i = 0; i < 6; i++)
        assert_int_equal(io[i], i + (int32_t)x[i]);
    uint16_t mx;
    assert_ok(spmd_array_to_host(out[4], &mx, sizeof mx));
    assert_int_equal(mx, ref_bf16(3.25));
    for (int j = 0; j < 5; j++)
        spmd_array_destroy(out[j]);
    spmd_spec_destroy(p);
    spmd_array_destroy(in);
    spmd_sharding_destroy(sh);
    spmd_mesh_destroy(mesh);
    soft_end();
}

int main(void)
{
    spmd_test_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_iota),     cmocka_unit_test(test_copy),
        cmocka_unit_test(test_unary),         cmocka_unit_test(test_binary),
        cmocka_unit_test(test_binary_scalar), cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_gemm),          cmocka_unit_test(test_ops_in_shard_map),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failures);
}
