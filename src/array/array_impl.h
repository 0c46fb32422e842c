/* Private: the global array structure. */
#ifndef SPMD_ARRAY_IMPL_H
#define SPMD_ARRAY_IMPL_H

#include <stdint.h>

#include <spmd/array.h>
#include <spmd/reshard.h>

#include "array/buffer.h"

typedef struct spmd__shard_slot {
    int device_id;
    int flat;    /* mesh position */
    int ordinal; /* local ordinal of the device (its worker) */
    int replica_id;
    spmd_box index;
    spmd__buffer *buffer;
} spmd__shard_slot;

struct spmd_array {
    uint32_t magic;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int64_t shard_shape[SPMD_MAX_RANK];
    spmd_dtype dtype;
    size_t shard_bytes;
    spmd_sharding *sharding;
    int num_shards; /* addressable devices, mesh flat order */
    spmd__shard_slot *shards;
    int deleted;            /* donated: its buffers now belong to another array */
    const char *deleted_by; /* the function it was donated to (a literal) */
    int stacked_replicas;   /* every slice along axis 0 holds the same value */
};

/** Index of the shard of global device `device_id`, or -1. */
int spmd__array_shard_of_device(const spmd_array *a, int device_id);

/** Gives up the array's buffers (donation): later uses fail with a clear message. */
void spmd__array_mark_deleted(spmd_array *a, const char *by);
/** Keeps the buffers of a's shards until the process ends (NULL-safe): an MPI operation that
 * was given up on may still read or write them. */
void spmd__array_keep_buffers(const spmd_array *a);

spmd_status spmd__array_check(const spmd_array *a, const char *fn, const char *arg);

/**
 * Creates an array of `shape` and `dtype` on `sharding` with its shard table filled and no
 * buffers yet (`fn` names the caller in messages).
 */
spmd_status spmd__array_create_empty(const spmd_sharding *sharding, int ndim, const int64_t *shape,
                                     spmd_dtype dtype, const char *fn, spmd_array **out);

typedef spmd_status (*spmd__shard_fn)(spmd_array *a, spmd__shard_slot *s, void *arg);

/** Runs fn on the listed shards (NULL: all), each on its own device's worker, concurrently;
 * `what` names the public call. */
spmd_status spmd__array_for_shards(const char *what, spmd_array *a, const int *which, int count,
                                   spmd__shard_fn fn, void *arg);

/** Allocates every shard's buffer, each on its device's worker. */
spmd_status spmd__array_alloc_buffers(const char *what, spmd_array *a);

/**
 * spmd_reshard's data movement (the public function, in shard_map/, first adds up the partial
 * sums of an unreduced source); an unreduced source or destination must keep its placement.
 */
spmd_status spmd__reshard(spmd_array *x, const spmd_sharding *new_sharding,
                          const spmd_reshard_options *options, spmd_array **out);

/** spmd_array_from_callback, its messages naming `fn`. */
spmd_status spmd__array_from_callback(const char *fn, int ndim, const int64_t *shape,
                                      spmd_dtype dtype, const spmd_sharding *sharding,
                                      spmd_shard_callback callback, void *user, spmd_array **out);

#endif /* SPMD_ARRAY_IMPL_H */
