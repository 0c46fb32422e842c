/* Private: device memory for buffers, with freed blocks kept for reuse until spmd_finalize. */
#ifndef SPMD_MEMORY_POOL_H
#define SPMD_MEMORY_POOL_H

#include <stddef.h>

#include <spmd/status.h>

#include "runtime/devices/backend/backend.h"

/**
 * spmd_init: up to `limit_bytes` ($SPMD_BUFFER_POOL_MB) of freed memory of the process's
 * `num_devices` devices (global ids from `first_device`) is kept from now on.
 */
void spmd__memory_pool_open(size_t limit_bytes, int first_device, int num_devices);

/**
 * `nbytes` on local device `device_id` (its global id; hardware ordinal `hw` of `backend`): a
 * kept block of that device and size, else fresh memory from the backend.
 */
spmd_status spmd__memory_alloc(const spmd__backend *backend, int device_id, int hw, size_t nbytes,
                               void **data);

/** Gives back memory from spmd__memory_alloc: kept for reuse, or freed. */
void spmd__memory_release(const spmd__backend *backend, int device_id, int hw, void *data,
                          size_t nbytes);

/** spmd_finalize: frees the memory kept for reuse; later releases free directly. */
void spmd__memory_pool_drain(void);

#endif /* SPMD_MEMORY_POOL_H */
