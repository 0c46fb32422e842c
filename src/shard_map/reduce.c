/* Reduction kernels: plain loops over contiguous ranges that the compiler vectorizes; inputs
 * are visited in cache-sized blocks so that each block of dst stays hot across the n inputs. */
#include "shard_map/reduce.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/devices/backend/scalar_ops.h"
#include "runtime/base/tree.h"
#include "array/copy.h"
#include "runtime/base/stream_copy.h"

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

/* dst = mine op theirs, elementwise; dst may be mine (op=), never theirs. The same expression
 * either way, so a sum loaded first and added after gives the bits of one pass. */
#define DEFINE_REDUCE(name, T)                                                                     \
    static void name(spmd__reduce_op op, T *dst, const T *mine, const T *restrict theirs,          \
                     size_t n)                                                                     \
    {                                                                                              \
        switch (op) {                                                                              \
        case SPMD__OP_SUM:                                                                         \
            for (size_t i = 0; i < n; i++)                                                         \
                dst[i] = mine[i] + theirs[i];                                                      \
            break;                                                                                 \
        case SPMD__OP_MAX:                   /* a NaN anywhere wins, as in XLA */                  \
            for (size_t i = 0; i < n; i++) { /* | rather than ||: one select, vectorized */        \
                T s = theirs[i], a = mine[i];                                                      \
                dst[i] = ((s > a) | (s != s)) ? s : a;                                             \
            }                                                                                      \
            break;                                                                                 \
        case SPMD__OP_MIN:                                                                         \
            for (size_t i = 0; i < n; i++) {                                                       \
                T s = theirs[i], a = mine[i];                                                      \
                dst[i] = ((s < a) | (s != s)) ? s : a;                                             \
            }                                                                                      \
            break;                                                                                 \
        }                                                                                          \
    }

DEFINE_REDUCE(reduce_f32, float)
DEFINE_REDUCE(reduce_f64, double)
DEFINE_REDUCE(reduce_i32, int32_t)
DEFINE_REDUCE(reduce_i64, int64_t)

/* Integers wrap on overflow, as in JAX: sum in unsigned arithmetic. */
static void reduce_ints(spmd_dtype dtype, spmd__reduce_op op, void *dst, const void *mine,
                        const void *theirs, size_t n)
{
    if (op != SPMD__OP_SUM) {
        if (dtype == SPMD_DTYPE_I32)
            reduce_i32(op, dst, mine, theirs, n);
        else
            reduce_i64(op, dst, mine, theirs, n);
        return;
    }
    if (dtype == SPMD_DTYPE_I32) {
        uint32_t *d = dst;
        const uint32_t *a = mine, *restrict s = theirs;
        for (size_t i = 0; i < n; i++)
            d[i] = a[i] + s[i];
    } else {
        uint64_t *d = dst;
        const uint64_t *a = mine, *restrict s = theirs;
        for (size_t i = 0; i < n; i++)
            d[i] = a[i] + s[i];
    }
}

void spmd__reduce_from(spmd_dtype acc_dtype, spmd__reduce_op op, void *dst, const void *mine,
                       const void *theirs, size_t count)
{
    switch (acc_dtype) {
    case SPMD_DTYPE_F32:
        reduce_f32(op, dst, mine, theirs, count);
        break;
    case SPMD_DTYPE_F64:
        reduce_f64(op, dst, mine, theirs, count);
        break;
    case SPMD_DTYPE_I32:
    case SPMD_DTYPE_I64:
        reduce_ints(acc_dtype, op, dst, mine, theirs, count);
        break;
    default:
        break;
    }
}

void spmd__reduce_into(spmd_dtype acc_dtype, spmd__reduce_op op, void *dst, const void *src,
                       size_t count)
{
    spmd__reduce_from(acc_dtype, op, dst, dst, src, count);
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

/* Elements per pass of the tree: one slot per level, all in the L1 cache (32 KiB). */
#define TREE_BLOCK 128
#define TREE_SLOTS 34 /* levels of any int-sized n, and two spares */

/* Input k's elements [b, b + len) into slot, as accumulator-dtype elements. */
static void load_leaf(spmd_dtype dtype, void *slot, const void *src, size_t b, size_t len)
{
    if (spmd__is_half(dtype))
        half_to_f32(dtype, slot, (const uint16_t *)src + b, len);
    else
        memcpy(slot, (const char *)src + b * spmd_dtype_size(dtype), len * spmd_dtype_size(dtype));
}

/*
 * The canonical order of runtime/base/tree.h over the n inputs, one block at a time: the leaves are
 * visited left to right and a node is added up as soon as both its children are known (a binary
 * counter of slots, one per level), so each block is read once and the slots stay in cache.
 */
void spmd__reduce_many(spmd_dtype dtype, spmd__reduce_op op, void *dst, const void *const *srcs,
                       int n, size_t begin, size_t end)
{
    spmd_dtype acc_dtype = spmd__accumulator_dtype(dtype);
    size_t acc_elem = spmd_dtype_size(acc_dtype), elem = spmd_dtype_size(dtype);
    int half = spmd__is_half(dtype);
    if (n == 1 && !half) { /* a copy, in one pass (a block at a time, psum of 1-16 MiB at 2 x 1
                              took 1-7 % longer); the input may overlap dst */
        if (dst != srcs[0])
            spmd__copy_cached((char *)dst + begin * elem, (const char *)srcs[0] + begin * elem,
                              (end - begin) * elem);
        return;
    }
    spmd__tree t = spmd__tree_of(n);
    double slots[TREE_SLOTS][TREE_BLOCK];
    double *spare = slots[TREE_SLOTS - 1]; /* a pair leaf's or a 16-bit leaf's value */
    /* the root's slot is dst itself unless dst is an input (its block is read to the end) */
    int direct = 1;
    for (int k = 0; k < n; k++)
        direct &= (const void *)dst != srcs[k];
    for (size_t b = begin; b < end; b += TREE_BLOCK) {
        size_t len = end - b < TREE_BLOCK ? end - b : TREE_BLOCK;
        void *root = direct ? (char *)dst + b * acc_elem : (void *)slots[0];
        int depth = 0;
        for (int i = 0; i < t.p2; i++) {
            int first = spmd__tree_leaf_first(&t, i), pair = spmd__tree_leaf_size(&t, i) == 2;
            const void *second = (const char *)srcs[first + pair] + b * elem;
            if (half && pair) {
                load_leaf(dtype, spare, srcs[first + 1], b, len);
                second = spare;
            }
            if (!(i & 1)) { /* a left child: a slot of its own */
                void *slot = depth ? (void *)slots[depth] : root;
                depth++;
                load_leaf(dtype, slot, srcs[first], b, len);
                if (pair)
                    spmd__reduce_into(acc_dtype, op, slot, second, len);
                continue;
            }
            /* a right child: added straight into its left sibling, then the nodes it completes */
            if (pair) {
                if (!half) {
                    load_leaf(dtype, spare, srcs[first], b, len);
                    spmd__reduce_into(acc_dtype, op, spare, second, len);
                } else {
                    load_leaf(dtype, slots[TREE_SLOTS - 2], srcs[first], b, len);
                    spmd__reduce_into(acc_dtype, op, slots[TREE_SLOTS - 2], spare, len);
                    memcpy(spare, slots[TREE_SLOTS - 2], len * acc_elem);
                }
                second = spare;
            } else if (half) {
                load_leaf(dtype, spare, srcs[first], b, len);
                second = spare;
            } else {
                second = (const char *)srcs[first] + b * elem;
            }
            void *left = depth > 1 ? (void *)slots[depth - 1] : root;
            spmd__reduce_into(acc_dtype, op, left, second, len);
            for (unsigned m = ((unsigned)i + 1) >> 1; !(m & 1u); m >>= 1, depth--)
                spmd__reduce_into(acc_dtype, op, depth > 2 ? (void *)slots[depth - 2] : root,
                                  slots[depth - 1], len);
        }
        if (!direct) /* written after every input of the block was read: dst is one of them */
            memcpy((char *)dst + b * acc_elem, slots[0], len * acc_elem);
    }
}

/* Results of more than a last-level cache (a typical 32 MiB; sysconf's figure is unreliable in
 * virtual machines, 320 MiB on the 2-core CI VM) are streamed past the caches; smaller ones
 * stay there for the reader. Measured on that VM, 4 devices: streaming 8-16 MiB of results
 * costs 10-30 %, streaming 64 MiB saves 20-30 %. */
#define STREAM_BYTES ((size_t)32 << 20)

int spmd__should_stream(size_t bytes)
{
#if defined(__SSE2__)
    return bytes >= STREAM_BYTES;
#else
    (void)bytes;
    return 0;
#endif
}

void spmd__reduce_many_to_all(spmd_dtype dtype, spmd__reduce_op op, void *const *dsts, int ndst,
                              const void *const *srcs, int n, size_t begin, size_t end,
                              int streaming)
{
    streaming = streaming && !spmd__is_half(dtype);
    double block[BLOCK]; /* aligned, and room for BLOCK elements of any accumulator dtype */
    size_t elem = spmd_dtype_size(dtype);
    const void *stack[64];
    const void **shifted = n <= 64 ? stack : malloc((size_t)n * sizeof *shifted);
    if (!shifted) { /* no memory for the pointers: a second pass does the same work */
        spmd__reduce_many(dtype, op, dsts[0], srcs, n, begin, end);
        for (int d = 1; d < ndst; d++)
            spmd__copy_cached((char *)dsts[d] + begin * elem, (char *)dsts[0] + begin * elem,
                              (end - begin) * elem);
        return;
    }
    for (size_t b = begin; b < end; b += BLOCK) {
        size_t len = end - b < BLOCK ? end - b : BLOCK;
        for (int k = 0; k < n; k++)
            shifted[k] = (const char *)srcs[k] + b * elem;
        spmd__reduce_many(dtype, op, block, shifted, n, 0, len);
        for (int d = 0; d < ndst; d++) {
            if (streaming)
                spmd__copy_streaming((char *)dsts[d] + b * elem, block, len * elem);
            else
                spmd__from_accumulator(dtype, (char *)dsts[d] + b * elem, block, 0, len);
        }
    }
    if (streaming)
        spmd__copy_streaming_fence();
    if (shifted != stack)
        free(shifted);
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
            spmd__copy_cached((char *)dst + begin * elem, (const char *)acc + begin * elem,
                              (end - begin) * elem);
    }
}

int spmd__int_like(spmd_dtype t) { return spmd__is_int_like(t); }

int64_t spmd__load_int(spmd_dtype t, const void *p, size_t i)
{
    return spmd__load_int_element(t, p, i);
}

void spmd__store_int(spmd_dtype t, void *p, size_t i, int64_t v)
{
    spmd__store_int_element(t, p, i, v);
}

double spmd__load(spmd_dtype t, const void *p, size_t i) { return spmd__load_element(t, p, i); }

void spmd__store(spmd_dtype t, void *p, size_t i, double v) { spmd__store_element(t, p, i, v); }

void spmd__convert(spmd_dtype to, void *dst, spmd_dtype from, const void *src, size_t count)
{
    if (to == from) {
        if (dst != src)
            memmove(dst, src, count * spmd_dtype_size(to));
        return;
    }
    /* Between integer types: exactly, through int64 (narrowing wraps, as in numpy). */
    if (spmd__is_int_like(from) && spmd__is_int_like(to)) {
        for (size_t i = 0; i < count; i++)
            spmd__store_int_element(to, dst, i, spmd__load_int_element(from, src, i));
        return;
    }
    for (size_t i = 0; i < count; i++)
        spmd__store_element(to, dst, i, spmd__load_element(from, src, i));
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
            spmd__store_element(dtype, data, i, spmd__load_element(dtype, data, i) * s);
    }
}
