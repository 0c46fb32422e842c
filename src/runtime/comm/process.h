/* Private: the process layer (MPI, or a single process when built without MPI). */
#ifndef SPMD_RUNTIME_PROCESS_H
#define SPMD_RUNTIME_PROCESS_H

#include <stddef.h>
#include <stdint.h>

#include <spmd/status.h>

/**
 * Joins the process group. `use_mpi` is the spmd_init_options value (1, 0 or SPMD_AUTO);
 * `user_comm` points to an MPI_Comm given to spmd_init_mpi, else NULL. Until
 * spmd__proc_go_private, spmd_mpi_comm() is the chosen communicator itself (no collective call
 * has waited for the others yet), for an agreement over a view (comm.h) with a deadline.
 */
spmd_status spmd__proc_init(int use_mpi, const void *user_comm, int *index, int *count);
/** Moves to a private duplicate of the chosen communicator, once every process is known to be
 * there; waits at most timeout_ns (the start-up timeout, SPMD_INIT_TIMEOUT). Collective. *fresh:
 * 1 when it made a new communicator (the communicators over it are counted afresh:
 * spmd__comm_restart_wires). */
spmd_status spmd__proc_go_private(int64_t timeout_ns, int *fresh);
/** In spmd__proc_link_hosts' `want`, beside 1 (rings): a process may read a peer's memory
 * straight (host_rings.h, spmd__ring_read_direct) where the system lets it. */
#define SPMD__RINGS_DIRECT 2
/**
 * Links the processes that share a machine (hosts[p] alike), once every process went private:
 * the control plane's shared-memory rings (host_rings.h) when `want` & 1, named after `job` (the
 * same on every process, new at each start-up). Collective, bounded by timeout_ns.
 * *machine_cores: the cores the processes of this machine may use between them (0: unknown).
 */
spmd_status spmd__proc_link_hosts(const uint64_t *hosts, uint64_t job, int want, int64_t timeout_ns,
                                  int *machine_cores);
/** Leaves the process group (finalizing MPI when spmd_init initialized it). `keep_comm`: what
 * other processes sent may still come, so the private communicator is left, not freed (Open MPI
 * gives a freed communicator's context id to the next one created, with what still comes for
 * it: a later spmd_init's would take it). */
spmd_status spmd__proc_finalize(int keep_comm);
/** After a start-up that a missing process failed: lets go of MPI without waiting for it (no
 * MPI_Finalize, which would); the process should end. */
void spmd__proc_abandon(void);
/** A number that processes on the same machine share (0 without MPI). */
uint64_t spmd__proc_host_id(void);

/** 1 when MPI runs with MPI_THREAD_MULTIPLE (device threads may call it at once). */
int spmd__mpi_thread_multiple(void);

#endif /* SPMD_RUNTIME_PROCESS_H */
