/* Block operations. CPU devices: float32/float64 through typed loops (vectorized by the
 * compiler), other dtypes through double; gemm through OpenBLAS. CUDA devices: the same
 * arithmetic as kernels on the device's stream (runtime/devices/backend/cuda_kernels.cu), gemm
 * through cuBLAS; each op waits for its kernel, so the host may read the result when it returns. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <spmd/ops.h>

#include "runtime/base/check.h"
#include "runtime/devices/backend/scalar_ops.h"
#include "shard_map/executor.h"
#include "runtime/base/dtype.h"
#include "shard_map/elementwise_loops.h"
#include "shard_map/reduce.h"
#include "runtime/devices/backend/index_map.h"
#ifdef SPMD_HAVE_CUDA
#include "runtime/devices/backend/cuda.h"
#endif

/* The CUDA stream to run an op on its blocks (NULL: run it on the host). */
static void *op_queue(spmd_ctx *ctx, int n, const spmd_block *const *blocks)
{
    const void *ptrs[4];
    size_t largest = 0;
    for (int i = 0; i < n; i++) {
        size_t bytes = spmd__block_bytes(blocks[i]);
        largest = bytes > largest ? bytes : largest;
        ptrs[i] = blocks[i]->data;
    }
    return spmd__ctx_kernel_queue(ctx, largest, n, ptrs);
}

#ifdef SPMD_HAVE_CUDA
/* Waits for an op's kernel: callers read results on the host as on CPU devices. */
static spmd_status queued(spmd_ctx *ctx, spmd_status launched)
{
    return launched == SPMD_OK ? spmd__ctx_sync(ctx) : launched;
}

#define ON_DEVICE(ctx, q, call) return queued((ctx), (call))
#else
#define ON_DEVICE(ctx, q, call) ((void)(q))
#endif

static int same_shape(const spmd_block *a, const spmd_block *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int j = 0; j < a->ndim; j++)
        if (a->shape[j] != b->shape[j])
            return 0;
    return 1;
}

static int blocks_overlap(const spmd_block *a, const spmd_block *b)
{
    size_t na = spmd__block_bytes(a), nb = spmd__block_bytes(b);
    const char *x = a->data, *y = b->data;
    return x < y + nb && y < x + na;
}

/* b and out share a dtype; else INVALID_ARGUMENT naming both (b is `name`). */
static spmd_status require_out_dtype(const spmd_block *b, const char *name, const spmd_block *out,
                                     const char *fn)
{
    SPMD_REQUIRE(b->dtype == out->dtype, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: %s is %s but out is %s; convert with spmd_op_copy first", fn, name,
                 spmd_dtype_name(b->dtype), spmd_dtype_name(out->dtype));
    return SPMD_OK;
}

static spmd_status require_same_shape(const spmd_block *a, const spmd_block *b, const char *fn,
                                      const char *an, const char *bn)
{
    SPMD_REQUIRE(same_shape(a, b), SPMD_ERR_SHAPE,
                 "%s: %s and %s must have the same shape (ranks %d and %d)", fn, an, bn, a->ndim,
                 b->ndim);
    return SPMD_OK;
}

spmd_status spmd_op_fill(spmd_ctx *ctx, spmd_block *out, double value)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_fill"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    SPMD_CHECK(spmd__check_block(out, "out", "spmd_op_fill"));
    size_t n = (size_t)spmd_block_size(out);
    void *q = op_queue(ctx, 1, (const spmd_block *[]){out});
    if (q)
        ON_DEVICE(ctx, q, spmd__cuda_fill(q, out->dtype, out->data, n, value));
    if (out->dtype == SPMD_DTYPE_F32) {
        float *p = out->data, v = (float)value;
        for (size_t i = 0; i < n; i++)
            p[i] = v;
    } else {
        for (size_t i = 0; i < n; i++)
            spmd__store(out->dtype, out->data, i, value);
    }
    return SPMD_OK;
}

spmd_status spmd_op_iota(spmd_ctx *ctx, spmd_block *out, double start, double step)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_iota"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    SPMD_CHECK(spmd__check_block(out, "out", "spmd_op_iota"));
    size_t n = (size_t)spmd_block_size(out);
    void *q = op_queue(ctx, 1, (const spmd_block *[]){out});
    if (q)
        ON_DEVICE(ctx, q, spmd__cuda_iota(q, out->dtype, out->data, n, start, step));
    for (size_t i = 0; i < n; i++)
        spmd__store(out->dtype, out->data, i, start + (double)i * step);
    return SPMD_OK;
}

spmd_status spmd_op_copy(spmd_ctx *ctx, const spmd_block *in, spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_copy"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    SPMD_CHECK(spmd__check_block(in, "in", "spmd_op_copy"));
    SPMD_CHECK(spmd__check_block(out, "out", "spmd_op_copy"));
    SPMD_CHECK(require_same_shape(in, out, "spmd_op_copy", "in", "out"));
    SPMD_REQUIRE(in->data != out->data || in->dtype == out->dtype, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_op_copy: converting %s to %s in place is not possible; use another out",
                 spmd_dtype_name(in->dtype), spmd_dtype_name(out->dtype));
    spmd__ctx_note_copy(ctx, in, out); /* a replicated input copied stays alike */
    size_t n = (size_t)spmd_block_size(in);
    void *q = op_queue(ctx, 2, (const spmd_block *[]){in, out});
    if (q)
        ON_DEVICE(ctx, q, spmd__cuda_convert(q, out->dtype, out->data, in->dtype, in->data, n));
    spmd__convert(out->dtype, out->data, in->dtype, in->data, n);
    return SPMD_OK;
}

spmd_status spmd_op_unary(spmd_ctx *ctx, spmd_unary_op op, const spmd_block *in, spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_unary"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    const char *fn = "spmd_op_unary";
    SPMD_CHECK(spmd__check_block(in, "in", fn));
    SPMD_CHECK(spmd__check_block(out, "out", fn));
    SPMD_CHECK(require_same_shape(in, out, fn, "in", "out"));
    SPMD_REQUIRE(op >= SPMD_UNARY_NEG && op <= SPMD_UNARY_RELU, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: op %d is not a spmd_unary_op", fn, (int)op);
    SPMD_CHECK(require_out_dtype(in, "in", out, fn));
    int int_ok = op == SPMD_UNARY_NEG || op == SPMD_UNARY_RELU;
    SPMD_REQUIRE(spmd__dtype_is_float(in->dtype) || (int_ok && spmd__dtype_is_number(in->dtype)),
                 SPMD_ERR_UNSUPPORTED,
                 "%s: this op needs a float dtype, not %s; convert with spmd_op_copy first", fn,
                 spmd_dtype_name(in->dtype));
    size_t n = (size_t)spmd_block_size(in);
    void *q = op_queue(ctx, 2, (const spmd_block *[]){in, out});
    if (q)
        ON_DEVICE(ctx, q, spmd__cuda_unary(q, op, in->dtype, in->data, out->data, n));
    if (in->dtype == SPMD_DTYPE_F32 && spmd__unary_loop_f32(op, in->data, out->data, n))
        return SPMD_OK;
    if (in->dtype == SPMD_DTYPE_F64 && spmd__unary_loop_f64(op, in->data, out->data, n))
        return SPMD_OK;
    if (in->dtype == SPMD_DTYPE_F32) {
        const float *x = in->data;
        float *y = out->data;
        for (size_t i = 0; i < n; i++)
            y[i] = spmd__unary_f32(op, x[i]);
    } else if (!spmd__dtype_is_float(in->dtype)) {
        /* integers exactly; negation wraps (-INT_MIN == INT_MIN), as in JAX */
        for (size_t i = 0; i < n; i++) {
            int64_t v = spmd__load_int(in->dtype, in->data, i);
            spmd__store_int(in->dtype, out->data, i, spmd__unary_i64(op, v));
        }
    } else {
        for (size_t i = 0; i < n; i++)
            spmd__store(in->dtype, out->data, i,
                        spmd__unary_f64(op, spmd__load(in->dtype, in->data, i)));
    }
    return SPMD_OK;
}

/* b broadcasts with period `period` over a: 1 (scalar), the row length, or a's size. */
static spmd_status binary(spmd_ctx *ctx, spmd_binary_op op, const spmd_block *a,
                          const spmd_block *b_block, const void *b, size_t period,
                          spmd_dtype b_dtype, spmd_block *out)
{
    size_t n = (size_t)spmd_block_size(a);
    int nblocks = b_block ? 3 : 2;
    void *q = op_queue(ctx, nblocks, (const spmd_block *[]){a, out, b_block});
    if (!spmd__dtype_is_float(a->dtype)) {
        if (op == SPMD_BINARY_DIV)
            for (size_t i = 0; i < period; i++)
                SPMD_REQUIRE(spmd__load_int(b_dtype, b, i) != 0, SPMD_ERR_INVALID_ARGUMENT,
                             "spmd_op_binary: integer division by zero (element %zu of b)", i);
    }
    /* a scalar b (b_block NULL) is a host int64 or double: it goes to the kernel by value */
    if (q)
        ON_DEVICE(ctx, q,
                  spmd__cuda_binary(q, op, a->dtype, a->data, b_block ? b : NULL, period,
                                    b_block ? 0 : spmd__load(b_dtype, b, 0),
                                    b_block ? 0 : spmd__load_int(b_dtype, b, 0), out->data, n));
    if (!spmd__dtype_is_float(a->dtype)) {
        for (size_t i = 0; i < n; i++)
            spmd__store_int(out->dtype, out->data, i,
                            spmd__binary_i64(op, spmd__load_int(a->dtype, a->data, i),
                                             spmd__load_int(b_dtype, b, i % period)));
        return SPMD_OK;
    }
    if (a->dtype == SPMD_DTYPE_F32 && b_dtype == SPMD_DTYPE_F32 &&
        spmd__binary_loop_f32(op, a->data, b, period, out->data, n))
        return SPMD_OK;
    if (a->dtype == SPMD_DTYPE_F64 && b_dtype == SPMD_DTYPE_F64 &&
        spmd__binary_loop_f64(op, a->data, b, period, out->data, n))
        return SPMD_OK;
    if (a->dtype == SPMD_DTYPE_F32 && b_dtype == SPMD_DTYPE_F32) {
        const float *x = a->data, *y = b;
        float *z = out->data;
        for (size_t i = 0; i < n; i++)
            z[i] = spmd__binary_f32(op, x[i], y[i % period]);
        return SPMD_OK;
    }
    for (size_t i = 0; i < n; i++)
        spmd__store(out->dtype, out->data, i,
                    spmd__binary_f64(op, spmd__load(a->dtype, a->data, i),
                                     spmd__load(b_dtype, b, i % period)));
    return SPMD_OK;
}

static int is_bitwise(spmd_binary_op op)
{
    return op == SPMD_BINARY_AND || op == SPMD_BINARY_OR || op == SPMD_BINARY_XOR;
}

static spmd_status check_binary(spmd_binary_op op, const spmd_block *a, const spmd_block *out)
{
    const char *fn = "spmd_op_binary";
    SPMD_CHECK(spmd__check_block(a, "a", fn));
    SPMD_CHECK(spmd__check_block(out, "out", fn));
    SPMD_CHECK(require_same_shape(a, out, fn, "a", "out"));
    SPMD_REQUIRE(op >= SPMD_BINARY_ADD && op <= SPMD_BINARY_XOR, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: op %d is not a spmd_binary_op", fn, (int)op);
    SPMD_CHECK(require_out_dtype(a, "a", out, fn));
    if (is_bitwise(op))
        SPMD_REQUIRE(!spmd__dtype_is_float(a->dtype), SPMD_ERR_UNSUPPORTED,
                     "%s: a bitwise op takes int32, int64, uint8 or bool, not %s (as "
                     "jnp.bitwise_and); view the bits as an integer dtype instead",
                     fn, spmd_dtype_name(a->dtype));
    else
        SPMD_REQUIRE(spmd__dtype_is_number(a->dtype), SPMD_ERR_UNSUPPORTED,
                     "%s: arithmetic takes float, int32 or int64, not %s; convert with "
                     "spmd_op_copy first",
                     fn, spmd_dtype_name(a->dtype));
    return SPMD_OK;
}

spmd_status spmd_op_binary(spmd_ctx *ctx, spmd_binary_op op, const spmd_block *a,
                           const spmd_block *b, spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_binary"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    SPMD_CHECK(check_binary(op, a, out));
    SPMD_CHECK(spmd__check_block(b, "b", "spmd_op_binary"));
    SPMD_REQUIRE(b->dtype == a->dtype, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_op_binary: a is %s but b is %s", spmd_dtype_name(a->dtype),
                 spmd_dtype_name(b->dtype));
    size_t nb = (size_t)spmd_block_size(b);
    size_t row = a->ndim ? (size_t)a->shape[a->ndim - 1] : 1;
    size_t period = same_shape(a, b) ? (size_t)spmd_block_size(a) : nb;
    SPMD_REQUIRE(same_shape(a, b) || nb == 1 || (b->ndim == 1 && nb == row), SPMD_ERR_SHAPE,
                 "spmd_op_binary: b must have a's shape, one element, or a's last dimension "
                 "(%zu) as a row; it has %zu elements over %d dimension(s)",
                 row, nb, b->ndim);
    return binary(ctx, op, a, b, b->data, period, b->dtype, out);
}

static spmd_status spmd_op_binary_scalar_checked(spmd_ctx *ctx, spmd_binary_op op,
                                                 const spmd_block *a, double s, spmd_block *out)
{
    SPMD_CHECK(check_binary(op, a, out));
    if (!spmd__dtype_is_float(
            a->dtype)) { /* the scalar in a's own type, so integer arithmetic stays exact */
        SPMD_REQUIRE(s == s && s >= -0x1p63 && s < 0x1p63, SPMD_ERR_INVALID_ARGUMENT,
                     "spmd_op_binary_scalar: %g is not representable as %s", s,
                     spmd_dtype_name(a->dtype));
        if (is_bitwise(op)) { /* a whole number a's dtype holds, as JAX requires of it */
            double lo = a->dtype == SPMD_DTYPE_I32   ? -0x1p31
                        : a->dtype == SPMD_DTYPE_I64 ? -0x1p63
                                                     : 0;
            double hi = a->dtype == SPMD_DTYPE_I32   ? 0x1p31 - 1
                        : a->dtype == SPMD_DTYPE_I64 ? 0x1p63
                        : a->dtype == SPMD_DTYPE_U8  ? 255
                                                     : 1;
            SPMD_REQUIRE(s == (double)(int64_t)s && s >= lo && s <= hi &&
                             (a->dtype != SPMD_DTYPE_I64 || s < 0x1p63),
                         SPMD_ERR_INVALID_ARGUMENT,
                         "spmd_op_binary_scalar: a bitwise op on %s needs a whole number in "
                         "%.0f..%.0f, not %g",
                         spmd_dtype_name(a->dtype), lo, hi, s);
        }
        int64_t v = (int64_t)s;
        return binary(ctx, op, a, NULL, &v, 1, SPMD_DTYPE_I64, out);
    }
    return binary(ctx, op, a, NULL, &s, 1, SPMD_DTYPE_F64, out);
}

static spmd_status spmd_op_softmax_checked(spmd_ctx *ctx, const spmd_block *in, int axis,
                                           spmd_block *out)
{
    const char *fn = "spmd_op_softmax";
    SPMD_CHECK(spmd__check_block(in, "in", fn));
    SPMD_CHECK(spmd__check_block(out, "out", fn));
    SPMD_CHECK(require_same_shape(in, out, fn, "in", "out"));
    SPMD_CHECK(require_out_dtype(in, "in", out, fn));
    SPMD_REQUIRE(spmd__dtype_is_float(in->dtype), SPMD_ERR_UNSUPPORTED,
                 "%s: softmax takes a float dtype, not %s; convert with spmd_op_copy first", fn,
                 spmd_dtype_name(in->dtype));
    SPMD_REQUIRE(in->ndim >= 1, SPMD_ERR_SHAPE, "%s: in has rank 0; softmax needs an axis", fn);
    int a = axis < 0 ? axis + in->ndim : axis;
    SPMD_REQUIRE(a >= 0 && a < in->ndim, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: axis %d is out of range for a rank-%d block", fn, axis, in->ndim);
    SPMD_REQUIRE(in->data == out->data || !blocks_overlap(in, out), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: in and out overlap without being the same block", fn);
    size_t outer = 1, extent = (size_t)in->shape[a], inner = 1;
    for (int j = 0; j < a; j++)
        outer *= (size_t)in->shape[j];
    for (int j = a + 1; j < in->ndim; j++)
        inner *= (size_t)in->shape[j];
    void *q = op_queue(ctx, 2, (const spmd_block *[]){in, out});
    if (q)
        ON_DEVICE(ctx, q,
                  spmd__cuda_softmax(q, in->dtype, in->data, out->data, outer, extent, inner));
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++)
            spmd__softmax_line(in->dtype, in->data, out->data, o * extent * inner + i, extent,
                               inner);
    return SPMD_OK;
}

/* The bits jnp.take fills with: NaN, the most negative integer, 255, true. */
static uint64_t take_fill_bits(spmd_dtype t)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        return 0x7fc00000u;
    case SPMD_DTYPE_F64:
        return 0x7ff8000000000000u;
    case SPMD_DTYPE_F16:
        return 0x7e00u;
    case SPMD_DTYPE_BF16:
        return 0x7fc0u;
    case SPMD_DTYPE_I32:
        return 0x80000000u;
    case SPMD_DTYPE_I64:
        return 0x8000000000000000u;
    case SPMD_DTYPE_U8:
        return 0xffu;
    default: /* bool */
        return 1;
    }
}

static spmd_status spmd_op_take_checked(spmd_ctx *ctx, const spmd_block *in,
                                        const spmd_block *indices, int axis, spmd_take_mode mode,
                                        spmd_block *out)
{
    const char *fn = "spmd_op_take";
    SPMD_CHECK(spmd__check_block(in, "in", fn));
    SPMD_CHECK(spmd__check_block(indices, "indices", fn));
    SPMD_CHECK(spmd__check_block(out, "out", fn));
    SPMD_REQUIRE(mode == SPMD_TAKE_FILL || mode == SPMD_TAKE_CLIP || mode == SPMD_TAKE_WRAP,
                 SPMD_ERR_INVALID_ARGUMENT, "%s: mode %d is not a spmd_take_mode", fn, (int)mode);
    SPMD_REQUIRE(indices->dtype == SPMD_DTYPE_I32 || indices->dtype == SPMD_DTYPE_I64,
                 SPMD_ERR_INVALID_ARGUMENT, "%s: indices must be int32 or int64, not %s", fn,
                 spmd_dtype_name(indices->dtype));
    SPMD_CHECK(require_out_dtype(in, "in", out, fn));
    SPMD_REQUIRE(in->ndim >= 1, SPMD_ERR_SHAPE, "%s: in has rank 0; there is no axis to take from",
                 fn);
    int a = axis < 0 ? axis + in->ndim : axis;
    SPMD_REQUIRE(a >= 0 && a < in->ndim, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: axis %d is out of range for a rank-%d block", fn, axis, in->ndim);
    int rank = in->ndim - 1 + indices->ndim;
    SPMD_REQUIRE(out->ndim == rank, SPMD_ERR_SHAPE,
                 "%s: out must have rank %d (in's %d, axis %d replaced by the indices' %d), not %d",
                 fn, rank, in->ndim, a, indices->ndim, out->ndim);
    for (int j = 0; j < rank; j++) {
        int64_t want = j < a                   ? in->shape[j]
                       : j < a + indices->ndim ? indices->shape[j - a]
                                               : in->shape[j - indices->ndim + 1];
        SPMD_REQUIRE(out->shape[j] == want, SPMD_ERR_SHAPE,
                     "%s: dimension %d of out is %lld but must be %lld (in.shape[:%d] + "
                     "indices.shape + in.shape[%d:])",
                     fn, j, (long long)out->shape[j], (long long)want, a, a + 1);
    }
    SPMD_REQUIRE(!blocks_overlap(in, out) && !blocks_overlap(indices, out),
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: out overlaps in or indices; take into a block of "
                 "its own",
                 fn);
    size_t outer = 1, extent = (size_t)in->shape[a], inner = 1, count = 1;
    for (int j = 0; j < a; j++)
        outer *= (size_t)in->shape[j];
    for (int j = a + 1; j < in->ndim; j++)
        inner *= (size_t)in->shape[j];
    count = (size_t)spmd_block_size(indices);
    size_t elem = spmd_dtype_size(in->dtype);
    uint64_t fill = take_fill_bits(in->dtype);
    void *q = op_queue(ctx, 3, (const spmd_block *[]){in, out, indices});
    if (q)
        ON_DEVICE(ctx, q,
                  spmd__cuda_take(q, mode, in->data, indices->dtype, indices->data, out->data,
                                  outer, extent, count, inner, elem, fill));
    const char *src = in->data;
    char *dst = out->data;
    for (size_t o = 0; o < outer; o++)
        for (size_t k = 0; k < count; k++) {
            int64_t from = spmd__take_source(mode, spmd__load_int(indices->dtype, indices->data, k),
                                             (int64_t)extent);
            char *to = dst + (o * count + k) * inner * elem;
            if (from >= 0) {
                memcpy(to, src + (o * extent + (size_t)from) * inner * elem, inner * elem);
                continue;
            }
            for (size_t i = 0; i < inner; i++) /* little-endian: the low bytes */
                memcpy(to + i * elem, &fill, elem);
        }
    return SPMD_OK;
}

spmd_status spmd_op_take(spmd_ctx *ctx, const spmd_block *in, const spmd_block *indices, int axis,
                         spmd_take_mode mode, spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_take"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    return spmd__error_in(spmd_op_take_checked(ctx, in, indices, axis, mode, out), "spmd_op_take");
}

spmd_status spmd_op_softmax(spmd_ctx *ctx, const spmd_block *in, int axis, spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_softmax"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    return spmd__error_in(spmd_op_softmax_checked(ctx, in, axis, out), "spmd_op_softmax");
}

spmd_status spmd_op_reduce(spmd_ctx *ctx, spmd_reduce_kind kind, const spmd_block *in, int axis,
                           spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_reduce"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    const char *fn = "spmd_op_reduce";
    SPMD_CHECK(spmd__check_block(in, "in", fn));
    SPMD_CHECK(spmd__check_block(out, "out", fn));
    SPMD_REQUIRE(kind >= SPMD_REDUCE_SUM && kind <= SPMD_REDUCE_ARGMIN, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: kind %d is not a spmd_reduce_kind", fn, (int)kind);
    int arg = kind == SPMD_REDUCE_ARGMAX || kind == SPMD_REDUCE_ARGMIN;
    SPMD_REQUIRE(!arg || out->dtype == SPMD_DTYPE_I32 || out->dtype == SPMD_DTYPE_I64,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: an argmax or argmin needs an int32 or int64 out, not %s", fn,
                 spmd_dtype_name(out->dtype));
    SPMD_REQUIRE(spmd__dtype_is_number(in->dtype), SPMD_ERR_UNSUPPORTED, "%s: cannot reduce %s", fn,
                 spmd_dtype_name(in->dtype));
    SPMD_REQUIRE(kind != SPMD_REDUCE_MEAN || spmd__dtype_is_float(out->dtype),
                 SPMD_ERR_INVALID_ARGUMENT, "%s: a mean needs a float out, not %s", fn,
                 spmd_dtype_name(out->dtype));
    size_t outer = 1, extent = (size_t)spmd_block_size(in), inner = 1;
    if (axis != SPMD_ALL_AXES) {
        int a = axis < 0 ? axis + in->ndim : axis;
        SPMD_REQUIRE(a >= 0 && a < in->ndim, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: axis %d is out of range for a rank-%d block (use SPMD_ALL_AXES to "
                     "reduce everything)",
                     fn, axis, in->ndim);
        /* keepdims (out of in's rank, 1 along the axis) lays the elements out alike */
        int keepdims = out->ndim == in->ndim;
        SPMD_REQUIRE(out->ndim == in->ndim - 1 || keepdims, SPMD_ERR_SHAPE,
                     "%s: out must have rank %d (in without axis %d), or %d with keepdims, not %d",
                     fn, in->ndim - 1, a, in->ndim, out->ndim);
        SPMD_REQUIRE(!keepdims || out->shape[a] == 1, SPMD_ERR_SHAPE,
                     "%s: with keepdims (out of in's rank) out's dimension %d must be 1, not %lld",
                     fn, a, (long long)out->shape[a]);
        for (int j = 0, k = 0; j < in->ndim; j++) {
            if (j == a && !keepdims)
                continue;
            SPMD_REQUIRE(j == a || out->shape[k] == in->shape[j], SPMD_ERR_SHAPE,
                         "%s: dimension %d of out is %lld but must be %lld", fn, k,
                         (long long)out->shape[k], (long long)in->shape[j]);
            k++;
        }
        outer = inner = 1;
        for (int j = 0; j < a; j++)
            outer *= (size_t)in->shape[j];
        for (int j = a + 1; j < in->ndim; j++)
            inner *= (size_t)in->shape[j];
        extent = (size_t)in->shape[a];
    } else {
        SPMD_REQUIRE(spmd_block_size(out) == 1, SPMD_ERR_SHAPE,
                     "%s: reducing over all axes gives one element; out has %lld", fn,
                     (long long)spmd_block_size(out));
    }
    void *q = op_queue(ctx, 2, (const spmd_block *[]){in, out});
    if (q)
        ON_DEVICE(ctx, q,
                  spmd__cuda_reduce_axis(q, kind, in->dtype, in->data, out->dtype, out->data, outer,
                                         extent, inner));
    int exact = !spmd__dtype_is_float(in->dtype) && kind != SPMD_REDUCE_MEAN &&
                !spmd__dtype_is_float(out->dtype);
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            size_t first = o * extent * inner + i;
            if (arg) { /* the first best index; a NaN beats every number, the first NaN all */
                int argmax = kind == SPMD_REDUCE_ARGMAX;
                size_t best = 0;
                if (!spmd__dtype_is_float(in->dtype)) {
                    int64_t b = spmd__load_int(in->dtype, in->data, first);
                    for (size_t e = 1; e < extent; e++) {
                        int64_t v = spmd__load_int(in->dtype, in->data, first + e * inner);
                        if (argmax ? v > b : v < b)
                            b = v, best = e;
                    }
                } else {
                    double b = spmd__load(in->dtype, in->data, first);
                    for (size_t e = 1; e < extent && b == b; e++) {
                        double v = spmd__load(in->dtype, in->data, first + e * inner);
                        if (v != v || (argmax ? v > b : v < b))
                            b = v, best = e;
                    }
                }
                spmd__store_int(out->dtype, out->data, o * inner + i, (int64_t)best);
                continue;
            }
            if (exact) { /* integers: exact, sums wrap */
                int64_t acc = spmd__load_int(in->dtype, in->data, first);
                for (size_t e = 1; e < extent; e++) {
                    int64_t v = spmd__load_int(in->dtype, in->data, first + e * inner);
                    acc = kind == SPMD_REDUCE_MAX   ? (v > acc ? v : acc)
                          : kind == SPMD_REDUCE_MIN ? (v < acc ? v : acc)
                                                    : (int64_t)((uint64_t)acc + (uint64_t)v);
                }
                spmd__store_int(out->dtype, out->data, o * inner + i, acc);
                continue;
            }
            double acc = spmd__load(in->dtype, in->data, first);
            for (size_t e = 1; e < extent; e++) {
                double v = spmd__load(in->dtype, in->data, first + e * inner);
                acc = kind == SPMD_REDUCE_MAX   ? (v > acc || v != v ? v : acc)
                      : kind == SPMD_REDUCE_MIN ? (v < acc || v != v ? v : acc)
                                                : acc + v;
            }
            if (kind == SPMD_REDUCE_MEAN)
                acc /= (double)extent;
            spmd__store(out->dtype, out->data, o * inner + i, acc);
        }
    return SPMD_OK;
}

static spmd_status gemm_dims(int trans_a, int trans_b, const spmd_block *a, const spmd_block *b,
                             const spmd_block *c, int *m, int *n, int *k)
{
    const char *fn = "spmd_op_gemm";
    SPMD_REQUIRE(a->ndim == 2 && b->ndim == 2 && c->ndim == 2, SPMD_ERR_SHAPE,
                 "%s: A, B and C must be 2-D (ranks %d, %d, %d)", fn, a->ndim, b->ndim, c->ndim);
    int64_t am = trans_a ? a->shape[1] : a->shape[0], ak = trans_a ? a->shape[0] : a->shape[1];
    int64_t bk = trans_b ? b->shape[1] : b->shape[0], bn = trans_b ? b->shape[0] : b->shape[1];
    SPMD_REQUIRE(ak == bk && c->shape[0] == am && c->shape[1] == bn, SPMD_ERR_SHAPE,
                 "%s: op(A) is %lldx%lld, op(B) is %lldx%lld and C is %lldx%lld; they do not "
                 "multiply",
                 fn, (long long)am, (long long)ak, (long long)bk, (long long)bn,
                 (long long)c->shape[0], (long long)c->shape[1]);
    SPMD_REQUIRE(am <= INT32_MAX && bn <= INT32_MAX && ak <= INT32_MAX, SPMD_ERR_UNSUPPORTED,
                 "%s: dimensions beyond 2^31 exceed BLAS's int arguments", fn);
    *m = (int)am;
    *n = (int)bn;
    *k = (int)ak;
    return SPMD_OK;
}

static float *to_f32(const spmd_block *x)
{
    size_t n = (size_t)spmd_block_size(x);
    float *f = malloc(n * sizeof *f);
    if (f)
        spmd__convert(SPMD_DTYPE_F32, f, x->dtype, x->data, n);
    return f;
}

spmd_status spmd_op_gemm(spmd_ctx *ctx, int trans_a, int trans_b, double alpha, const spmd_block *a,
                         const spmd_block *b, double beta, spmd_block *c)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_gemm"));
    spmd__ctx_note_write(ctx, c); /* no longer what a collective proved */
    const char *fn = "spmd_op_gemm";
    SPMD_CHECK(spmd__check_block(a, "A", fn));
    SPMD_CHECK(spmd__check_block(b, "B", fn));
    SPMD_CHECK(spmd__check_block(c, "C", fn));
    SPMD_REQUIRE(a->dtype == b->dtype && b->dtype == c->dtype, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: A, B and C must share a dtype (got %s, %s, %s); convert with spmd_op_copy "
                 "first",
                 fn, spmd_dtype_name(a->dtype), spmd_dtype_name(b->dtype),
                 spmd_dtype_name(c->dtype));
    SPMD_REQUIRE(spmd__dtype_is_float(a->dtype), SPMD_ERR_UNSUPPORTED,
                 "%s: gemm takes a float dtype, not %s", fn, spmd_dtype_name(a->dtype));
    int m = 0, n = 0, k = 0;
    SPMD_CHECK(gemm_dims(trans_a, trans_b, a, b, c, &m, &n, &k));
    CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans,
                    tb = trans_b ? CblasTrans : CblasNoTrans;
    int lda = (int)a->shape[1], ldb = (int)b->shape[1], ldc = n;
#ifdef SPMD_HAVE_CUDA
    void *q = op_queue(ctx, 3, (const spmd_block *[]){a, b, c});
    void *handle = q ? spmd_ctx_cublas(ctx) : NULL;
    if (q && !handle)
        return SPMD_ERROR(SPMD_ERR_BACKEND, "%s: %s", fn, spmd_last_error());
    if (q)
        return queued(ctx, spmd__cuda_gemm(handle, a->dtype, trans_a, trans_b, m, n, k, alpha,
                                           a->data, lda, b->data, ldb, beta, c->data, ldc));
#else
    (void)ctx;
#endif
    if (a->dtype == SPMD_DTYPE_F64) {
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a->data, lda, b->data, ldb, beta,
                    c->data, ldc);
        return SPMD_OK;
    }
    if (a->dtype == SPMD_DTYPE_F32) {
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, (float)alpha, a->data, lda, b->data, ldb,
                    (float)beta, c->data, ldc);
        return SPMD_OK;
    }
    /* 16-bit floats: convert, multiply in float32, round once */
    float *fa = to_f32(a), *fb = to_f32(b), *fc = to_f32(c);
    spmd_status st = SPMD_OK;
    if (!fa || !fb || !fc) {
        st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory for float32 copies", fn);
    } else {
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, (float)alpha, fa, lda, fb, ldb, (float)beta, fc,
                    ldc);
        spmd__convert(c->dtype, c->data, SPMD_DTYPE_F32, fc, (size_t)m * (size_t)n);
    }
    free(fa);
    free(fb);
    free(fc);
    return st;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

/* out[i] = cond[i or 0] ? a[i] : b[i], elements of T: the bits move, nothing converts */
#define WHERE_LOOP(T)                                                                              \
    do {                                                                                           \
        const T *x = a->data, *y = b->data;                                                        \
        T *z = out->data;                                                                          \
        for (size_t i = 0; i < n; i++)                                                             \
            z[i] = c[scalar ? 0 : i] ? x[i] : y[i];                                                \
    } while (0)

static spmd_status spmd_op_where_checked(spmd_ctx *ctx, const spmd_block *cond, const spmd_block *a,
                                         const spmd_block *b, spmd_block *out)
{
    const char *fn = "spmd_op_where";
    SPMD_CHECK(spmd__check_block(cond, "cond", fn));
    SPMD_CHECK(spmd__check_block(a, "a", fn));
    SPMD_CHECK(spmd__check_block(b, "b", fn));
    SPMD_CHECK(spmd__check_block(out, "out", fn));
    SPMD_REQUIRE(cond->dtype == SPMD_DTYPE_BOOL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: cond is %s but must be bool; compare into a bool block first "
                 "(spmd_op_binary with a comparison, or spmd_op_copy)",
                 fn, spmd_dtype_name(cond->dtype));
    SPMD_CHECK(require_same_shape(a, out, fn, "a", "out"));
    SPMD_CHECK(require_same_shape(b, out, fn, "b", "out"));
    int scalar = cond->ndim == 0;
    if (!scalar)
        SPMD_CHECK(require_same_shape(cond, out, fn, "cond", "out"));
    SPMD_REQUIRE(a->dtype == out->dtype && b->dtype == out->dtype, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: a is %s, b is %s and out is %s; they must share one dtype (convert with "
                 "spmd_op_copy first)",
                 fn, spmd_dtype_name(a->dtype), spmd_dtype_name(b->dtype),
                 spmd_dtype_name(out->dtype));
    size_t n = (size_t)spmd_block_size(out), elem = spmd_dtype_size(out->dtype);
    void *q = op_queue(ctx, 4, (const spmd_block *[]){cond, a, b, out});
    if (q)
        ON_DEVICE(ctx, q,
                  spmd__cuda_where(q, cond->data, scalar, a->data, b->data, out->data, n, elem));
    const unsigned char *c = cond->data;
    switch (elem) {
    case 1:
        WHERE_LOOP(uint8_t);
        break;
    case 2:
        WHERE_LOOP(uint16_t);
        break;
    case 4:
        WHERE_LOOP(uint32_t);
        break;
    default:
        WHERE_LOOP(uint64_t);
        break;
    }
    return SPMD_OK;
}

spmd_status spmd_op_where(spmd_ctx *ctx, const spmd_block *cond, const spmd_block *a,
                          const spmd_block *b, spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_where"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    return spmd__error_in(spmd_op_where_checked(ctx, cond, a, b, out), "spmd_op_where");
}

/* Out's elements in order, each read from in through the map (an odometer over out's shape). */
#define TRANSPOSE_LOOP(T)                                                                          \
    do {                                                                                           \
        const T *x = in->data;                                                                     \
        T *y = out->data;                                                                          \
        int64_t at[SPMD_MAX_RANK] = {0};                                                           \
        size_t from = 0;                                                                           \
        for (size_t i = 0; i < n; i++) {                                                           \
            y[i] = x[from];                                                                        \
            for (int j = m.ndim - 1; j >= 0; j--) {                                                \
                from += (size_t)m.in_stride[j];                                                    \
                if (++at[j] < m.shape[j])                                                          \
                    break;                                                                         \
                from -= (size_t)m.in_stride[j] * (size_t)m.shape[j];                               \
                at[j] = 0;                                                                         \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static spmd_status spmd_op_transpose_checked(spmd_ctx *ctx, const spmd_block *in, const int *perm,
                                             spmd_block *out)
{
    const char *fn = "spmd_op_transpose";
    SPMD_CHECK(spmd__check_block(in, "in", fn));
    SPMD_CHECK(spmd__check_block(out, "out", fn));
    SPMD_CHECK(require_out_dtype(in, "in", out, fn));
    int nd = in->ndim, order[SPMD_MAX_RANK], seen[SPMD_MAX_RANK] = {0};
    for (int j = 0; j < nd; j++) {
        order[j] = perm ? perm[j] : nd - 1 - j;
        SPMD_REQUIRE(order[j] >= 0 && order[j] < nd && !seen[order[j]], SPMD_ERR_INVALID_ARGUMENT,
                     "%s: perm[%d] = %d; perm must list the axes 0..%d once each", fn, j, order[j],
                     nd - 1);
        seen[order[j]] = 1;
    }
    int same = out->ndim == nd;
    for (int j = 0; same && j < nd; j++)
        same = out->shape[j] == in->shape[order[j]];
    SPMD_REQUIRE(same, SPMD_ERR_SHAPE,
                 "%s: out must have shape in.shape[perm[j]] for every axis j (rank %d; out has "
                 "rank %d)",
                 fn, nd, out->ndim);
    size_t n = (size_t)spmd_block_size(out), elem = spmd_dtype_size(out->dtype);
    const char *a = in->data, *b = out->data;
    SPMD_REQUIRE(n == 0 || a + n * elem <= b || b + n * elem <= a, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: in and out overlap; transpose into a block of its own", fn);
    spmd__transpose_map m = {nd, {0}, {0}};
    int64_t stride[SPMD_MAX_RANK], s = 1; /* in's own strides, row-major */
    for (int j = nd - 1; j >= 0; j--) {
        stride[j] = s;
        s *= in->shape[j];
    }
    for (int j = 0; j < nd; j++) {
        m.shape[j] = out->shape[j];
        m.in_stride[j] = stride[order[j]];
    }
    if (n == 0)
        return SPMD_OK;
    void *q = op_queue(ctx, 2, (const spmd_block *[]){in, out});
    if (q)
        ON_DEVICE(ctx, q, spmd__cuda_transpose(q, &m, in->data, out->data, n, elem));
    switch (elem) {
    case 1:
        TRANSPOSE_LOOP(uint8_t);
        break;
    case 2:
        TRANSPOSE_LOOP(uint16_t);
        break;
    case 4:
        TRANSPOSE_LOOP(uint32_t);
        break;
    default:
        TRANSPOSE_LOOP(uint64_t);
        break;
    }
    return SPMD_OK;
}

spmd_status spmd_op_transpose(spmd_ctx *ctx, const spmd_block *in, const int *perm, spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_transpose"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    return spmd__error_in(spmd_op_transpose_checked(ctx, in, perm, out), "spmd_op_transpose");
}

/* The box's elements in order (an odometer over the extent), from src to dst. */
#define BOX_LOOP(T)                                                                                \
    do {                                                                                           \
        const T *x = src;                                                                          \
        T *y = dst;                                                                                \
        int64_t at[SPMD_MAX_RANK] = {0};                                                           \
        size_t from = (size_t)m->src_at, to = (size_t)m->dst_at;                                   \
        for (size_t i = 0; i < n; i++) {                                                           \
            y[to] = x[from];                                                                       \
            for (int j = m->ndim - 1; j >= 0; j--) {                                               \
                from += (size_t)m->src_stride[j], to += (size_t)m->dst_stride[j];                  \
                if (++at[j] < m->extent[j])                                                        \
                    break;                                                                         \
                from -= (size_t)(m->src_stride[j] * m->extent[j]);                                 \
                to -= (size_t)(m->dst_stride[j] * m->extent[j]);                                   \
                at[j] = 0;                                                                         \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void row_major_strides(const spmd_block *b, int64_t *stride)
{
    int64_t s = 1;
    for (int j = b->ndim - 1; j >= 0; j--) {
        stride[j] = s;
        s *= b->shape[j];
    }
}

/* The box of `extent` at `start` of `big` fits in it: each axis checked by name. */
static spmd_status check_box(const char *fn, const char *big_name, const spmd_block *big,
                             const int64_t *start, const int64_t *extent, int ndim)
{
    SPMD_REQUIRE(ndim == big->ndim, SPMD_ERR_SHAPE, "%s: the box has rank %d but %s has rank %d",
                 fn, ndim, big_name, big->ndim);
    SPMD_REQUIRE(ndim == 0 || start, SPMD_ERR_INVALID_ARGUMENT, "%s: argument 'start' is NULL", fn);
    for (int j = 0; j < ndim; j++)
        SPMD_REQUIRE(start[j] >= 0 && start[j] <= big->shape[j] - extent[j], SPMD_ERR_SHAPE,
                     "%s: along axis %d a box of extent %lld at %lld leaves %s's extent %lld; "
                     "start[%d] must be in 0..%lld",
                     fn, j, (long long)extent[j], (long long)start[j], big_name,
                     (long long)big->shape[j], j, (long long)(big->shape[j] - extent[j]));
    return SPMD_OK;
}

static spmd_status box_copy(spmd_ctx *ctx, const spmd__box_map *m, const spmd_block *source,
                            spmd_block *into)
{
    size_t n = 1, elem = spmd_dtype_size(into->dtype);
    for (int j = 0; j < m->ndim; j++)
        n *= (size_t)m->extent[j];
    const void *src = source->data;
    void *dst = into->data;
    void *q = op_queue(ctx, 2, (const spmd_block *[]){source, into});
    if (q)
        ON_DEVICE(ctx, q, spmd__cuda_box_copy(q, m, src, dst, n, elem));
    switch (elem) {
    case 1:
        BOX_LOOP(uint8_t);
        break;
    case 2:
        BOX_LOOP(uint16_t);
        break;
    case 4:
        BOX_LOOP(uint32_t);
        break;
    default:
        BOX_LOOP(uint64_t);
        break;
    }
    return SPMD_OK;
}

static spmd_status spmd_op_slice_checked(spmd_ctx *ctx, const spmd_block *in, const int64_t *start,
                                         spmd_block *out)
{
    const char *fn = "spmd_op_slice";
    SPMD_CHECK(spmd__check_block(in, "in", fn));
    SPMD_CHECK(spmd__check_block(out, "out", fn));
    SPMD_CHECK(require_out_dtype(in, "in", out, fn));
    SPMD_CHECK(check_box(fn, "in", in, start, out->shape, out->ndim));
    SPMD_REQUIRE(!blocks_overlap(in, out), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: in and out overlap; slice into a block of its own", fn);
    spmd__box_map m = {out->ndim, {0}, {0}, {0}, 0, 0};
    row_major_strides(in, m.src_stride);
    row_major_strides(out, m.dst_stride);
    for (int j = 0; j < out->ndim; j++) {
        m.extent[j] = out->shape[j];
        m.src_at += start[j] * m.src_stride[j];
    }
    return box_copy(ctx, &m, in, out);
}

static spmd_status spmd_op_update_slice_checked(spmd_ctx *ctx, const spmd_block *operand,
                                                const spmd_block *update, const int64_t *start,
                                                spmd_block *out)
{
    const char *fn = "spmd_op_update_slice";
    SPMD_CHECK(spmd__check_block(operand, "operand", fn));
    SPMD_CHECK(spmd__check_block(update, "update", fn));
    SPMD_CHECK(spmd__check_block(out, "out", fn));
    SPMD_CHECK(require_same_shape(operand, out, fn, "operand", "out"));
    SPMD_REQUIRE(operand->dtype == out->dtype && update->dtype == out->dtype,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: operand is %s, update %s and out %s; they must share one dtype", fn,
                 spmd_dtype_name(operand->dtype), spmd_dtype_name(update->dtype),
                 spmd_dtype_name(out->dtype));
    SPMD_CHECK(check_box(fn, "operand", operand, start, update->shape, update->ndim));
    SPMD_REQUIRE(!blocks_overlap(update, out), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: update and out overlap; give the update a block of its own", fn);
    if (operand->data != out->data) {
        SPMD_REQUIRE(!blocks_overlap(operand, out), SPMD_ERR_INVALID_ARGUMENT,
                     "%s: operand and out overlap without being the same block", fn);
        spmd__box_map whole = {out->ndim, {0}, {0}, {0}, 0, 0};
        row_major_strides(out, whole.src_stride);
        row_major_strides(out, whole.dst_stride);
        memcpy(whole.extent, out->shape, sizeof(int64_t) * (size_t)out->ndim);
        SPMD_CHECK(box_copy(ctx, &whole, operand, out));
    }
    spmd__box_map m = {update->ndim, {0}, {0}, {0}, 0, 0};
    row_major_strides(update, m.src_stride);
    row_major_strides(out, m.dst_stride);
    for (int j = 0; j < update->ndim; j++) {
        m.extent[j] = update->shape[j];
        m.dst_at += start[j] * m.dst_stride[j];
    }
    return box_copy(ctx, &m, update, out);
}

static spmd_status spmd_op_concatenate_checked(spmd_ctx *ctx, int n, const spmd_block *ins,
                                               int axis, spmd_block *out)
{
    const char *fn = "spmd_op_concatenate";
    SPMD_CHECK(spmd__check_block(out, "out", fn));
    SPMD_REQUIRE(n >= 1, SPMD_ERR_INVALID_ARGUMENT, "%s: n is %d; give one block at least", fn, n);
    SPMD_REQUIRE(ins != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument 'ins' is NULL", fn);
    SPMD_REQUIRE(out->ndim >= 1, SPMD_ERR_SHAPE,
                 "%s: out has rank 0; blocks of rank 0 cannot be concatenated (as in "
                 "jnp.concatenate): give them a dimension of 1",
                 fn);
    int a = axis < 0 ? axis + out->ndim : axis;
    SPMD_REQUIRE(a >= 0 && a < out->ndim, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: axis %d is out of range for rank %d", fn, axis, out->ndim);
    int64_t along = 0;
    for (int k = 0; k < n; k++) {
        const spmd_block *b = &ins[k];
        char name[32];
        snprintf(name, sizeof name, "ins[%d]", k);
        SPMD_CHECK(spmd__check_block(b, name, fn));
        SPMD_CHECK(require_out_dtype(b, name, out, fn));
        SPMD_REQUIRE(b->ndim == out->ndim, SPMD_ERR_SHAPE, "%s: %s has rank %d but out has %d", fn,
                     name, b->ndim, out->ndim);
        for (int j = 0; j < out->ndim; j++)
            SPMD_REQUIRE(j == a || b->shape[j] == out->shape[j], SPMD_ERR_SHAPE,
                         "%s: dimension %d of %s is %lld but out's is %lld; only axis %d may "
                         "differ",
                         fn, j, name, (long long)b->shape[j], (long long)out->shape[j], a);
        SPMD_REQUIRE(!blocks_overlap(b, out), SPMD_ERR_INVALID_ARGUMENT,
                     "%s: %s overlaps out; concatenate into a block of its own", fn, name);
        SPMD_REQUIRE(b->shape[a] <= out->shape[a] - along, SPMD_ERR_SHAPE,
                     "%s: the blocks' extents along axis %d add up to more than out's %lld "
                     "(at %s)",
                     fn, a, (long long)out->shape[a], name);
        along += b->shape[a];
    }
    SPMD_REQUIRE(along == out->shape[a], SPMD_ERR_SHAPE,
                 "%s: the blocks' extents along axis %d add up to %lld but out's is %lld", fn, a,
                 (long long)along, (long long)out->shape[a]);
    int64_t offset = 0;
    for (int k = 0; k < n; k++) {
        spmd__box_map m = {out->ndim, {0}, {0}, {0}, 0, 0};
        row_major_strides(&ins[k], m.src_stride);
        row_major_strides(out, m.dst_stride);
        memcpy(m.extent, ins[k].shape, sizeof(int64_t) * (size_t)out->ndim);
        m.dst_at = offset * m.dst_stride[a];
        SPMD_CHECK(box_copy(ctx, &m, &ins[k], out));
        offset += ins[k].shape[a];
    }
    return SPMD_OK;
}

spmd_status spmd_op_concatenate(spmd_ctx *ctx, int n, const spmd_block *ins, int axis,
                                spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_concatenate"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    return spmd__error_in(spmd_op_concatenate_checked(ctx, n, ins, axis, out),
                          "spmd_op_concatenate");
}

spmd_status spmd_op_slice(spmd_ctx *ctx, const spmd_block *in, const int64_t *start,
                          spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_slice"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    return spmd__error_in(spmd_op_slice_checked(ctx, in, start, out), "spmd_op_slice");
}

spmd_status spmd_op_update_slice(spmd_ctx *ctx, const spmd_block *operand, const spmd_block *update,
                                 const int64_t *start, spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_update_slice"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    return spmd__error_in(spmd_op_update_slice_checked(ctx, operand, update, start, out),
                          "spmd_op_update_slice");
}

spmd_status spmd_op_binary_scalar(spmd_ctx *ctx, spmd_binary_op op, const spmd_block *a, double s,
                                  spmd_block *out)
{
    SPMD_CHECK(spmd__ctx_check_optional(ctx, "spmd_op_binary_scalar"));
    spmd__ctx_note_write(ctx, out); /* no longer what a collective proved */
    return spmd__error_in(spmd_op_binary_scalar_checked(ctx, op, a, s, out),
                          "spmd_op_binary_scalar");
}
