/* Replacements for legacy device_put_sharded / device_put_replicated and a safe unreplicate,
 * written on the public array, shard_map and multihost API (DESIGN.md §6). */
#ifndef SPMD_COMPAT_H
#define SPMD_COMPAT_H

#include <stddef.h>
#include <stdint.h>

#include "spmd/array.h"
#include "spmd/export.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

/** The one axis of the mesh that spmd_device_put_sharded's result lies on (JAX's name). */
#define SPMD_DEVICE_PUT_SHARDED_AXIS "_device_put_sharded"
/** ... and spmd_device_put_replicated's. */
#define SPMD_DEVICE_PUT_REPLICATED_AXIS "_device_put_replicated"

/**
 * jax.device_put_sharded: an array of shape (n,)+shape whose slice i is host_shards[i], sharded
 * over a 1-D mesh (axis SPMD_DEVICE_PUT_SHARDED_AXIS, as in JAX) of devices[0..n) in that order.
 * Each device's shard is written straight from the caller's buffer: no stacked host copy. Under
 * several processes every process passes the same devices and its own devices' buffers (entries of
 * other processes' devices are not read and may be NULL). Not collective.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_device_put_sharded(int n, const void *const *host_shards,
                                                            int ndim, const int64_t *shape,
                                                            spmd_dtype dtype, const int *devices,
                                                            spmd_array **out);
/**
 * jax.device_put_replicated: (n,)+shape with `host` in every slice, on devices[0..n) as above,
 * each device's shard written from `host` (host memory: the caller's copy only); the mesh axis
 * is SPMD_DEVICE_PUT_REPLICATED_AXIS, as in JAX. The result is
 * marked as stacked replicas (spmd_array_has_stacked_replicas).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_device_put_replicated(const void *host, int ndim,
                                                               const int64_t *shape,
                                                               spmd_dtype dtype, const int *devices,
                                                               int n, spmd_array **out);
/**
 * The legacy `x[0]` of a stacked-replica array, safely: this process's first addressable
 * shard without its leading axis, as an array on that shard's device sharing its buffer. No
 * communication and no copy, whatever the number of devices. Each shard must hold one whole
 * slice along axis 0 (the stacked layout); the result is the value of that slice, which equals
 * slice 0 when the slices are replicas.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_unreplicate(const spmd_array *x, spmd_array **out);
/** As spmd_unreplicate, copied into host memory `dst` (dense, `dst_bytes` ≥ one slice). */
SPMD_API SPMD_NODISCARD spmd_status spmd_unreplicate_to_host(const spmd_array *x, void *dst,
                                                             size_t dst_bytes);
/**
 * The opposite direction: x (whose whole value this process holds) stacked n times onto
 * devices[0..n), as spmd_device_put_replicated of its value.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_replicate(const spmd_array *x, const int *devices, int n,
                                                   spmd_array **out);

SPMD_END_DECLS

#endif /* SPMD_COMPAT_H */
