/* Private: the process-wide runtime state, immutable between spmd_init and spmd_finalize. */
#ifndef SPMD_RUNTIME_IMPL_H
#define SPMD_RUNTIME_IMPL_H

#include <spmd/runtime.h>

#include "runtime/backend/backend.h"

typedef struct spmd__runtime {
    int process_index;
    int process_count;
    spmd_platform platform;
    const spmd__backend *backend;
    int num_devices;           /* global */
    spmd_device_info *devices; /* indexed by global id */
    int num_local;
    int first_local;               /* global id of local ordinal 0: ids are process-major */
    unsigned session;              /* bumped by every start-up; meshes remember theirs */
    int64_t collective_timeout_ns; /* $SPMD_COLLECTIVE_TIMEOUT */
    size_t buffer_pool_bytes;      /* $SPMD_BUFFER_POOL_MB: freed device memory kept for reuse */
} spmd__runtime;

/** The runtime, or NULL (with an error naming `fn`) when libspmd is not initialized. */
const spmd__runtime *spmd__runtime_get(const char *fn);

/**
 * The runtime, or NULL (with an error naming `fn`) when libspmd is not initialized or when
 * `session` is not the current start-up (the object was built before an spmd_finalize).
 */
const spmd__runtime *spmd__runtime_get_session(const char *fn, unsigned session);

/** spmd_init and spmd_init_mpi: `user_comm` points to the caller's MPI_Comm, or is NULL. */
spmd_status spmd__runtime_init(const spmd_init_options *opts, const void *user_comm);

/** Backend of global device `id` (all devices of a run share one platform). */
static inline const spmd__backend *spmd__device_backend(const spmd__runtime *rt, int id)
{
    (void)id;
    return rt->backend;
}

#endif /* SPMD_RUNTIME_IMPL_H */
