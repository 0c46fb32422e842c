/*
 * Private: the running start-up of libspmd as every layer reads it: its processes, its global
 * device table and its number. spmd_init builds it (runtime.c) and publishes it here; this file
 * holds no threads, MPI or backends, so the sharding math links it with the error and dtype
 * basics alone.
 */
#ifndef SPMD_SESSION_H
#define SPMD_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include <spmd/runtime.h>

struct spmd__backend;

typedef struct spmd__runtime {
    int process_index;
    int process_count;
    spmd_platform platform;
    const struct spmd__backend *backend; /* runtime_impl.h reads it */
    int num_devices;                     /* global */
    spmd_device_info *devices;           /* indexed by global id */
    int num_local;
    int usable_cores;              /* spmd__usable_cores() at start-up */
    int first_local;               /* global id of local ordinal 0: ids are process-major */
    unsigned session;              /* bumped by every start-up; meshes remember theirs */
    int64_t collective_timeout_ns; /* $SPMD_COLLECTIVE_TIMEOUT */
    int64_t init_timeout_ns;       /* $SPMD_INIT_TIMEOUT: spmd_init's wait for the others */
    size_t buffer_pool_bytes;      /* $SPMD_BUFFER_POOL_MB: freed device memory kept for reuse */
    int blas_threads;              /* $SPMD_BLAS_THREADS: threads of each BLAS call */
    int huge_pages;                /* $SPMD_HUGE_PAGES: large CPU buffers ask for huge pages */
    int machine_shared;            /* another process of the run is on this machine */
    int strict_replication;        /* $SPMD_STRICT_REPLICATION: hash every replicated block */
    int host_rings; /* $SPMD_SHM: shared-memory rings on one machine; | SPMD__RINGS_DIRECT:
                       $SPMD_CMA, reads straight from a peer's memory (host_rings.h) */
    size_t cuda_kernel_min_bytes; /* $SPMD_CUDA_KERNEL_MIN_BYTES: smallest block op kernel */
} spmd__runtime;

/** The runtime, or NULL (with an error naming `fn`) when libspmd is not initialized. */
const spmd__runtime *spmd__runtime_get(const char *fn);

/**
 * The runtime, or NULL (with an error naming `fn`) when libspmd is not initialized or when
 * `session` is not the current start-up (the object was built before an spmd_finalize).
 */
const spmd__runtime *spmd__runtime_get_session(const char *fn, unsigned session);

/** spmd_init's last step: `rt` (copied) becomes what every reader sees. */
void spmd__runtime_publish(const spmd__runtime *rt);
/**
 * spmd_finalize's first step: readers see an uninitialized libspmd again (a call under way may
 * still read the table while the workers stop).
 */
void spmd__runtime_retract(void);
/** spmd_finalize's last step, once nothing reads the table: it is zeroed. */
void spmd__runtime_clear(void);

#endif /* SPMD_SESSION_H */
