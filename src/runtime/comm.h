/* Private: communicators between processes, for the collectives of shard_map. Everything that
 * touches MPI lives in comm_mpi.c; without MPI (comm_single.c) only one process exists and
 * nothing here is ever needed across processes. */
#ifndef SPMD_RUNTIME_COMM_H
#define SPMD_RUNTIME_COMM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <spmd/dtype.h>
#include <spmd/sharding.h>
#include <spmd/status.h>

#include "runtime/reduce_op.h"

typedef struct spmd__comm spmd__comm;

/** How a wait ends early: at `deadline_ns` (CLOCK_MONOTONIC), or when `cancelled` says so. */
typedef struct spmd__wait {
    int64_t deadline_ns;
    /** Returns an error status to stop waiting (its message already recorded), else SPMD_OK. */
    spmd_status (*cancelled)(void *arg);
    void *arg;
    const char *what;    /**< the operation, for the timeout message */
    unsigned long epoch; /**< the shard_map call this wait belongs to (for abort notices) */
    /** set once the call failed (read under the leader's gather lock; may be NULL) */
    const atomic_int *aborted;
    int remote_failure; /**< out: the wait ended because another process's call failed */
} spmd__wait;

/** Monotonic clock in nanoseconds. */
int64_t spmd__now_ns(void);

/**
 * A communicator over `processes` (ascending runtime process indices, this one included);
 * rank r is processes[r]. Collective over exactly those processes; `tag` must differ between
 * creations that may run at the same time over overlapping sets.
 */
spmd_status spmd__comm_create(const int *processes, int n, int tag, spmd__comm **out);
/**
 * A view of the runtime's communicator restricted to `processes` (ascending, this one
 * included), for the waits below before any communicator exists: it makes no MPI call, so it
 * cannot hang, and its messages use tags reserved for mesh set-up (one set-up at a time).
 */
spmd_status spmd__comm_view(const int *processes, int n, spmd__comm **out);
/** Frees a communicator with no operation pending. NULL-safe. */
void spmd__comm_destroy(spmd__comm *c);
/**
 * Drops a communicator that a failed collective may have left with operations pending: it is
 * never used or freed again (MPI cannot cancel a collective).
 */
void spmd__comm_abandon(spmd__comm *c);
/**
 * Keeps a heap block alive and reachable until the process ends, instead of freeing it: an
 * abandoned operation may still read or write it.
 */
void spmd__comm_keep(void *block);
int spmd__comm_rank(const spmd__comm *c);
int spmd__comm_size(const spmd__comm *c);

/**
 * Checks that every rank passes the same fingerprint of the collective it is about to run:
 * SPMD_ERR_COLLECTIVE_MISMATCH quotes two differing `description`s; a rank that never arrives
 * gives SPMD_ERR_TIMEOUT naming the missing processes (or the cancellation status).
 */
spmd_status spmd__comm_agree(spmd__comm *c, uint64_t fingerprint, const char *description,
                             spmd__wait *w);
/**
 * Gathers `bytes` from every rank into recv (rank order), waiting as `w` allows; a timeout
 * names the processes that did not arrive, on every rank that did.
 */
spmd_status spmd__comm_allgather_wait(spmd__comm *c, const void *send, size_t bytes, void *recv,
                                      spmd__wait *w);

/* Data movement, used once every rank is known to be in the same collective. Each waits at
 * most the collective timeout (spmd__comm_set_timeout): a rank that stops in the middle makes
 * it SPMD_ERR_TIMEOUT; the communicator must then be abandoned (MPI may still use the
 * buffers). */
/** The timeout of the data movement below (the runtime's collective timeout). */
void spmd__comm_set_timeout(int64_t timeout_ns);
/** recv = op over ranks of send (send == recv: in place). */
spmd_status spmd__comm_allreduce(spmd__comm *c, const void *send, void *recv, size_t count,
                                 spmd_dtype dtype, spmd__reduce_op op);
/** recv receives counts[r] bytes from each rank r, packed in rank order; send NULL: this
 * rank's part already sits in place in recv. */
spmd_status spmd__comm_allgatherv(spmd__comm *c, const void *send, void *recv,
                                  const size_t *counts);
/** As spmd__comm_allgatherv, into recv on rank `root` only (elsewhere recv is unused). */
spmd_status spmd__comm_gatherv(spmd__comm *c, int root, const void *send, void *recv,
                               const size_t *counts);
/** `bytes` of data from rank `root` to every rank. */
spmd_status spmd__comm_bcast(spmd__comm *c, int root, void *data, size_t bytes);
/** Reduces send (sum over ranks of counts[] elements) and leaves rank r its counts[r]. */
spmd_status spmd__comm_reduce_scatter(spmd__comm *c, const void *send, void *recv,
                                      const size_t *counts, spmd_dtype dtype, spmd__reduce_op op);
/** send_counts[r] bytes to rank r (packed in rank order); recv_counts[r] bytes from it. */
spmd_status spmd__comm_alltoallv(spmd__comm *c, const void *send, const size_t *send_counts,
                                 void *recv, const size_t *recv_counts);

/** One point-to-point message of spmd__comm_exchange. */
typedef struct spmd__message {
    int peer; /* rank */
    int tag;
    void *data;
    size_t bytes;
} spmd__message;
/** Posts every send and receive, then waits for all of them. */
spmd_status spmd__comm_exchange(spmd__comm *c, int nsend, const spmd__message *sends, int nrecv,
                                const spmd__message *recvs);

/** A box of a dense row-major buffer (counts in elements of `elem` bytes). */
typedef struct spmd__piece {
    void *base;
    size_t elem;
    int ndim;
    const int64_t *shape; /* of the buffer */
    int64_t start[SPMD_MAX_RANK];
    int64_t extent[SPMD_MAX_RANK];
} spmd__piece;

/** A message made of boxes, sent or received in place (MPI derived datatypes: no staging). */
typedef struct spmd__piece_message {
    int peer; /* rank */
    int npieces;
    const spmd__piece *pieces;
} spmd__piece_message;

/**
 * Posts every send and receive, then calls work(work_arg) (when not NULL) until it returns 0,
 * letting MPI progress between calls, then waits for every message: the caller's own work
 * overlaps the transfers on one thread. A message may exceed 2 GiB; each buffer dimension
 * must stay below 2^31 elements (SPMD_ERR_UNSUPPORTED otherwise).
 */
spmd_status spmd__comm_exchange_pieces(spmd__comm *c, int nsend, const spmd__piece_message *sends,
                                       int nrecv, const spmd__piece_message *recvs,
                                       int (*work)(void *), void *work_arg);

/**
 * Tells the other ranks that this rank's call `epoch` failed, so that a rank waiting for this
 * one as its group's leader can stop when this one will never start the collective it waits
 * for (it keeps waiting when this one already started it: its verdict is on the way). Does
 * nothing on ranks other than 0 (the leader).
 */
void spmd__comm_notify_abort(spmd__comm *c, unsigned long epoch);
/**
 * Discards the abort notices and records of calls up to `epoch`, which failed. Those of later
 * calls are kept: a faster rank may already have failed its next call.
 */
void spmd__comm_drain(spmd__comm *c, unsigned long epoch);

/**
 * Sends `bytes` of an abort record to every other rank, without waiting. A record begins with
 * the number (unsigned long) of the call that failed.
 */
void spmd__comm_post_abort(spmd__comm *c, const void *record, size_t bytes);
/**
 * 1 (record filled) when an abort record of call `epoch` from another rank has arrived, else 0.
 * Records of earlier calls are dropped, those of later calls kept for then.
 */
int spmd__comm_poll_abort(spmd__comm *c, unsigned long epoch, void *record, size_t bytes);

#endif /* SPMD_RUNTIME_COMM_H */
