/* Global arrays: a global shape, a dtype, a sharding and one buffer per addressable device. */
#ifndef SPMD_ARRAY_H
#define SPMD_ARRAY_H

#include <stddef.h>
#include <stdint.h>

#include "spmd/dtype.h"
#include "spmd/export.h"
#include "spmd/sharding.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

/*
 * Host data is always dense and row-major (C order). Every device of the sharding that this
 * process owns holds its own buffer of the shard shape; replicas are separate buffers, as in
 * JAX. Buffers are reference-counted, so arrays built from other arrays may share them.
 * None of the constructors move data between processes: in a multi-process run each process
 * fills the shards of its own devices (spmd_device_put only checks, collectively, that every
 * process passed the same data).
 */
typedef struct spmd_array spmd_array;

/** One addressable shard, as jax.Array.addressable_shards[i] describes it. */
typedef struct spmd_shard {
    int device_id;  /**< global device id */
    int replica_id; /**< see spmd_sharding_replica_id */
    spmd_box index; /**< which part of the global array this shard holds */
    void *data;     /**< device memory of the device's platform (host memory on cpu) */
    size_t nbytes;  /**< bytes of data: product of the shard shape × dtype size */
} spmd_shard;

/**
 * jax.device_put(host, sharding): `host` holds the whole global array, the same on every
 * process; each addressable device receives a copy of its box.
 *
 * When the sharding's mesh holds devices of several processes, it checks, as JAX does, that
 * they all passed the same bytes (bytes, where JAX compares values: -0.0 and 0.0 differ here,
 * and equal NaNs agree): a collective over the processes that own devices of the
 * mesh (each must call it, in the same order as its other collectives; the others need not).
 * It costs one agreement on a digest of the data, O(log P) messages of constant size, and
 * nothing on a mesh of one process's devices. Differing data fails on every process of the
 * mesh with SPMD_ERR_INVALID_ARGUMENT ("... passed to device_put is not the same on each
 * process"), naming the processes whose data differs from the most common. Where processes
 * pass different data on purpose (each device takes its box of its own process's data), set
 * SPMD_CHECK_DEVICE_PUT=0 on every process, or use spmd_array_from_process_local_data.
 * @return SPMD_OK, SPMD_ERR_SHAPE (rank, extent or divisibility; see
 *         spmd_sharding_check_shape), SPMD_ERR_INVALID_ARGUMENT (also for data that differs
 *         between processes, or a bad SPMD_CHECK_DEVICE_PUT), SPMD_ERR_COLLECTIVE_MISMATCH /
 *         SPMD_ERR_TIMEOUT (processes of the mesh made another call, or none within
 *         SPMD_COLLECTIVE_TIMEOUT), SPMD_ERR_OUT_OF_MEMORY, SPMD_ERR_BACKEND.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_device_put(const void *host, int ndim,
                                                    const int64_t *shape, spmd_dtype dtype,
                                                    const spmd_sharding *sharding,
                                                    spmd_array **out);

/**
 * jax.make_array_from_process_local_data: `local` holds only what this process's devices need.
 * Along each dimension its extent is either the global extent (the data is indexed directly)
 * or the number of distinct blocks this process addresses × the shard extent (this process's
 * blocks, in increasing order, packed together).
 * @param global_shape  NULL to infer it: each dimension's local extent ÷ the distinct blocks
 *        this process holds × all blocks of that dimension. In one process it equals the
 *        local shape.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_from_process_local_data(
    const spmd_sharding *sharding, const void *local, int ndim, const int64_t *local_shape,
    const int64_t *global_shape, spmd_dtype dtype, spmd_array **out);

/**
 * jax.make_array_from_single_device_arrays: one single-device array per addressable device of
 * `sharding`, in any order, each holding that device's shard. No data is copied: the new
 * array shares their buffers (the inputs stay valid and owned by the caller). `dtype` is
 * explicit because a process that holds no device of the mesh passes no arrays, yet must
 * describe the same global array as the others.
 * @return SPMD_ERR_INVALID_ARGUMENT (wrong count, a device twice, a device the sharding does
 *         not address, an input with several shards, an input of another dtype),
 *         SPMD_ERR_SHAPE (wrong shard shape).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_from_single_device_arrays(
    int ndim, const int64_t *shape, spmd_dtype dtype, const spmd_sharding *sharding, int num_arrays,
    spmd_array *const *arrays, spmd_array **out);

/**
 * Fills `dst` (a dense row-major host buffer of the box's shape) with the part of the global
 * array that `index` names. Called once per addressable device, possibly from several threads
 * at once. Return SPMD_OK, or an error status that aborts the construction.
 */
typedef spmd_status (*spmd_shard_callback)(const spmd_box *index, void *dst, void *user);

/** jax.make_array_from_callback(shape, sharding, callback). */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_from_callback(int ndim, const int64_t *shape,
                                                             spmd_dtype dtype,
                                                             const spmd_sharding *sharding,
                                                             spmd_shard_callback callback,
                                                             void *user, spmd_array **out);

/**
 * A global array of random numbers (float32, float64 or bfloat16), each element's value that
 * of spmd_op_random for its global index: the same array whatever `sharding`, on every layout
 * of processes and devices. Not collective: each process fills its own devices' shards (as
 * spmd_array_from_callback does). `distribution` is a spmd_random_distribution (spmd/ops.h).
 * @return as spmd_array_from_callback, and as spmd_op_random for the dtype and distribution.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_random(int ndim, const int64_t *shape,
                                                      spmd_dtype dtype,
                                                      const spmd_sharding *sharding, uint64_t seed,
                                                      int distribution, spmd_array **out);

/**
 * A single-device array: `host` (dense, row-major, of `shape`) copied onto global device
 * `device_id`, which must belong to this process. Its sharding is P() over a 0-axis mesh of
 * that one device (JAX's SingleDeviceSharding).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_create_on_device(int device_id, const void *host,
                                                                int ndim, const int64_t *shape,
                                                                spmd_dtype dtype, spmd_array **out);

/** NULL-safe; buffers shared with other arrays stay alive until their last user goes. */
SPMD_API void spmd_array_destroy(spmd_array *array);

/* Queries; not collective. */
SPMD_API int spmd_array_ndim(const spmd_array *array); /**< -1 if NULL */
/** Global shape; borrowed, valid while the array lives. NULL if array is NULL. */
SPMD_API const int64_t *spmd_array_shape(const spmd_array *array);
SPMD_API spmd_dtype spmd_array_dtype(const spmd_array *array); /**< SPMD_DTYPE_COUNT if NULL */
/** Number of elements of the global array; 0 if NULL. */
SPMD_API int64_t spmd_array_size(const spmd_array *array);
/** The sharding; borrowed, valid while the array lives. */
SPMD_API const spmd_sharding *spmd_array_sharding(const spmd_array *array);
/** 1 when every device of the array's mesh belongs to this process. */
SPMD_API int spmd_array_is_fully_addressable(const spmd_array *array);

/** Number of addressable shards (this process's devices of the mesh). */
SPMD_API int spmd_array_num_shards(const spmd_array *array);
/** Describes addressable shard i, in mesh flat order. The data pointer is borrowed. */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_shard(const spmd_array *array, int i,
                                                     spmd_shard *shard);
/** Copies addressable shard i to host memory `dst` of `dst_bytes` (≥ the shard's nbytes). */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_shard_to_host(const spmd_array *array, int i,
                                                             void *dst, size_t dst_bytes);

/**
 * Addressable shard i as a single-device array of `shape` (as many elements as the shard; ndim
 * < 0: the shard's own shape) over the same buffer: no copy (JAX's addressable_shards[i].data,
 * with a reshape).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_shard_view(const spmd_array *array, int i, int ndim,
                                                          const int64_t *shape, spmd_array **out);

/**
 * Records that every slice of the array along axis 0 holds the same value (what
 * device_put_replicated produces); a hint kept with the array, not verified.
 */
SPMD_API void spmd_array_mark_stacked_replicas(spmd_array *array);
/** 1 when spmd_array_mark_stacked_replicas was called on the array. */
SPMD_API int spmd_array_has_stacked_replicas(const spmd_array *array);

/**
 * np.asarray(x): copies the whole global array into `dst` (dense, row-major, `dst_bytes` ≥ the
 * array's bytes), taking each block from the first local device that holds it. Not collective.
 * @return SPMD_ERR_NOT_ADDRESSABLE when this process's devices do not hold every block (the
 *         message names a missing block and its owner, and points to spmd_process_allgather
 *         and spmd_array_shard); SPMD_ERR_INVALID_ARGUMENT when dst is too small.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_array_to_host(const spmd_array *array, void *dst,
                                                       size_t dst_bytes);

SPMD_END_DECLS

#endif /* SPMD_ARRAY_H */
