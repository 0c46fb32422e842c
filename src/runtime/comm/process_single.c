/* The process layer of a build without MPI: always one process. */
#include <stdint.h>

#include <spmd/runtime.h>

#include "runtime/base/check.h"
#include "runtime/base/env.h"
#include "runtime/comm/process.h"

spmd_status spmd__proc_init(int use_mpi, const void *user_comm, int *index, int *count)
{
    (void)user_comm;
    SPMD_REQUIRE(use_mpi != 1, SPMD_ERR_UNSUPPORTED,
                 "spmd_init: use_mpi=1 but libspmd was built without MPI; reconfigure with "
                 "-DSPMD_ENABLE_MPI=ON (needs libopenmpi-dev)");
    const char *launcher = NULL;
    int launched = spmd__launcher_process_count(&launcher);
    SPMD_REQUIRE(use_mpi == 0 || launched <= 1, SPMD_ERR_UNSUPPORTED,
                 "spmd_init: started by %s as one of %d processes, but libspmd was built without "
                 "MPI; reconfigure with -DSPMD_ENABLE_MPI=ON, or run a single process",
                 launcher, launched);
    *index = 0;
    *count = 1;
    return SPMD_OK;
}

spmd_status spmd__proc_finalize(int keep_comm)
{
    (void)keep_comm;
    return SPMD_OK;
}

spmd_status spmd__proc_go_private(int64_t timeout_ns, int *fresh)
{
    (void)timeout_ns;
    *fresh = 0;
    return SPMD_OK;
}

spmd_status spmd__proc_link_hosts(const uint64_t *hosts, uint64_t job, int want, int64_t timeout_ns,
                                  int *machine_cores)
{
    (void)hosts, (void)job, (void)want, (void)timeout_ns;
    *machine_cores = 0;
    return SPMD_OK;
}

uint64_t spmd__proc_host_id(void) { return 0; }

void spmd__proc_abandon(void) {}

int spmd__mpi_thread_multiple(void) { return 1; }
