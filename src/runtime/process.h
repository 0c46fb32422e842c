/* Private: the process layer (MPI, or a single process when built without MPI). */
#ifndef SPMD_RUNTIME_PROCESS_H
#define SPMD_RUNTIME_PROCESS_H

#include <stddef.h>

#include <spmd/status.h>

/**
 * Joins the process group. `use_mpi` is the spmd_init_options value (1, 0 or SPMD_AUTO);
 * `user_comm` points to an MPI_Comm given to spmd_init_mpi, else NULL.
 */
spmd_status spmd__proc_init(int use_mpi, const void *user_comm, int *index, int *count);
spmd_status spmd__proc_finalize(void);
/** Gathers `bytes` from every process into recv (process order). Collective. */
spmd_status spmd__proc_allgather(const void *send, void *recv, size_t bytes);
/** Number of processes of the group on this machine (1 without MPI). */
int spmd__proc_node_count(void);

/** 1 when MPI runs with MPI_THREAD_MULTIPLE (device threads may call it at once). */
int spmd__mpi_thread_multiple(void);

/** Process count announced by a launcher (mpirun, srun, hydra) in the environment; 0 if none. */
int spmd__launcher_process_count(const char **launcher);

#endif /* SPMD_RUNTIME_PROCESS_H */
