/* Reduction kernels: plain loops over contiguous ranges that the compiler vectorizes; inputs
 * are visited in cache-sized blocks so that each block of dst stays hot across the n inputs. */
#include "shard_map/reduce.h"

#include <string.h>

int spmd__reducible(spmd_dtype dtype)
{
    return dtype == SPMD_DTYPE_F32 || dtype == SPMD_DTYPE_F64 || dtype == SPMD_DTYPE_I32 ||
           dtype == SPMD_DTYPE_I64 || spmd__is_half(dtype);
}

int spmd__is_half(spmd_dtype dtype) { return dtype == SPMD_DTYPE_F16 || dtype == SPMD_DTYPE_BF16; }

spmd_dtype spmd__accumulator_dtype(spmd_dtype dtype)
{
    return spmd__is_half(dtype) ? SPMD_DTYPE_F32 : dtype;
}

#define BLOCK 2048 /* elements per pass over the inputs */

#define DEFINE_REDUCE(name, T)                                                                     \
    static void name(spmd__reduce_op op, T *restrict acc, const T *restrict src, size_t n)        \
    {                                                                                              \
        switch (op) {                                                                              \
        case SPMD__OP_SUM:                                                                         \
            for (size_t i = 0; i < n; i++)                                                         \
                acc[i] += src[i];                                                                  \
            break;                                                                                 \
        case SPMD__OP_MAX:                                                                         \
            for (size_t i = 0; i < n; i++)                                                         \
                acc[i] = src[i] > acc[i] ? src[i] : acc[i];                                        \
            break;                                                                                 \
        case SPMD__OP_MIN:                                                                         \
            for (size_t i = 0; i < n; i++)                                                         \
                acc[i] = src[i] < acc[i] ? src[i] : acc[i];                                        \
            break;                                                                                 \
        }                                                                                          \
    }

DEFINE_REDUCE(reduce_f32, float)
DEFINE_REDUCE(reduce_f64, double)
DEFINE_REDUCE(reduce_i32, int32_t)
DEFINE_REDUCE(reduce_i64, int64_t)

/* Integers wrap on overflow, as in JAX: sum in unsigned arithmetic. */
static void reduce_ints(spmd_dtype dtype, spmd__reduce_op op, void *acc, const void *src, size_t n)
{
    if (op != SPMD__OP_SUM) {
        if (dtype == SPMD_DTYPE_I32)
            reduce_i32(op, acc, src, n);
        else
            reduce_i64(op, acc, src, n);
        return;
    }
    if (dtype == SPMD_DTYPE_I32) {
        uint32_t *a = acc;
        const uint32_t *s = src;
        for (size_t i = 0; i < n; i++)
            a[i] += s[i];
    } else {
        uint64_t *a = acc;
        const uint64_t *s = src;
        for (size_t i = 0; i < n; i++)
            a[i] += s[i];
    }
}

void spmd__reduce_into(spmd_dtype acc_dtype, spmd__reduce_op op, void *dst, const void *src,
                       size_t count)
{
    switch (acc_dtype) {
    case SPMD_DTYPE_F32:
        reduce_f32(op, dst, src, count);
        break;
    case SPMD_DTYPE_F64:
        reduce_f64(op, dst, src, count);
        break;
    case SPMD_DTYPE_I32:
    case SPMD_DTYPE_I64:
        reduce_ints(acc_dtype, op, dst, src, count);
        break;
    default:
        break;
    }
}

static void half_to_f32(spmd_dtype dtype, float *dst, const uint16_t *src, size_t n)
{
    if (dtype == SPMD_DTYPE_F16)
        for (size_t i = 0; i < n; i++)
            dst[i] = spmd_f16_to_f32(src[i]);
    else
        for (size_t i = 0; i < n; i++)
            dst[i] = spmd_bf16_to_f32(src[i]);
}

void spmd__reduce_many(spmd_dtype dtype, spmd__reduce_op op, void *dst, const void *const *srcs,
                       int n, size_t begin, size_t end)
{
    size_t elem = spmd_dtype_size(dtype);
    spmd_dtype acc_dtype = spmd__accumulator_dtype(dtype);
    size_t acc_elem = spmd_dtype_size(acc_dtype);
    float converted[BLOCK];
    for (size_t b = begin; b < end; b += BLOCK) {
        size_t len = end - b < BLOCK ? end - b : BLOCK;
        char *d = (char *)dst + b * acc_elem;
        if (spmd__is_half(dtype)) {
            half_to_f32(dtype, (float *)d, (const uint16_t *)srcs[0] + b, len);
            for (int k = 1; k < n; k++) {
                half_to_f32(dtype, converted, (const uint16_t *)srcs[k] + b, len);
                reduce_f32(op, (float *)d, converted, len);
            }
            continue;
        }
        const char *first = (const char *)srcs[0] + b * elem;
        if (d != first)
            memcpy(d, first, len * elem);
        for (int k = 1; k < n; k++)
            spmd__reduce_into(acc_dtype, op, d, (const char *)srcs[k] + b * elem, len);
    }
}

void spmd__from_accumulator(spmd_dtype dtype, void *dst, const void *acc, size_t begin, size_t end)
{
    const float *a = acc;
    uint16_t *d = dst;
    if (dtype == SPMD_DTYPE_F16) {
        for (size_t i = begin; i < end; i++)
            d[i] = spmd_f32_to_f16(a[i]);
    } else if (dtype == SPMD_DTYPE_BF16) {
        for (size_t i = begin; i < end; i++)
            d[i] = spmd_f32_to_bf16(a[i]);
    } else {
        size_t elem = spmd_dtype_size(dtype);
        if (dst != acc)
            memcpy((char *)dst + begin * elem, (const char *)acc + begin * elem, (end - begin) * elem);
    }
}

double spmd__load(spmd_dtype t, const void *p, size_t i)
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
        return spmd_f16_to_f32(((const uint16_t *)p)[i]);
    case SPMD_DTYPE_BF16:
        return spmd_bf16_to_f32(((const uint16_t *)p)[i]);
    default:
        return 0;
    }
}

void spmd__store(spmd_dtype t, void *p, size_t i, double v)
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
    case SPMD_DTYPE_U8:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    case SPMD_DTYPE_BOOL:
        ((uint8_t *)p)[i] = v != 0;
        break;
    case SPMD_DTYPE_F16:
        ((uint16_t *)p)[i] = spmd_f32_to_f16((float)v);
        break;
    case SPMD_DTYPE_BF16:
        ((uint16_t *)p)[i] = spmd_f32_to_bf16((float)v);
        break;
    default:
        break;
    }
}

void spmd__convert(spmd_dtype to, void *dst, spmd_dtype from, const void *src, size_t count)
{
    if (to == from) {
        if (dst != src)
            memmove(dst, src, count * spmd_dtype_size(to));
        return;
    }
    /* int64 <-> int64-sized values lose nothing through double below 2^53; exact paths for
     * the common integer widenings. */
    if (from == SPMD_DTYPE_I32 && to == SPMD_DTYPE_I64) {
        for (size_t i = 0; i < count; i++)
            ((int64_t *)dst)[i] = ((const int32_t *)src)[i];
        return;
    }
    for (size_t i = 0; i < count; i++)
        spmd__store(to, dst, i, spmd__load(from, src, i));
}

void spmd__scale(spmd_dtype dtype, void *data, double s, size_t count)
{
    if (dtype == SPMD_DTYPE_F32) {
        float *p = data;
        float f = (float)s;
        for (size_t i = 0; i < count; i++)
            p[i] *= f;
    } else if (dtype == SPMD_DTYPE_F64) {
        double *p = data;
        for (size_t i = 0; i < count; i++)
            p[i] *= s;
    } else {
        for (size_t i = 0; i < count; i++)
            spmd__store(dtype, data, i, spmd__load(dtype, data, i) * s);
    }
}
