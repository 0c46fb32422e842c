/* Multi-process utilities: the shapes of host-local and global arrays, conversions between them
 * and the collectives over processes (DESIGN.md §6). */
#ifndef SPMD_MULTIHOST_H
#define SPMD_MULTIHOST_H

#include <stdint.h>

#include "spmd/array.h"
#include "spmd/export.h"
#include "spmd/mesh.h"
#include "spmd/spec.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

/**
 * Global shape of an array whose host-local part on this process has shape `local_shape`,
 * under `spec` on `mesh`: a dimension mapped to axes A grows by prod(global sizes of A) /
 * prod(this process's local sizes of A) (so it concatenates the processes' parts along the
 * axes that span processes); unmapped dimensions are unchanged. Not collective.
 * @return SPMD_OK; SPMD_ERR_SPEC for an axis the mesh lacks or a spec longer than ndim;
 *         SPMD_ERR_SHAPE when a local dimension is not divisible by its local axis sizes;
 *         SPMD_ERR_INVALID_ARGUMENT for NULL arguments, a non-contiguous mesh (each process's
 *         devices must form a subcube; the message names the process) or no local device.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_local_to_global_shape(const spmd_mesh *mesh,
                                                               const spmd_spec *spec, int ndim,
                                                               const int64_t *local_shape,
                                                               int64_t *global_shape);

/** The inverse of spmd_local_to_global_shape: this process's part of a global shape. */
SPMD_API SPMD_NODISCARD spmd_status spmd_global_to_local_shape(const spmd_mesh *mesh,
                                                               const spmd_spec *spec, int ndim,
                                                               const int64_t *global_shape,
                                                               int64_t *local_shape);

/**
 * jax.experimental.multihost_utils.host_local_array_to_global_array: `local` holds this
 * process's part (its subcube's part under NamedSharding(mesh, spec)); the result is the global
 * array on `mesh` with `spec`, of shape spmd_local_to_global_shape. No communication. When
 * `local` already lies on this process's devices as NamedSharding(local mesh, spec) — the local
 * mesh has the mesh's axis names and this process's sizes — the result shares its buffers;
 * otherwise its value is copied once. With SPMD_CHECK_REPLICATED_INPUTS=1 (collective then)
 * processes whose parts coincide (the spec leaves out an axis that spans processes) must pass
 * equal data: else SPMD_ERR_INVALID_ARGUMENT naming both processes.
 *
 * An array that spans processes (not fully addressable) is already global: as in JAX, it is
 * returned unchanged — a new handle over the same buffers, with its own sharding and shape,
 * whatever its layout (spmd_reshard it if another is needed). So feeding a conversion's
 * result back in is harmless. In one process every array is fully addressable, and one laid
 * out as NamedSharding(mesh, spec) comes back over the same buffers by the rule above.
 * @return as spmd_local_to_global_shape; for an array that spans processes, SPMD_ERR_SPEC or
 *         SPMD_ERR_INVALID_ARGUMENT when `spec` does not fit `mesh` or is longer than the rank.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_host_local_to_global(const spmd_array *local,
                                                              spmd_mesh *mesh,
                                                              const spmd_spec *spec,
                                                              spmd_array **global);
/**
 * global_array_to_host_local_array: this process's part of `global`, laid out as
 * NamedSharding(local mesh, spec), of shape spmd_global_to_local_shape.
 *
 * - `global` laid out as NamedSharding(mesh, spec): the result shares its buffers (no copy, no
 *   communication).
 * - `global` spanning processes in another layout: it is first resharded to
 *   NamedSharding(mesh, spec) (spmd_reshard into a new array; `global` itself is left as it
 *   is), as JAX's device_put does. Collective when the layout differs: every process of the
 *   mesh (and of `global`'s mesh) must call it, in the same order as its other collectives.
 * - `global` fully addressable (on this process's devices only, e.g. every array in one
 *   process): returned unchanged, as in JAX — a new handle over the same buffers, with its own
 *   sharding and shape.
 * @return as spmd_global_to_local_shape, and spmd_reshard's statuses when it reshards.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_global_to_host_local(const spmd_array *global,
                                                              spmd_mesh *mesh,
                                                              const spmd_spec *spec,
                                                              spmd_array **local);

/*
 * Collectives over every process of the run, in the same order everywhere. Each first checks,
 * within SPMD_COLLECTIVE_TIMEOUT, that every process is making the same call with the same
 * shapes: a mismatch returns SPMD_ERR_COLLECTIVE_MISMATCH on every process, quoting both calls;
 * a process that never arrives, SPMD_ERR_TIMEOUT naming it. In one process they move nothing.
 */

/**
 * Shape of spmd_process_allgather's result: for an array on this process's devices only (a
 * host-local value x_p), stacked (P,)+shape or, with tiled, the values concatenated on axis 0
 * (a scalar is stacked either way) — the same rule with P = 1 in one process; for an array
 * spanning processes, its global shape (tiled must be set).
 *
 * Which rule applies is JAX's is_fully_addressable, so it follows the layout: an array on a
 * mesh over devices 0..3 is host-local at 1 x 8 and at 2 x 4 on process 0, and global at 4 x 2
 * and on the processes that hold none of it (they take part with the same array with no shards,
 * from spmd_device_put, spmd_shard_map or spmd_array_from_single_device_arrays). Every process
 * of a gather must apply the same rule: where one process holds the whole mesh and others none
 * of it (2 x 4 above), the gather fails at once on every process, the message quoting both; take
 * the value from its process with spmd_broadcast_array_one_to_all instead.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_process_allgather_shape(const spmd_array *x, int tiled,
                                                                 int *ndim, int64_t *shape);
/**
 * Every process's value of x, gathered on every process's host into `host_out` (dense,
 * row-major, `host_bytes` at least the result's size). Host memory: the result only (each
 * process's value is read into its slot and gathered in place); never a copy per device.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_process_allgather(const spmd_array *x, int tiled,
                                                           void *host_out, size_t host_bytes);
/** As spmd_process_allgather, to process `root` only (host_out is unused elsewhere). */
SPMD_API SPMD_NODISCARD spmd_status spmd_process_gather(const spmd_array *x, int root, int tiled,
                                                        void *host_out, size_t host_bytes);
/**
 * Replaces `buffer` on every process with process `source`'s bytes: a broadcast, not a sum, so
 * -0.0 and NaN payloads arrive as sent. `bytes` must be the same everywhere.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_broadcast_one_to_all(void *buffer, size_t bytes,
                                                              int source);
/**
 * The array form: process `source`'s value of x (it must hold all of it) into every process's
 * `host_out` (`host_bytes` at least x's size); x's shape and dtype must match everywhere.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_broadcast_array_one_to_all(const spmd_array *x, int source,
                                                                    void *host_out,
                                                                    size_t host_bytes);
/**
 * A barrier: returns once every process has called it with the same `name`. Different names
 * give SPMD_ERR_COLLECTIVE_MISMATCH on every process, the message quoting both.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_sync_global_devices(const char *name);
/**
 * Checks that x has the same value on every process (the first addressable shard for an array
 * that spans processes). When it does not, every process returns SPMD_ERR_INVALID_ARGUMENT,
 * the message starting with `message` and naming a differing process, element and values.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_assert_equal(const spmd_array *x, const char *message);

SPMD_END_DECLS

#endif /* SPMD_MULTIHOST_H */
