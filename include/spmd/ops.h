/* Block operations for fn bodies, on the calling device: CPU loops and OpenBLAS on CPU devices;
 * kernels and cuBLAS on CUDA devices for blocks of 64 KiB and more (each op waits for its
 * kernel, so host code may read the result). Blocks are dense and row-major. `ctx` may be NULL
 * outside shard_map, for blocks in host memory. Blocks whose dtypes must agree and do not give
 * SPMD_ERR_INVALID_ARGUMENT (convert with spmd_op_copy); a dtype the op does not take,
 * SPMD_ERR_UNSUPPORTED. */
#ifndef SPMD_OPS_H
#define SPMD_OPS_H

#include "spmd/export.h"
#include "spmd/shard_map.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

typedef enum spmd_unary_op {
    SPMD_UNARY_NEG,
    SPMD_UNARY_EXP,
    SPMD_UNARY_LOG,
    SPMD_UNARY_SIN,
    SPMD_UNARY_COS,
    SPMD_UNARY_TANH,
    SPMD_UNARY_RELU
} spmd_unary_op;

typedef enum spmd_binary_op {
    SPMD_BINARY_ADD,
    SPMD_BINARY_SUB,
    SPMD_BINARY_MUL,
    SPMD_BINARY_DIV,
    SPMD_BINARY_MAX,
    SPMD_BINARY_MIN,
    /** jnp.bitwise_and / _or / _xor: integer (int32, int64, uint8) and bool dtypes only; on
     * bool, the logical and / or / xor */
    SPMD_BINARY_AND,
    SPMD_BINARY_OR,
    SPMD_BINARY_XOR
} spmd_binary_op;

typedef enum spmd_reduce_kind {
    SPMD_REDUCE_SUM,
    SPMD_REDUCE_MAX,
    SPMD_REDUCE_MEAN,
    SPMD_REDUCE_MIN,
    /** jnp.argmax / jnp.argmin: the index along the axis (over SPMD_ALL_AXES: the flat index)
     * of the first largest / smallest element, a NaN counting as beyond every number (the
     * first NaN wins); out is int32 or int64. */
    SPMD_REDUCE_ARGMAX,
    SPMD_REDUCE_ARGMIN
} spmd_reduce_kind;

/** What spmd_op_take does with an index outside the axis (jnp.take's `mode`). */
typedef enum spmd_take_mode {
    /** JAX's default: an index in [-n, 0) counts from the end; one beyond gives the fill value:
     * NaN for floats, the most negative value for int32/int64, 255 for uint8, true for bool */
    SPMD_TAKE_FILL = 0,
    /** clamped into [0, n - 1] (a negative index gives 0) */
    SPMD_TAKE_CLIP = 1,
    /** taken modulo n (a negative index counts from the end, again and again) */
    SPMD_TAKE_WRAP = 2
} spmd_take_mode;

/** Axis value of spmd_op_reduce that reduces over every dimension (to a scalar). */
#define SPMD_ALL_AXES (-1000)

/** out[:] = value. */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_fill(spmd_ctx *ctx, spmd_block *out, double value);
/** out[i] = start + i * step over the row-major flat index i. */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_iota(spmd_ctx *ctx, spmd_block *out, double start,
                                                 double step);
/** out = in, converted to out's dtype (same shape); in == out is allowed for equal dtypes. */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_copy(spmd_ctx *ctx, const spmd_block *in,
                                                 spmd_block *out);
/**
 * out = op(in), elementwise (same shape and dtype; in place allowed). exp, log, sin, cos and
 * tanh need a float dtype; neg and relu also take int32/int64.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_unary(spmd_ctx *ctx, spmd_unary_op op,
                                                  const spmd_block *in, spmd_block *out);
/**
 * out = a op b elementwise, out shaped like a (in place allowed). b is either a's shape, a
 * single element (scalar broadcast), or a's last dimension (row broadcast). Integer division
 * truncates; dividing an integer by zero is an error. Arithmetic takes float, int32 and int64
 * dtypes; the bitwise ops int32, int64, uint8 and bool.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_binary(spmd_ctx *ctx, spmd_binary_op op,
                                                   const spmd_block *a, const spmd_block *b,
                                                   spmd_block *out);
/**
 * jnp.where / lax.select: out[i] = cond[i] ? a[i] : b[i]. cond is a bool block of out's shape,
 * or a bool scalar (ndim 0) for every element; a, b and out share shape and dtype (in place
 * allowed). Bits are copied, not converted: -0.0 and NaN payloads stay as they were.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_where(spmd_ctx *ctx, const spmd_block *cond,
                                                  const spmd_block *a, const spmd_block *b,
                                                  spmd_block *out);
/**
 * jnp.transpose: out.shape[j] = in.shape[perm[j]] and out[.., i_j, ..] = in[.., i_perm[j], ..];
 * perm NULL reverses the axes (numpy's default). perm must list 0..ndim-1 once each; in and out
 * share the dtype and must not overlap.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_transpose(spmd_ctx *ctx, const spmd_block *in,
                                                      const int *perm, spmd_block *out);
/**
 * lax.slice with unit strides: out (its shape is the extent) = in[start[j] : start[j] +
 * out.shape[j]] along every axis j; the box must lie inside in. Bits are copied.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_slice(spmd_ctx *ctx, const spmd_block *in,
                                                  const int64_t *start, spmd_block *out);
/**
 * lax.dynamic_update_slice with a static start: out = operand with update's box at start (out
 * shaped like operand; out may be operand itself, then only the box is written). The box must
 * lie inside operand; update must not overlap out.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_update_slice(spmd_ctx *ctx, const spmd_block *operand,
                                                         const spmd_block *update,
                                                         const int64_t *start, spmd_block *out);
/**
 * jnp.concatenate: out = ins[0], ..., ins[n-1] one after the other along `axis` (negative
 * counts from the end). Every block has out's dtype and rank and out's extent on every other
 * axis; their extents along axis add up to out's. No input may overlap out. Bits are copied.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_concatenate(spmd_ctx *ctx, int n, const spmd_block *ins,
                                                        int axis, spmd_block *out);
/**
 * jnp.take(in, indices, axis, mode): out = in with `axis` (negative counts from the end)
 * replaced by the indices' dimensions, out[.., k.., ..] = in[.., indices[k..], ..]. indices is an
 * int32 or int64 block of any rank (rank 0: the axis goes away); out has in's dtype and shape
 * in.shape[:axis] + indices.shape + in.shape[axis+1:], and must not overlap in or indices.
 * Bits are copied.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_take(spmd_ctx *ctx, const spmd_block *in,
                                                 const spmd_block *indices, int axis,
                                                 spmd_take_mode mode, spmd_block *out);
/** out = a op s for a host scalar s (for a bitwise op, a whole number in a's range). */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_binary_scalar(spmd_ctx *ctx, spmd_binary_op op,
                                                          const spmd_block *a, double s,
                                                          spmd_block *out);
/**
 * Sum, max, min, mean, argmax or argmin over `axis` (negative counts from the end), out shaped
 * like in without that dimension, or with it as 1 (keepdims=True); or over all dimensions with
 * SPMD_ALL_AXES, out of one element (a scalar, or all ones with keepdims). Floats accumulate in
 * double; mean needs a float out.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_reduce(spmd_ctx *ctx, spmd_reduce_kind kind,
                                                   const spmd_block *in, int axis, spmd_block *out);
/**
 * jax.nn.softmax along `axis` (negative counts from the end): out = exp(in - max) / sum(exp(in -
 * max)) over each line along the axis, computed in double and rounded once to the dtype. in and
 * out share shape and a float dtype (in place allowed). A line holding a NaN, or whose max is
 * infinite, gives NaN throughout, as in JAX.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_softmax(spmd_ctx *ctx, const spmd_block *in, int axis,
                                                    spmd_block *out);
/**
 * C = alpha * op(A) op(B) + beta * C for 2-D blocks, op = transpose when trans_* is nonzero.
 * float32/float64 through OpenBLAS; float16/bfloat16 accumulate in float32. On CPU devices the
 * BLAS runs with SPMD_BLAS_THREADS threads (default 1) per call, whatever the machine's cores,
 * so the bits do not change with the layout or the process binding.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_gemm(spmd_ctx *ctx, int trans_a, int trans_b,
                                                 double alpha, const spmd_block *a,
                                                 const spmd_block *b, double beta, spmd_block *c);

/** Distributions of spmd_op_random and spmd_array_random. */
typedef enum spmd_random_distribution {
    SPMD_RANDOM_UNIFORM = 0, /**< in [0, 1) */
    SPMD_RANDOM_NORMAL = 1   /**< mean 0, variance 1 */
} spmd_random_distribution;

/**
 * Fills `out` (float32, float64 or bfloat16) with the block of a random global array that
 * starts at `start` in a global array of `global_shape` (both of out->ndim entries; NULL for
 * rank 0): each element's value depends only on `seed` and its row-major index in the global
 * array, so the global array is the same, bit for bit, whatever the layout (processes x
 * devices, partition spec) and on CPU and CUDA devices (what JAX's partitionable threefry
 * gives). Philox4x32-10 (Random123) of counter (index, 0) and key `seed`; uniform: the top 24
 * (float32), 53 (float64) or 8 (bfloat16) bits over 2^bits; normal: Box-Muller in double,
 * rounded once to the dtype.
 * @return SPMD_ERR_UNSUPPORTED for another dtype; SPMD_ERR_INVALID_ARGUMENT for a bad
 *         distribution, or a block that does not lie inside the global shape (named).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_random(spmd_ctx *ctx, uint64_t seed,
                                                   spmd_random_distribution dist,
                                                   const int64_t *global_shape,
                                                   const int64_t *start, spmd_block *out);

SPMD_END_DECLS

#endif /* SPMD_OPS_H */
