/* Private: what every array op shares: checking its arguments, the output sharding asked for,
 * the plan and the budget, and running it (reshards before, one shard_map, a reshard after). */
#ifndef SPMD_ARRAY_OPS_DRIVER_H
#define SPMD_ARRAY_OPS_DRIVER_H

#include <spmd/array_ops.h>
#include <spmd/shard_map.h>

#include "array_ops/types.h"
#include "runtime/base/check.h"

#define SPMD__XOP_MAX_IN 16

/** How the partial results of a reduction or a contraction end: added up over the reduced axes
 * (psum, pmax, pmin), left unreduced, or added up and scattered (psum_scatter). */
enum { FINISH_REDUCE, FINISH_NONE, FINISH_SCATTER };

typedef struct spmd__xop {
    const char *api; /* "spmd_array_matmul" */
    const spmd_op_options *opts;
    spmd_op_plan plan;
    char what[256]; /* the operands' types and the op, for the trace and messages */
    spmd_mesh *mesh;
    int nin;
    spmd_array *in[SPMD__XOP_MAX_IN];
    spmd__xtype in_type[SPMD__XOP_MAX_IN]; /* as fn sees them (after a reshard) */
    int reshard_in[SPMD__XOP_MAX_IN];      /* operand i goes to in_type[i] first */
    spmd__xtype body;                      /* what the shard_map gives */
    spmd__xtype out;                       /* what the caller gets */
    int has_body;                          /* 0: only the reshard (reshard_to) */
    spmd_fn fn;
    void *user;
} spmd__xop;

/** Starts an op: checks opts and out. */
spmd_status spmd__xop_begin(spmd__xop *op, const char *api, const char *plan_name,
                            const spmd_op_options *opts, spmd_array **out);
/** Adds operand `x` (argument `arg`): alive, on the op's mesh, no unreduced axes. */
spmd_status spmd__xop_operand(spmd__xop *op, spmd_array *x, const char *arg);
/** Checks a mesh argument of a nullary op and makes it the op's mesh. */
spmd_status spmd__xop_mesh(spmd__xop *op, spmd_mesh *mesh);
/**
 * Resolves out_sharding (NULL: *given 0) into the type `like` would have under it: the
 * operands' mesh, a spec that fits like's shape.
 */
spmd_status spmd__xop_requested(const spmd__xop *op, const spmd_sharding *out_sharding,
                                const spmd__xtype *like, spmd__xtype *req, int *given);
/** Operand i is resharded to `to` before the shard_map (a plan step). */
void spmd__xop_reshard_operand(spmd__xop *op, int i, const spmd__xtype *to);
/**
 * Sets the body's output type and the caller's (a reshard after the body when they differ,
 * a plan step); then charges the budget, fills opts->plan, and for a dry run sets *out NULL.
 * Returns 1 in *done for a dry run.
 */
spmd_status spmd__xop_plan(spmd__xop *op, const spmd__xtype *body, const spmd__xtype *out,
                           int *done, spmd_array **result);
/** Runs what the plan says: reshards, the shard_map with op->fn, the reshard after. */
spmd_status spmd__xop_run(spmd__xop *op, spmd_array **out);
/** Sets op->what, the op and its operands' types: "matmul(float32[8,4@x], float32[4,16])". */
void spmd__xop_describe(spmd__xop *op, const char *name);
/** Adds the op's parameters to its text, inside the parentheses: ", axes (0, 1)". Two ops
 * whose texts are equal must do the same (the text's hash keeps different ops from pairing
 * between processes). */
void spmd__xop_describe_more(spmd__xop *op, const char *fmt, ...) SPMD__PRINTF(2, 3);

/** Plans the all_gathers of the dimensions of t that gather[] marks, in order (each gather
 * sees the blocks the earlier ones made whole). */
void spmd__xop_plan_gathers(spmd__xop *op, const spmd__xtype *t, const int *gather);

/* ---- inside fn ---- */

/** All-gathers (tiled, invariant) the dimensions of x, of type t, that gather[] marks. */
spmd_status spmd__xop_gather_dims(spmd_ctx *ctx, const spmd__xtype *t, const int *gather,
                                  spmd_block *x);
/** The start of the calling device's block of an array of type t. */
spmd_status spmd__xop_block_start(spmd_ctx *ctx, const spmd__xtype *t, int64_t *start);
/** A block view of other shape over the same data. */
spmd_block spmd__block_view(const spmd_block *b, int ndim, const int64_t *shape);

#endif /* SPMD_ARRAY_OPS_DRIVER_H */
