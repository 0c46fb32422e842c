/*
 * ThreadSanitizer builds only (SPMD_SANITIZE=thread; the linker's --wrap sends libspmd's calls
 * of these MPI routines here): the memory accesses Open MPI makes inside them go untracked.
 *
 * Under MPI_THREAD_MULTIPLE, Open MPI's progress engine runs in whichever thread is inside MPI:
 * one device thread's MPI_Test may copy a message into the receive buffer of another thread's
 * request, and the completion that orders that copy before the owner's read is Open MPI's own
 * (uninstrumented atomics). TSan then sees two unordered accesses, and as the copying thread
 * keeps polling, the copy's stack is often gone from its history by the time of the read, so no
 * suppression can name Open MPI (tests/sanitizers/tsan.supp). Only the accesses within these
 * calls are left out: libspmd's own, everywhere else, and all synchronization stay tracked.
 * The cost: a misuse of a buffer that MPI reads or writes inside one of these calls (a send
 * buffer changed, or a receive buffer read, before the request completed) goes unseen too.
 * Every routine libspmd calls that may run the progress engine is here, the blocking and
 * nonblocking collectives and communicator calls included.
 */
#include <mpi.h>

void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);

static int untracked_end(int rc)
{
    __tsan_ignore_thread_end();
    return rc;
}

/* The wrapper of MPI routine `name`: the real one (the linker's __real_) between the two. */
#define UNTRACKED(name, params, args)                                                              \
    int __real_##name params;                                                                      \
    int __wrap_##name params;                                                                      \
    int __wrap_##name params                                                                       \
    {                                                                                              \
        return __tsan_ignore_thread_begin(), untracked_end(__real_##name args);                    \
    }

UNTRACKED(MPI_Test, (MPI_Request * r, int *flag, MPI_Status *s), (r, flag, s))
UNTRACKED(MPI_Testall, (int n, MPI_Request *r, int *flag, MPI_Status *s), (n, r, flag, s))
UNTRACKED(MPI_Testsome, (int n, MPI_Request *r, int *out, int *idx, MPI_Status *s),
          (n, r, out, idx, s))
UNTRACKED(MPI_Wait, (MPI_Request * r, MPI_Status *s), (r, s))
UNTRACKED(MPI_Request_get_status, (MPI_Request r, int *flag, MPI_Status *s), (r, flag, s))
UNTRACKED(MPI_Cancel, (MPI_Request * r), (r))
UNTRACKED(MPI_Improbe, (int src, int tag, MPI_Comm c, int *flag, MPI_Message *m, MPI_Status *s),
          (src, tag, c, flag, m, s))
UNTRACKED(MPI_Imrecv, (void *buf, int n, MPI_Datatype t, MPI_Message *m, MPI_Request *r),
          (buf, n, t, m, r))
UNTRACKED(MPI_Mrecv, (void *buf, int n, MPI_Datatype t, MPI_Message *m, MPI_Status *s),
          (buf, n, t, m, s))
UNTRACKED(MPI_Irecv,
          (void *buf, int n, MPI_Datatype t, int src, int tag, MPI_Comm c, MPI_Request *r),
          (buf, n, t, src, tag, c, r))
UNTRACKED(MPI_Isend,
          (const void *buf, int n, MPI_Datatype t, int dst, int tag, MPI_Comm c, MPI_Request *r),
          (buf, n, t, dst, tag, c, r))
UNTRACKED(MPI_Request_free, (MPI_Request * r), (r))
UNTRACKED(MPI_Ibarrier, (MPI_Comm c, MPI_Request *r), (c, r))
UNTRACKED(MPI_Ibcast, (void *buf, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request *r),
          (buf, n, t, root, c, r))
UNTRACKED(MPI_Iallgatherv,
          (const void *sbuf, int sn, MPI_Datatype st, void *rbuf, const int rn[], const int at[],
           MPI_Datatype rt, MPI_Comm c, MPI_Request *r),
          (sbuf, sn, st, rbuf, rn, at, rt, c, r))
UNTRACKED(MPI_Igatherv,
          (const void *sbuf, int sn, MPI_Datatype st, void *rbuf, const int rn[], const int at[],
           MPI_Datatype rt, int root, MPI_Comm c, MPI_Request *r),
          (sbuf, sn, st, rbuf, rn, at, rt, root, c, r))
UNTRACKED(MPI_Comm_idup, (MPI_Comm c, MPI_Comm *out, MPI_Request *r), (c, out, r))
UNTRACKED(MPI_Comm_create_group, (MPI_Comm c, MPI_Group g, int tag, MPI_Comm *out),
          (c, g, tag, out))
UNTRACKED(MPI_Comm_free, (MPI_Comm * c), (c))
