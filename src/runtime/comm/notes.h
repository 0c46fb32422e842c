/* Private: the transport of the notes between processes about their calls (calls.h). It
 * registers itself with calls.c at spmd_init (spmd__calls_set_transport): the waits poll the
 * notes through calls.c. notes_mpi.c over MPI; nothing in a single process (notes_single.c). */
#ifndef SPMD_RUNTIME_NOTES_H
#define SPMD_RUNTIME_NOTES_H

/** Opens the notes at spmd_init (after the private communicator exists); closes at finalize. */
void spmd__notes_open(void);
void spmd__notes_close(void);

#endif /* SPMD_RUNTIME_NOTES_H */
