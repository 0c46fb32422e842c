/* Private: element access and the scalar arithmetic of the block operations, one definition
 * for the host loops (reduce.c, ops.c) and the CUDA kernels
 * (runtime/devices/backend/cuda_kernels.cu), so that both platforms compute the same numbers:
 * conversions and saturation, NaN propagation, integer wrap-around, truncating division. */
#ifndef SPMD_SCALAR_OPS_H
#define SPMD_SCALAR_OPS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <spmd/dtype.h>
#include <spmd/ops.h>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define SPMD__HD __host__ __device__
#else
#define SPMD__HD
#endif

/* ---- 16-bit floats: the library's conversions on the host, CUDA's on the GPU; both round
 * to nearest even ---- */

static inline SPMD__HD float spmd__half_to_f32(spmd_dtype t, uint16_t h)
{
#ifdef __CUDA_ARCH__
    return t == SPMD_DTYPE_F16 ? __half2float(__ushort_as_half(h))
                               : __bfloat162float(__ushort_as_bfloat16(h));
#else
    return t == SPMD_DTYPE_F16 ? spmd_f16_to_f32(h) : spmd_bf16_to_f32(h);
#endif
}

static inline SPMD__HD uint16_t spmd__f32_to_half(spmd_dtype t, float f)
{
#ifdef __CUDA_ARCH__
    return t == SPMD_DTYPE_F16 ? __half_as_ushort(__float2half_rn(f))
                               : __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
    return t == SPMD_DTYPE_F16 ? spmd_f32_to_f16(f) : spmd_f32_to_bf16(f);
#endif
}

/* double -> float rounding to odd: the float keeps a sticky last bit when inexact, so that a
 * second rounding to 16 bits (11 or 8 significant bits, far fewer than 24) rounds the same
 * as one rounding straight from the double would. */
static inline SPMD__HD float spmd__round_to_odd(double v)
{
    float f = (float)v;
    if ((double)f == v || v != v || isinf(f))
        return f;
    if (fabs((double)f) > fabs(v))
        f = nextafterf(f, 0.0f); /* toward zero: truncated */
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bits |= 1u;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* ---- elements as double (spmd__load / spmd__store in reduce.h) ---- */

static inline SPMD__HD double spmd__load_element(spmd_dtype t, const void *p, size_t i)
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
    case SPMD_DTYPE_U8:
        return ((const uint8_t *)p)[i];
    case SPMD_DTYPE_BOOL:
        return ((const uint8_t *)p)[i] != 0;
    case SPMD_DTYPE_F16:
    case SPMD_DTYPE_BF16:
        return spmd__half_to_f32(t, ((const uint16_t *)p)[i]);
    default:
        return 0;
    }
}

static inline SPMD__HD void spmd__store_element(spmd_dtype t, void *p, size_t i, double v)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        ((float *)p)[i] = (float)v;
        break;
    case SPMD_DTYPE_F64:
        ((double *)p)[i] = v;
        break;
    /* out-of-range floats saturate (a plain C cast would be undefined); NaN becomes 0 */
    case SPMD_DTYPE_I32:
        ((int32_t *)p)[i] = v != v           ? 0
                            : v <= INT32_MIN ? INT32_MIN
                            : v >= INT32_MAX ? INT32_MAX
                                             : (int32_t)v;
        break;
    case SPMD_DTYPE_I64:
        ((int64_t *)p)[i] = v != v         ? 0
                            : v <= -0x1p63 ? INT64_MIN
                            : v >= 0x1p63  ? INT64_MAX
                                           : (int64_t)v;
        break;
    case SPMD_DTYPE_U8:
        ((uint8_t *)p)[i] = v != v || v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
        break;
    case SPMD_DTYPE_BOOL:
        ((uint8_t *)p)[i] = v != 0;
        break;
    case SPMD_DTYPE_F16:
    case SPMD_DTYPE_BF16:
        ((uint16_t *)p)[i] = spmd__f32_to_half(t, spmd__round_to_odd(v));
        break;
    default:
        break;
    }
}

/* ---- integer elements, exactly (spmd__load_int / spmd__store_int in reduce.h) ---- */

static inline SPMD__HD int spmd__is_int_like(spmd_dtype t)
{
    return t == SPMD_DTYPE_I32 || t == SPMD_DTYPE_I64 || t == SPMD_DTYPE_U8 || t == SPMD_DTYPE_BOOL;
}

static inline SPMD__HD int64_t spmd__load_int_element(spmd_dtype t, const void *p, size_t i)
{
    switch (t) {
    case SPMD_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case SPMD_DTYPE_I64:
        return ((const int64_t *)p)[i];
    case SPMD_DTYPE_BOOL:
        return ((const uint8_t *)p)[i] != 0;
    default:
        return ((const uint8_t *)p)[i];
    }
}

/* Stores v, wrapping for int32 and uint8 (bool: v != 0). */
static inline SPMD__HD void spmd__store_int_element(spmd_dtype t, void *p, size_t i, int64_t v)
{
    switch (t) {
    case SPMD_DTYPE_I32:
        ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v; /* wraps */
        break;
    case SPMD_DTYPE_I64:
        ((int64_t *)p)[i] = v;
        break;
    case SPMD_DTYPE_BOOL:
        ((uint8_t *)p)[i] = v != 0;
        break;
    default:
        ((uint8_t *)p)[i] = (uint8_t)(uint64_t)v;
        break;
    }
}

/* ---- arithmetic ---- */

/* One body for float and double: F is the type, then its exp, log, sin, cos and tanh. */
#define SPMD__DEFINE_UNARY(name, F, exp_, log_, sin_, cos_, tanh_)                                 \
    static inline SPMD__HD F name(spmd_unary_op op, F x)                                           \
    {                                                                                              \
        switch (op) {                                                                              \
        case SPMD_UNARY_NEG:                                                                       \
            return -x;                                                                             \
        case SPMD_UNARY_EXP:                                                                       \
            return exp_(x);                                                                        \
        case SPMD_UNARY_LOG:                                                                       \
            return log_(x);                                                                        \
        case SPMD_UNARY_SIN:                                                                       \
            return sin_(x);                                                                        \
        case SPMD_UNARY_COS:                                                                       \
            return cos_(x);                                                                        \
        case SPMD_UNARY_TANH:                                                                      \
            return tanh_(x);                                                                       \
        case SPMD_UNARY_RELU: /* NaN stays NaN, as max(x, 0) in JAX */                             \
            return x > 0 || x != x ? x : (F)0;                                                     \
        }                                                                                          \
        return x;                                                                                  \
    }

SPMD__DEFINE_UNARY(spmd__unary_f64, double, exp, log, sin, cos, tanh)
SPMD__DEFINE_UNARY(spmd__unary_f32, float, expf, logf, sinf, cosf, tanhf)

#define SPMD__DEFINE_BINARY(name, F)                                                               \
    static inline SPMD__HD F name(spmd_binary_op op, F a, F b)                                     \
    {                                                                                              \
        switch (op) {                                                                              \
        case SPMD_BINARY_ADD:                                                                      \
            return a + b;                                                                          \
        case SPMD_BINARY_SUB:                                                                      \
            return a - b;                                                                          \
        case SPMD_BINARY_MUL:                                                                      \
            return a * b;                                                                          \
        case SPMD_BINARY_DIV:                                                                      \
            return a / b;                                                                          \
        case SPMD_BINARY_MAX: /* NaN propagates, as in lax.max */                                  \
            return a != a || b != b ? (F)NAN : a > b ? a : b;                                      \
        case SPMD_BINARY_MIN:                                                                      \
            return a != a || b != b ? (F)NAN : a < b ? a : b;                                      \
        case SPMD_BINARY_AND: /* refused for floats before any kernel runs */                      \
        case SPMD_BINARY_OR:                                                                       \
        case SPMD_BINARY_XOR:                                                                      \
            break;                                                                                 \
        }                                                                                          \
        return a;                                                                                  \
    }

SPMD__DEFINE_BINARY(spmd__binary_f64, double)
SPMD__DEFINE_BINARY(spmd__binary_f32, float)

/* Integer arithmetic in int64 with wrap-around; int32 results wrap when stored. */
static inline SPMD__HD int64_t spmd__binary_i64(spmd_binary_op op, int64_t a, int64_t b)
{
    switch (op) {
    case SPMD_BINARY_ADD:
        return (int64_t)((uint64_t)a + (uint64_t)b);
    case SPMD_BINARY_SUB:
        return (int64_t)((uint64_t)a - (uint64_t)b);
    case SPMD_BINARY_MUL:
        return (int64_t)((uint64_t)a * (uint64_t)b);
    case SPMD_BINARY_DIV: /* truncates; INT64_MIN / -1 wraps instead of trapping */
        return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
    case SPMD_BINARY_MAX:
        return a > b ? a : b;
    case SPMD_BINARY_MIN:
        return a < b ? a : b;
    case SPMD_BINARY_AND: /* on sign-extended values: the stored low bits are right */
        return a & b;
    case SPMD_BINARY_OR:
        return a | b;
    case SPMD_BINARY_XOR:
        return a ^ b;
    }
    return a;
}

/* Integers take only negation (wrapping: -INT_MIN == INT_MIN, as in JAX) and relu. */
static inline SPMD__HD int64_t spmd__unary_i64(spmd_unary_op op, int64_t v)
{
    return op == SPMD_UNARY_NEG ? (int64_t)(0 - (uint64_t)v) : (v > 0 ? v : 0);
}

/* A quiet NaN of dtype t with the same bits on the host and on a GPU (conversions and invalid
 * operations give NaNs of different signs and payloads there). */
static inline SPMD__HD void spmd__store_quiet_nan(spmd_dtype t, void *p, size_t i)
{
    uint32_t f32 = 0x7fc00000u;
    uint64_t f64 = 0x7ff8000000000000u;
    uint16_t f16 = t == SPMD_DTYPE_BF16 ? 0x7fc0u : 0x7e00u;
    if (t == SPMD_DTYPE_F32)
        memcpy((char *)p + 4 * i, &f32, 4);
    else if (t == SPMD_DTYPE_F64)
        memcpy((char *)p + 8 * i, &f64, 8);
    else
        memcpy((char *)p + 2 * i, &f16, 2);
}

/* jax.nn.softmax along one line of a block (extent elements, inner apart, from `first`), in
 * double: exp(x - max) / sum(exp(x - max)), rounded once to the dtype. A NaN in the line makes
 * every element a quiet NaN, and so does an infinite max (inf - inf), as in JAX. In place
 * allowed: each element is read before it is written. */
static inline SPMD__HD void spmd__softmax_line(spmd_dtype t, const void *in, void *out,
                                               size_t first, size_t extent, size_t inner)
{
    double top = -INFINITY;
    int has_nan = 0;
    for (size_t e = 0; e < extent; e++) {
        double v = spmd__load_element(t, in, first + e * inner);
        has_nan |= v != v;
        top = v > top ? v : top;
    }
    if (has_nan || top == INFINITY || top == -INFINITY) {
        for (size_t e = 0; e < extent; e++)
            spmd__store_quiet_nan(t, out, first + e * inner);
        return;
    }
    double sum = 0;
    for (size_t e = 0; e < extent; e++)
        sum += exp(spmd__load_element(t, in, first + e * inner) - top);
    for (size_t e = 0; e < extent; e++) {
        size_t at = first + e * inner;
        spmd__store_element(t, out, at, exp(spmd__load_element(t, in, at) - top) / sum);
    }
}

/* spmd_op_take: the position along an axis of extent n that index k names, or -1 for the fill
 * value (jnp.take's modes; SPMD_TAKE_CLIP and _WRAP need n > 0). */
static inline SPMD__HD int64_t spmd__take_source(spmd_take_mode mode, int64_t k, int64_t n)
{
    if (mode == SPMD_TAKE_CLIP)
        return k < 0 ? 0 : k >= n ? n - 1 : k;
    if (mode == SPMD_TAKE_WRAP) {
        int64_t r = k % n;
        return r < 0 ? r + n : r;
    }
    if (k < 0)
        k += n;
    return k >= 0 && k < n ? k : -1;
}

#endif /* SPMD_SCALAR_OPS_H */
