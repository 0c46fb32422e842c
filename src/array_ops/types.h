/* Private: an array's type in JAX's explicit mode (shape, dtype, the mesh axes of each
 * dimension, the unreduced axes) and the plan of an op (its collectives and their bytes). */
#ifndef SPMD_ARRAY_OPS_TYPES_H
#define SPMD_ARRAY_OPS_TYPES_H

#include <stdint.h>

#include <spmd/array_ops.h>

#include "runtime/base/dtype.h"

/** Room for a list of mesh axes, "x,y,...", of the longest names. */
#define SPMD__AXES_TEXT (SPMD_MAX_MESH_AXES * (SPMD_MAX_AXIS_NAME + 1))

typedef struct spmd__xtype {
    spmd_mesh *mesh; /* borrowed */
    spmd_dtype dtype;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int naxes[SPMD_MAX_RANK];                    /* mesh axes of each dimension */
    int axes[SPMD_MAX_RANK][SPMD_MAX_MESH_AXES]; /* their mesh indices, major first */
    unsigned unreduced;                          /* mesh axes the value is a partial sum over */
} spmd__xtype;

/** x's type (x already checked). */
void spmd__xtype_of(const spmd_array *x, spmd__xtype *t);
/** A replicated type on `mesh`. */
void spmd__xtype_replicated(spmd_mesh *mesh, int ndim, const int64_t *shape, spmd_dtype dtype,
                            spmd__xtype *t);
/** The type `sharding` gives an array of t's shape and dtype (mesh equal to t's, checked). */
void spmd__xtype_with_sharding(const spmd__xtype *like, const spmd_sharding *sharding,
                               spmd__xtype *t);
/** Mask of the mesh axes of dimension d; of every dimension. */
unsigned spmd__xtype_dim_mask(const spmd__xtype *t, int d);
unsigned spmd__xtype_used(const spmd__xtype *t);
/** Shards along dimension d. */
int64_t spmd__xtype_shards(const spmd__xtype *t, int d);
/** Block (per-device) shape. */
void spmd__xtype_block_shape(const spmd__xtype *t, int64_t *block);
int64_t spmd__xtype_block_bytes(const spmd__xtype *t);
/** Same layout: equal entries and unreduced axes (shape and dtype aside). */
int spmd__xtype_same_layout(const spmd__xtype *a, const spmd__xtype *b);
/** Dimension d of a and dimension e of b are on the same axes (in order). */
int spmd__xtype_dims_alike(const spmd__xtype *a, int d, const spmd__xtype *b, int e);
/** Moves dimension src's axes of `from` to dimension dst of t. */
void spmd__xtype_copy_dim(spmd__xtype *t, int dst, const spmd__xtype *from, int src);
/** "float32[8@x,4]{U:y}" into buf (always terminated). */
void spmd__xtype_format(const spmd__xtype *t, char *buf, size_t size);
/** "x" or "(x,y)" for a dimension; "" when unsharded. */
void spmd__xtype_dim_text(const spmd__xtype *t, int d, char *buf, size_t size);
/** The axes of mask `m` (mesh order) or of dimension d (entry order) as "x,y" for the
 * collectives, and as "('x', 'y')" as the trace writes them. */
void spmd__axes_text_mask(const spmd_mesh *mesh, unsigned m, char *list, size_t lsize);
void spmd__axes_text_dim(const spmd__xtype *t, int d, char *list, size_t lsize);
/** NamedSharding(t.mesh, t's spec). */
spmd_status spmd__xtype_sharding(const spmd__xtype *t, spmd_sharding **out);
/** SPMD_ERR_SHAPE naming `fn` and the dimension when a sharded extent is not divisible. */
spmd_status spmd__xtype_check_divisible(const spmd__xtype *t, const char *fn, const char *what);

/** Elements of a shape, or -1 when they overflow int64 bytes of `dtype`. */
int64_t spmd__xshape_elements(int ndim, const int64_t *shape, spmd_dtype dtype);

/* ---- plans ---- */

void spmd__plan_begin(spmd_op_plan *plan, const char *op);
/** Adds a collective inside the op's shard_map: `kind` over the axes list ("x,y"), on a block
 * of `in`'s type whose per-device shape is `block`; the group has n devices. */
void spmd__plan_collective(spmd_op_plan *plan, const char *kind, const char *axes, spmd_dtype dtype,
                           int ndim, const int64_t *block, int n);
/** Adds a reshard of a whole array from one type to another. */
void spmd__plan_reshard(spmd_op_plan *plan, const spmd__xtype *from, const spmd__xtype *to);
/** Bytes the mesh's first device must receive to go from `from` to `to`. */
int64_t spmd__reshard_bytes(const spmd__xtype *from, const spmd__xtype *to);
void spmd__plan_finish(spmd_op_plan *plan, const spmd__xtype *out);
/** The steps as "psum float32[8,16] over ('x') 448 B; ...", or "no communication". */
void spmd__plan_steps_text(const spmd_op_plan *plan, char *buf, size_t size);

#endif /* SPMD_ARRAY_OPS_TYPES_H */
