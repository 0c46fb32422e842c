/* Resharding: jax.device_put(x, sharding) for a committed array (DESIGN.md §3). */
#ifndef SPMD_RESHARD_H
#define SPMD_RESHARD_H

#include <stdint.h>

#include "spmd/array.h"
#include "spmd/export.h"
#include "spmd/sharding.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

/** What one process did in a reshard (summed over the arrays of a batch). */
typedef struct spmd_reshard_stats {
    uint64_t bytes_sent;     /**< to other processes */
    uint64_t bytes_received; /**< from other processes */
    uint64_t bytes_copied;   /**< between buffers of this process (packing excluded) */
    uint64_t bytes_shared;   /**< destination shards that are views of a source buffer: no copy */
    int messages_sent;       /**< one per destination process, whatever the batch size */
    int messages_received;
    /** Plans this call made: 0 when every array's plan was cached (a plan is kept for the
     *  source and destination layouts, so shardings made anew equal to earlier ones reuse it). */
    int plans_built;
    /** Pieces of this process in the plans used: boxes it copies, shares, sends or receives. */
    uint64_t plan_pieces;
    /** Work of the planning this call did (block pairs and mesh positions visited): it grows
     *  with this process's pieces, not with the square of the device count. 0 when cached. */
    uint64_t plan_steps;
    double plan_seconds; /**< time this call spent planning */
} spmd_reshard_stats;

#define SPMD_RESHARD_OPTIONS_VERSION 1u

typedef struct spmd_reshard_options {
    unsigned version; /**< SPMD_RESHARD_OPTIONS_VERSION */
    /** The source gives up its buffers (jax.device_put(x, s, donate=True)): they are freed once
     *  sent, or handed to the result where the layouts agree; later uses of the source fail. */
    int donate;
    spmd_reshard_stats *stats; /**< optional, filled on success */
} spmd_reshard_options;

#define SPMD_RESHARD_OPTIONS_INIT                                                                  \
    {                                                                                              \
        SPMD_RESHARD_OPTIONS_VERSION, 0, NULL                                                      \
    }

/**
 * jax.device_put(x, new_sharding): the same global value laid out by `new_sharding`, which may
 * use another mesh, another set of devices (even disjoint from x's) or other processes.
 * Collective over every process that owns a device of x's mesh or of the new mesh, in the
 * same order everywhere; other processes may call it too and get an array with no shards.
 * Only what changes owner moves: each process receives each element it lacks once (from the
 * holder cyclically nearest in process index when the source is replicated), in one message per
 * pair of processes. A destination block that is one contiguous run of a source shard on the same
 * device (the same block, or a row block of a replicated or coarser one) is a view of that
 * buffer: no copy.
 * @return SPMD_OK; SPMD_ERR_SHAPE when new_sharding does not fit x's shape;
 *         SPMD_ERR_INVALID_ARGUMENT (NULL, deleted array, bad options);
 *         SPMD_ERR_COLLECTIVE_MISMATCH / SPMD_ERR_TIMEOUT when the processes disagree or one
 *         does not arrive within SPMD_COLLECTIVE_TIMEOUT. On CUDA devices the bytes move
 *         through host code (managed memory), at host-memory speed.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_reshard(spmd_array *x, const spmd_sharding *new_sharding,
                                                 const spmd_reshard_options *options,
                                                 spmd_array **out);

/**
 * spmd_reshard of n arrays at once: one agreement and one message per pair of processes for
 * the whole batch. outs[i] is set only when every array succeeded (all NULL otherwise).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_reshard_batch(int n, spmd_array *const *xs,
                                                       const spmd_sharding *const *new_shardings,
                                                       const spmd_reshard_options *options,
                                                       spmd_array **outs);

/** x.copy(): the same sharding with buffers of its own. Not collective (no communication). */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_copy(const spmd_array *x, spmd_array **out);

SPMD_END_DECLS

#endif /* SPMD_RESHARD_H */
