/* MPI entry points; installed only when libspmd is built with MPI. Includes <mpi.h>. */
#ifndef SPMD_MPI_H
#define SPMD_MPI_H

#include <mpi.h>

#include "spmd/runtime.h"

SPMD_BEGIN_DECLS

/**
 * spmd_init over the processes of `comm` instead of MPI_COMM_WORLD. MPI must already be
 * initialized by the caller with MPI_THREAD_MULTIPLE (concurrent collectives) or
 * MPI_THREAD_SERIALIZED (libspmd then serializes its MPI calls); below that, since libspmd
 * calls MPI from its device threads, it refuses with SPMD_ERR_UNSUPPORTED (so does spmd_init
 * adopting such an MPI). libspmd duplicates `comm`, so the caller may free its handle; process
 * indices are ranks in `comm`. Before the duplicate exists, the start-up check that every
 * process is there runs on `comm` itself (tags near MPI_TAG_UB, its error handler set to
 * MPI_ERRORS_RETURN meanwhile and restored after).
 * Collective over: every process of `comm`.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_init_mpi(MPI_Comm comm, const spmd_init_options *opts);

/** The communicator libspmd runs on (its private duplicate); MPI_COMM_NULL without MPI. */
SPMD_API MPI_Comm spmd_mpi_comm(void);

SPMD_END_DECLS

#endif /* SPMD_MPI_H */
