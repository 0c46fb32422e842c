/* Private: element access and the scalar arithmetic of the block operations, one definition
 * for the host loops (reduce.c, ops.c) and the CUDA kernels (runtime/backend/cuda_kernels.cu),
 * so that both platforms compute the same numbers: conversions and saturation, NaN
 * propagation, integer wrap-around, truncating division. */
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
    }
    return a;
}

/* Integers take only negation (wrapping: -INT_MIN == INT_MIN, as in JAX) and relu. */
static inline SPMD__HD int64_t spmd__unary_i64(spmd_unary_op op, int64_t v)
{
    return op == SPMD_UNARY_NEG ? (int64_t)(0 - (uint64_t)v) : (v > 0 ? v : 0);
}

#endif /* SPMD_SCALAR_OPS_H */
