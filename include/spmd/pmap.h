/* The legacy pmap front: a rank-reducing map over devices, built on spmd_shard_map
 * (DESIGN.md §5, SEMANTICS.md (g)). */
#ifndef SPMD_PMAP_H
#define SPMD_PMAP_H

#include <limits.h>

#include "spmd/array.h"
#include "spmd/export.h"
#include "spmd/shard_map.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

/** in_axes / out_axes entry: not mapped (an input every device sees whole; an output that is
 *  the same on every device and comes back once). */
#define SPMD_NONE INT_MIN

typedef struct spmd_pmap_options {
    unsigned int version; /**< SPMD_PMAP_OPTIONS_VERSION */
    /**
     * 0 (default): an input laid out otherwise than the pmap needs is resharded into place
     * (spmd_reshard, collective) with a logged warning (legacy pmap); 1: refused with
     * SPMD_ERR_INCOMPATIBLE_DEVICES.
     */
    int strict;
    /** Per input (may be NULL): donate[i] != 0 hands input i's buffers to a matching output
     *  (see spmd_shard_map_options.donate); an input that had to be copied is donated as the
     *  copy, with a warning. */
    const int *donate;
    /** 1 (default): verify that out_axes = SPMD_NONE outputs agree on every device. */
    int check_replication;
} spmd_pmap_options;

#define SPMD_PMAP_OPTIONS_VERSION 1
#define SPMD_PMAP_OPTIONS_INIT                                                                     \
    {                                                                                              \
        SPMD_PMAP_OPTIONS_VERSION, 0, NULL, 1                                                      \
    }

/**
 * pmap(fn, axis_name, in_axes, out_axes, devices)(*inputs).
 *
 * `axis_name` names the mapped axis, or several ("i, j") for what nested pmaps did: then each
 * mapped input maps that many consecutive axes starting at its in_axes entry (outer name
 * first), the devices form a mesh of those sizes, and collectives may use any of the names or
 * several at once. fn sees every mapped input with its mapped axes removed (a view: no copy),
 * unmapped inputs (in_axes[i] = SPMD_NONE) whole, and fills outputs of the per-device shapes
 * `out_descs` (rank-reduced); out_axes[j] = k inserts the mapped axes at k (negative counts
 * from the end), SPMD_NONE returns the value once (verified identical, see options).
 *
 * `devices` (may be NULL: all devices in id order, which groups them by process) must hold
 * exactly as many devices as the mapped size. Under several processes the inputs and outputs
 * are host-local, as in JAX: a mapped input holds this process's devices' slices (mapped size =
 * its device count), and each call converts them to and from global arrays (no copy when they
 * already sit on this process's devices as the pmap lays them out). To skip that work, keep
 * arrays global and call spmd_shard_map.
 *
 * A local pmap (JAX's pmap(f, devices=jax.local_devices())): when every device in `devices`
 * belongs to this process, the pmap runs on this process alone, as in one process: the mapped
 * size is the number of devices given, inputs and outputs are plain arrays of these devices,
 * collectives and axis_index span only them, and no other process takes part (each may run
 * its own local pmaps, different ones, as many as it likes). An input spanning other processes
 * is refused (SPMD_ERR_INCOMPATIBLE_DEVICES).
 *
 * Repeated calls with the same signature reuse a cached plan. Collective as spmd_shard_map:
 * over every process that owns one of the devices.
 * @return SPMD_ERR_INVALID_ARGUMENT (nothing mapped, axes out of range, mapped sizes that
 *         differ or do not match the devices), SPMD_ERR_INCOMPATIBLE_DEVICES (strict, an input
 *         in another layout; a local pmap's input spanning processes), and whatever
 *         spmd_shard_map returns.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_pmap(
    spmd_fn fn, void *user, int nin, spmd_array *const *inputs, const int *in_axes, int nout,
    const spmd_out_desc *out_descs, const int *out_axes, const char *axis_name, const int *devices,
    int num_devices, const spmd_pmap_options *options, spmd_array **outputs);

/** Drops the cached pmap plans (they are also dropped by spmd_finalize's next spmd_init). */
SPMD_API void spmd_pmap_clear_cache(void);

SPMD_END_DECLS

#endif /* SPMD_PMAP_H */
