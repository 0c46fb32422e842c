/*
 * Operations on whole global arrays ("computation follows data"): each takes spmd_array
 * operands on one mesh and returns a new array whose sharding follows JAX's explicit mode
 * (sharding in types). Each runs as one spmd_shard_map with block ops and collectives inside;
 * where no output sharding follows from the operands' types, the op is refused with
 * SPMD_ERR_SPEC and a message that lists every legal way out, each with the collective it would
 * run and the bytes each device would send. Nothing is inserted behind the caller's back: the
 * plan (spmd_op_plan) says, before anything runs, which collectives an op performs.
 *
 * Types are printed as JAX prints them: float32[8@x,4] is an 8 x 4 array whose dimension 0 is
 * sharded over mesh axis x; float32[8,16]{U:x} holds partial sums over x (unreduced).
 *
 * Every op is collective over the processes that own devices of the operands' mesh, in the
 * same order everywhere, as spmd_shard_map. Every reduction it performs adds in the fixed order
 * of README "Reduction order": the same bits in every layout of processes and devices.
 * Operands are never changed, also when the op fails.
 */
#ifndef SPMD_ARRAY_OPS_H
#define SPMD_ARRAY_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "spmd/array.h"
#include "spmd/dtype.h"
#include "spmd/export.h"
#include "spmd/mesh.h"
#include "spmd/ops.h"
#include "spmd/sharding.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

/** The most collectives one op runs. */
#define SPMD_OP_PLAN_MAX_STEPS 24

/** One collective an op runs (or a reshard of a whole array). */
typedef struct spmd_op_step {
    /** "psum", "pmax", "pmin", "all_gather", "psum_scatter" (inside the op's shard_map), or
     *  "reshard" (an explicit layout change of an operand or the result, spmd_reshard) */
    char kind[16];
    /** as the trace writes it: "psum float32[4,16] over ('x')"; for a reshard,
     *  "reshard float32[8,4@x] -> float32[8@y,4]" */
    char text[160];
    /** the mesh axes, comma-separated ("x,y"); empty for a reshard */
    char axes[SPMD_MAX_MESH_AXES * (SPMD_MAX_AXIS_NAME + 1)];
    spmd_dtype dtype;
    /** Bytes one device sends, under the model of a bandwidth-optimal algorithm over a group
     *  of n devices and a block of B bytes: psum, pmax, pmin 2(n-1)/n B; all_gather (n-1) B;
     *  psum_scatter (n-1)/n B; a reshard the bytes the mesh's first device must receive. */
    int64_t bytes_per_device;
} spmd_op_step;

/** What an op will do: its output type and its collectives, in order. */
typedef struct spmd_op_plan {
    char op[32];        /**< "matmul", "sum", "add" ... */
    char out_type[160]; /**< "float32[8,16@x]" */
    int nsteps;
    spmd_op_step steps[SPMD_OP_PLAN_MAX_STEPS];
    int64_t bytes_per_device; /**< the steps' sum */
} spmd_op_plan;

/**
 * A communication budget for a sequence of ops (a training step): each op adds its plan's
 * bytes and collectives; an op that would go past a limit is refused before it runs
 * (SPMD_ERR_SPEC, naming the op, its plan and what was spent), on every process alike.
 */
typedef struct spmd_comm_budget {
    int64_t max_bytes_per_device; /**< -1: no limit */
    int max_collectives;          /**< -1: no limit */
    int64_t bytes_per_device;     /**< spent so far (start at 0) */
    int collectives;              /**< spent so far (start at 0) */
} spmd_comm_budget;

#define SPMD_OP_OPTIONS_VERSION 1u

/** Per-call options of the array ops; NULL means the defaults. */
typedef struct spmd_op_options {
    unsigned int version; /**< SPMD_OP_OPTIONS_VERSION */
    /** Where the op was called ("model.c:42"), recorded in the trace (SPMD_TRACE) with the
     *  op's collectives: `spmd trace show` then says where each one came from. SPMD_HERE. */
    const char *where;
    /** 1: fill `plan` and return without running (nothing moves, *out is set to NULL). */
    int dry_run;
    spmd_op_plan *plan; /**< optional: receives the plan (also when the op runs) */
    /** optional: checked before the op runs; charged with its plan once it ran (or was planned
     *  dry), never when it failed */
    spmd_comm_budget *budget;
} spmd_op_options;

#define SPMD_OP_OPTIONS_INIT                                                                       \
    {                                                                                              \
        SPMD_OP_OPTIONS_VERSION, NULL, 0, NULL, NULL                                               \
    }

SPMD_API SPMD_NODISCARD spmd_status spmd_op_options_init(spmd_op_options *opts,
                                                         unsigned int version);

#define SPMD_OP_LINE_TEXT_(l) #l
#define SPMD_OP_LINE_TEXT(l) SPMD_OP_LINE_TEXT_(l)
#ifndef __cplusplus
/** Options that only record the calling line: spmd_array_matmul(a, b, NULL, SPMD_HERE, &c). */
#define SPMD_HERE                                                                                  \
    (&(const spmd_op_options){SPMD_OP_OPTIONS_VERSION, __FILE__ ":" SPMD_OP_LINE_TEXT(__LINE__),   \
                              0, NULL, NULL})
#endif

/** Marker for an out_sharding argument: replicated on the operands' mesh (P()). The common
 *  way out of a refused op: the reduction or gather that makes every device whole. */
SPMD_API extern const uint64_t spmd_replicated_marker[8];
#define SPMD_REPLICATED ((const spmd_sharding *)(const void *)spmd_replicated_marker)

/**
 * Writes an array's type as JAX prints it: "float32[8@x,4]", "float32[8,16]{U:x}",
 * "float32[8@(x,y)]" for a dimension split over two axes. SPMD_ERR_INVALID_ARGUMENT when buf
 * is too small (160 bytes always suffice for rank <= 8 and names of 8 characters).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_type_format(const spmd_array *x, char *buf,
                                                           size_t size);
/** The plan in one line: "matmul -> float32[8,16]: psum float32[8,16] over ('x') 768 B (x of 4
 * devices)". */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_plan_format(const spmd_op_plan *plan, char *buf,
                                                        size_t size);
/** The plan as one JSON object: {"op":..,"out_type":..,"bytes_per_device":..,"steps":[..]}. */
SPMD_API SPMD_NODISCARD spmd_status spmd_op_plan_json(const spmd_op_plan *plan, char *buf,
                                                      size_t size);

/*
 * Every op below: out_sharding NULL lets the rule decide; SPMD_REPLICATED or a sharding on the
 * operands' mesh asks for that output (the op then runs the collective that gives it, or
 * reshards: the plan says which). On failure *out is NULL and the operands are unchanged.
 * @return SPMD_OK; SPMD_ERR_SPEC (no output sharding follows, or the one asked for is not
 *         legal: the message lists the legal ones; over the budget); SPMD_ERR_SHAPE;
 *         SPMD_ERR_INVALID_ARGUMENT (NULL, deleted array, another mesh, bad axis);
 *         SPMD_ERR_UNSUPPORTED (a dtype the block op does not take); what spmd_shard_map and
 *         spmd_reshard return.
 */

/* ---- nullary: replicated on `mesh` unless out_sharding says otherwise ---- */

/** jnp.zeros. */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_zeros(spmd_mesh *mesh, int ndim,
                                                     const int64_t *shape, spmd_dtype dtype,
                                                     const spmd_sharding *out_sharding,
                                                     const spmd_op_options *opts, spmd_array **out);
/** jnp.full. */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_full(spmd_mesh *mesh, int ndim, const int64_t *shape,
                                                    spmd_dtype dtype, double value,
                                                    const spmd_sharding *out_sharding,
                                                    const spmd_op_options *opts, spmd_array **out);
/** lax.broadcasted_iota: element value = its index along `dimension`. */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_iota(spmd_mesh *mesh, int ndim, const int64_t *shape,
                                                    spmd_dtype dtype, int dimension,
                                                    const spmd_sharding *out_sharding,
                                                    const spmd_op_options *opts, spmd_array **out);
/** Random values as spmd_array_random (the same array whatever the sharding). */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_random_values(
    spmd_mesh *mesh, int ndim, const int64_t *shape, spmd_dtype dtype, uint64_t seed,
    spmd_random_distribution distribution, const spmd_sharding *out_sharding,
    const spmd_op_options *opts, spmd_array **out);

/* ---- elementwise ---- */

/** op(x), keeping x's sharding (no communication). */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_unary(spmd_unary_op op, spmd_array *x,
                                                     const spmd_sharding *out_sharding,
                                                     const spmd_op_options *opts, spmd_array **out);
/**
 * a op b with numpy broadcasting (ranks aligned at the end; size-1 dimensions stretch). Per
 * dimension, equal specs are kept and a size-1 or unsharded operand takes the other's spec;
 * two different axes on one dimension are refused unless out_sharding says the result's
 * (the operands are then resharded to it). The dtypes must agree (spmd_array_astype first).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_binary(spmd_binary_op op, spmd_array *a,
                                                      spmd_array *b,
                                                      const spmd_sharding *out_sharding,
                                                      const spmd_op_options *opts,
                                                      spmd_array **out);
/** a op s for a host scalar s. */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_binary_scalar(spmd_binary_op op, spmd_array *a,
                                                             double s,
                                                             const spmd_sharding *out_sharding,
                                                             const spmd_op_options *opts,
                                                             spmd_array **out);
/** jnp.where(cond, a, b): cond bool; the three broadcast together as in spmd_array_binary. */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_where(spmd_array *cond, spmd_array *a, spmd_array *b,
                                                     const spmd_sharding *out_sharding,
                                                     const spmd_op_options *opts, spmd_array **out);
/** x.astype(dtype), keeping the sharding. */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_astype(spmd_array *x, spmd_dtype dtype,
                                                      const spmd_sharding *out_sharding,
                                                      const spmd_op_options *opts,
                                                      spmd_array **out);

/* ---- reductions ---- */

/**
 * Sum, mean, max, min (over the `naxes` dimensions in `axes`; naxes -1: all of them) or
 * argmax / argmin (over one dimension, or all with naxes -1: the flat index; int32 out).
 * keepdims keeps reduced dimensions as 1. The mesh axes that sharded a reduced dimension are
 * reduced over (psum, pmax, pmin in the fixed order): the result is replicated over them.
 * out_sharding may instead ask for the sum unreduced over exactly those axes (no
 * communication) or for a dimension of the result sharded over them (psum_scatter). mean
 * divides the global sum once; integer inputs give float32.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_reduce(spmd_reduce_kind kind, spmd_array *x,
                                                      int naxes, const int *axes, int keepdims,
                                                      const spmd_sharding *out_sharding,
                                                      const spmd_op_options *opts,
                                                      spmd_array **out);

/* ---- contractions ---- */

/**
 * lax.dot_general: the result's dimensions are the batch dimensions, then a's free ones, then
 * b's. Batch dimensions must be sharded alike. Of each contracting pair: sharded on neither
 * side, local; on one side only, that operand is all-gathered along it; on both (the same
 * axes), the op is refused unless out_sharding says replicated (psum), one result dimension
 * sharded over those axes (psum_scatter) or unreduced over them (no communication). A free
 * dimension of a and one of b on the same axis are refused (an axis used twice). float32,
 * float64 (and float16/bfloat16 accumulated in float32), through gemm.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_dot_general(
    spmd_array *a, spmd_array *b, int nbatch, const int *a_batch, const int *b_batch, int ncontract,
    const int *a_contract, const int *b_contract, const spmd_sharding *out_sharding,
    const spmd_op_options *opts, spmd_array **out);
/** a @ b for rank-2 operands, or rank-r ones with equal leading (batch) dimensions. */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_matmul(spmd_array *a, spmd_array *b,
                                                      const spmd_sharding *out_sharding,
                                                      const spmd_op_options *opts,
                                                      spmd_array **out);
/**
 * Two-operand jnp.einsum, "bij,bjk->bik": letters in both operands and the output are batch
 * dimensions, in both operands only contracted, in one operand and the output free; each
 * letter at most once per operand; the output in any order (a transpose after the
 * dot_general, which moves no data between devices).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_einsum(const char *subscripts, spmd_array *a,
                                                      spmd_array *b,
                                                      const spmd_sharding *out_sharding,
                                                      const spmd_op_options *opts,
                                                      spmd_array **out);

/* ---- structure ---- */

/** jnp.transpose (perm NULL reverses): the spec is permuted alike. */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_transpose(spmd_array *x, const int *perm,
                                                         const spmd_sharding *out_sharding,
                                                         const spmd_op_options *opts,
                                                         spmd_array **out);
/**
 * jnp.reshape: dimensions are matched in groups of equal products. A group that splits one
 * dimension gives its sharding to the major new dimension (which its shard count must
 * divide); one that merges dimensions keeps the major one's sharding (the minor ones must be
 * unsharded); size-1 dimensions come and go freely. Anything else that moves a sharded
 * dimension is refused and asks for out_sharding.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_reshape(spmd_array *x, int ndim,
                                                       const int64_t *shape,
                                                       const spmd_sharding *out_sharding,
                                                       const spmd_op_options *opts,
                                                       spmd_array **out);
/**
 * lax.slice with unit strides, x[start:limit] on every dimension: the spec is kept; a sharded
 * dimension whose new extent its shard count does not divide is refused (never replicated
 * silently). A sharded dimension that is cut is all-gathered along it first (the plan says so).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_slice(spmd_array *x, const int64_t *start,
                                                     const int64_t *limit,
                                                     const spmd_sharding *out_sharding,
                                                     const spmd_op_options *opts, spmd_array **out);
/**
 * jnp.take(x, indices, axis, mode): x's dimension `axis` must be unsharded (else refused);
 * the result's spec is x's with that entry replaced by indices' spec (an axis used twice is
 * refused).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_take(spmd_array *x, spmd_array *indices, int axis,
                                                    spmd_take_mode mode,
                                                    const spmd_sharding *out_sharding,
                                                    const spmd_op_options *opts, spmd_array **out);
/** jnp.concatenate: the operands share one sharding, and `axis` must be unsharded. */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_concatenate(int n, spmd_array *const *xs, int axis,
                                                           const spmd_sharding *out_sharding,
                                                           const spmd_op_options *opts,
                                                           spmd_array **out);
/** jax.nn.softmax along `axis`, keeping x's sharding (pmax and psum over the axis's mesh axes
 *  when it is sharded). */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_softmax(spmd_array *x, int axis,
                                                       const spmd_sharding *out_sharding,
                                                       const spmd_op_options *opts,
                                                       spmd_array **out);

/* ---- shardings ---- */

/**
 * with_sharding_constraint in explicit mode: an assertion, not a conversion. SPMD_OK when x
 * is laid out as `sharding` (the same mesh and equivalent spec), else SPMD_ERR_SPEC naming
 * both types and the reshard that would convert. Not collective; nothing moves.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_constrain(const spmd_array *x,
                                                         const spmd_sharding *sharding);
/** jax.sharding.reshard: the explicit change of layout (spmd_reshard), with a plan. */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_reshard_to(spmd_array *x,
                                                          const spmd_sharding *sharding,
                                                          const spmd_op_options *opts,
                                                          spmd_array **out);

SPMD_END_DECLS

#endif /* SPMD_ARRAY_OPS_H */
