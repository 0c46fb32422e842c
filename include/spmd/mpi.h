/* MPI entry points; installed only when libspmd is built with MPI. Includes <mpi.h>. */
#ifndef SPMD_MPI_H
#define SPMD_MPI_H

#include <mpi.h>

#include "spmd/runtime.h"

SPMD_BEGIN_DECLS

/**
 * spmd_init over the processes of `comm` instead of MPI_COMM_WORLD. MPI must already be
 * initialized by the caller (with MPI_THREAD_MULTIPLE for concurrent collectives; a lower level
 * makes libspmd serialize its MPI calls). libspmd duplicates `comm`, so the caller may free its
 * handle; process indices are ranks in `comm`.
 * Collective over: every process of `comm`.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_init_mpi(MPI_Comm comm, const spmd_init_options *opts);

/** The communicator libspmd runs on (its private duplicate); MPI_COMM_NULL without MPI. */
SPMD_API MPI_Comm spmd_mpi_comm(void);

SPMD_END_DECLS

#endif /* SPMD_MPI_H */
