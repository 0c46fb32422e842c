/* Private to the MPI process layer: MPI's error codes as libspmd's status and message. */
#ifndef SPMD_RUNTIME_MPI_FAILURE_H
#define SPMD_RUNTIME_MPI_FAILURE_H

#include <spmd/status.h>

/** SPMD_ERR_DISTRIBUTED, the message "<what> failed: <MPI's text for rc>". */
spmd_status spmd__mpi_failure(int rc, const char *what);

#endif
