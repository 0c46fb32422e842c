/* Private: the runtime as the layers above it see it: the published start-up and the backend
 * of each device. */
#ifndef SPMD_RUNTIME_IMPL_H
#define SPMD_RUNTIME_IMPL_H

#include <spmd/runtime.h>

#include "runtime/devices/backend/backend.h"
#include "runtime/base/session.h"

/** spmd_init and spmd_init_mpi: `user_comm` points to the caller's MPI_Comm, or is NULL. */
spmd_status spmd__runtime_init(const spmd_init_options *opts, const void *user_comm);

/** Backend of global device `id` (all devices of a run share one platform). */
static inline const spmd__backend *spmd__device_backend(const spmd__runtime *rt, int id)
{
    (void)id;
    return rt->backend;
}

#endif /* SPMD_RUNTIME_IMPL_H */
