/* Named shardings: a mesh plus a partition spec, and the pure index math behind them. */
#ifndef SPMD_SHARDING_H
#define SPMD_SHARDING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "spmd/export.h"
#include "spmd/mesh.h"
#include "spmd/spec.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

/** A box of an array: half-open [start, stop) per dimension, row-major dimension order. */
typedef struct spmd_box {
    int ndim;
    int64_t start[SPMD_MAX_RANK];
    int64_t stop[SPMD_MAX_RANK];
} spmd_box;

typedef struct spmd_sharding spmd_sharding;

/**
 * Creates NamedSharding(mesh, spec). Every axis the spec names must be a mesh axis. The spec is
 * copied and the mesh retained. Not collective.
 * @return SPMD_OK, SPMD_ERR_SPEC (unknown axis: the message lists the mesh axes),
 *         SPMD_ERR_INVALID_ARGUMENT (NULL).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_sharding_create(spmd_mesh *mesh, const spmd_spec *spec,
                                                         spmd_sharding **out);
/** spmd_sharding_create with a spec parsed by spmd_spec_parse(). */
SPMD_API SPMD_NODISCARD spmd_status spmd_sharding_create_parse(spmd_mesh *mesh,
                                                               const char *spec_text,
                                                               spmd_sharding **out);
SPMD_API spmd_sharding *spmd_sharding_retain(spmd_sharding *sharding);
/** Drops the caller's reference; NULL-safe. */
SPMD_API void spmd_sharding_destroy(spmd_sharding *sharding);

/** The mesh; borrowed, valid while the sharding lives. */
SPMD_API spmd_mesh *spmd_sharding_mesh(const spmd_sharding *sharding);
/** The spec as given; borrowed, valid while the sharding lives. */
SPMD_API const spmd_spec *spmd_sharding_spec(const spmd_sharding *sharding);

/**
 * Checks that the sharding applies to an array of this shape: spec no longer than the rank,
 * every extent ≥ 1, every sharded dimension divisible by its number of shards.
 * @return SPMD_OK, SPMD_ERR_SHAPE (the message names the dimension, its size and the shard
 *         count), SPMD_ERR_INVALID_ARGUMENT.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_sharding_check_shape(const spmd_sharding *sharding,
                                                              int ndim, const int64_t *shape);
/** Shape of every shard: shape[j] / (number of shards of dimension j). */
SPMD_API SPMD_NODISCARD spmd_status spmd_sharding_shard_shape(const spmd_sharding *sharding,
                                                              int ndim, const int64_t *shape,
                                                              int64_t *shard_shape);
/** Number of shards (blocks) along dimension `dim`: the product of its axes' sizes. */
SPMD_API int spmd_sharding_num_blocks(const spmd_sharding *sharding, int dim);
/**
 * The index box that global device `device_id` holds of an array of `shape`.
 * @return SPMD_ERR_INVALID_ARGUMENT if the device is not in the mesh, SPMD_ERR_SHAPE as above.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_sharding_device_box(const spmd_sharding *sharding,
                                                             int ndim, const int64_t *shape,
                                                             int device_id, spmd_box *box);
/**
 * Replica id of `device_id`: how many devices earlier in mesh flat order hold the same box
 * (the row-major rank of its coordinates on the mesh axes the spec does not use); -1 if the
 * device is not in the mesh.
 */
SPMD_API int spmd_sharding_replica_id(const spmd_sharding *sharding, int device_id);

/** Devices of the mesh (all processes). */
SPMD_API int spmd_sharding_num_devices(const spmd_sharding *sharding);
/** This process's devices of the mesh. */
SPMD_API int spmd_sharding_num_addressable_devices(const spmd_sharding *sharding);
/** Global id of this process's i-th device, in mesh flat order; -1 if out of range. */
SPMD_API int spmd_sharding_addressable_device_id(const spmd_sharding *sharding, int i);
/** 1 when every mesh device belongs to this process. */
SPMD_API int spmd_sharding_is_fully_addressable(const spmd_sharding *sharding);
/** 1 when every device holds the whole array (the spec's axes multiply to 1). */
SPMD_API int spmd_sharding_is_fully_replicated(const spmd_sharding *sharding);
/**
 * 1 when both shardings put the same box of any rank-`ndim` array on the same set of devices
 * (so converting between them moves no data), whatever their meshes, device order and spelling.
 */
SPMD_API int spmd_sharding_is_equivalent(const spmd_sharding *a, const spmd_sharding *b, int ndim);

/** Writes "NamedSharding(mesh=Mesh('a': 4, 'b': 2, axis_types=(Auto, Auto)), spec=P('a', None))"
 * into buf. */
SPMD_API SPMD_NODISCARD spmd_status spmd_sharding_format(const spmd_sharding *sharding, char *buf,
                                                         size_t size);

/**
 * Draws which devices hold which block of a 1-D or 2-D array of `shape`, as
 * jax.debug.visualize_array_sharding does: one box per distinct block, labelled with the
 * platform and the ids of the devices that hold it. Not collective.
 * @return SPMD_ERR_UNSUPPORTED for rank 0 or > 2, SPMD_ERR_SHAPE as spmd_sharding_check_shape.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_visualize_sharding(FILE *out,
                                                            const spmd_sharding *sharding, int ndim,
                                                            const int64_t *shape);

SPMD_END_DECLS

#endif /* SPMD_SHARDING_H */
