/* Private: communicators between processes, for the collectives of shard_map. Everything that
 * touches MPI lives in comm_mpi.c; without MPI (comm_single.c) only one process exists and
 * nothing here is ever needed across processes. */
#ifndef SPMD_RUNTIME_COMM_H
#define SPMD_RUNTIME_COMM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <spmd/dtype.h>
#include <spmd/sharding.h>
#include <spmd/status.h>

#include "runtime/devices/event.h" /* spmd__now_ns */
#include "runtime/base/reduce_op.h"

typedef struct spmd__comm spmd__comm;

/** Where in a shard_map call a wait is, for the notes between processes (calls.h). */
typedef struct spmd__wait_where {
    int phase;              /**< the collective's number on its device; SPMD__PHASE_END: the
                                 call's final agreement */
    int device;             /**< the global id of the device that waits; -1: none */
    const int *rank_device; /**< [rank]: the global id of the device expected there; or NULL */
} spmd__wait_where;

/** How a wait ends early: at `deadline_ns` (CLOCK_MONOTONIC), or when `cancelled` says so. A
 * verdict of the notes between processes (calls.h) ends it too. */
typedef struct spmd__wait {
    int64_t deadline_ns;
    /** in/out: the coarse clock (spmd__coarse_now_ns) as the wait was made, for its first
     * exchange to start from instead of reading it again, which sets it to 0 (later exchanges
     * read the clock); 0: unknown */
    int64_t begun_ns;
    /** Returns an error status to stop waiting (its message already recorded), else SPMD_OK. */
    spmd_status (*cancelled)(void *arg);
    void *arg;
    const char *what; /**< the operation, for the timeout message */
    /** the variable that set deadline_ns, for the timeout message; NULL: the collective
     * timeout (SPMD_COLLECTIVE_TIMEOUT) */
    const char *timeout_name;
    /** > 0: the exchange's tags come from this number, which every rank gives alike (a call's
     * number), instead of the communicator's running count: for a communicator on which ranks
     * may have made different numbers of exchanges (after a failed call). */
    unsigned long key;
    /** 1: a rank that arrives after the others gave up on it need not learn so here (shard_map's
     * outcome tells it): no receive for that news is watched beside the exchange */
    int late_told_later;
    /** shard_map: where in the call the wait is (NULL: outside shard_map) */
    const spmd__wait_where *where;
    /** 1: only a verdict that abandons the call ends it early (a call's final agreement, in
     * which the processes must meet to report a mismatch) */
    int settled_only;
    /** 1: only the deadline ends it (the round before a subset's MPI communicator is made,
     * which every member that sent its part must go on to make) */
    int no_stop;
    /** 1: the processes arrive far apart (start-up: MPI_Init returns at different times), so
     * the steps' deadlines are spread over half the window, up to 250 ms apart, instead of a
     * hundredth of the timeout apart: a rank blames the partner that never came, not one that
     * came later than it and is still waiting for that one */
    int spread_arrivals;
    /** 1: an exchange on the next tag of another's block (its descriptions), which has no tag
     * left for the roll call that names every missing process alike */
    int follows_another;
    /** 1: deadline_ns already holds the grace period after a timeout (a call's final
     * agreement): the roll call after processes went missing ends by it too */
    int grace_in_deadline;
    /** Work of the caller's that an agreement does while it waits (early notes of the data
     * beside it: check_exchange_mpi.c), or NULL; it returns 0 once none is left, and is not
     * called again */
    int (*meanwhile)(void *arg);
    void *meanwhile_arg;
    int peer_missing; /**< out: the wait ended because a process never arrived */
    int data_pending; /**< out: after a failure, MPI may still read or write the data buffers */
} spmd__wait;

/**
 * The wait of a second round after an agreement, before a communicator is made: w's texts, a
 * fresh deadline `budget_ns` from now (never before w's) and the given tag key; the caller sets
 * its stop rule (settled_only or no_stop).
 */
static inline spmd__wait spmd__second_round_wait(const spmd__wait *w, int64_t budget_ns,
                                                 unsigned long key)
{
    int64_t fresh = spmd__now_ns() + budget_ns;
    spmd__wait round = {.deadline_ns = fresh > w->deadline_ns ? fresh : w->deadline_ns,
                        .what = w->what,
                        .timeout_name = w->timeout_name,
                        .key = key};
    return round;
}

/**
 * What this process is doing, for the checked exchanges below: ranks agree when their
 * fingerprints are equal. On the failure path only, describe() writes what it is (e.g. "psum
 * float32[4] over ('i',) #2") for the message that quotes two processes that differ.
 */
/* What a mismatch message compares of two processes' calls, beside their descriptions: the
 * parts of the fingerprint, named (a message names the ones that differ when the descriptions
 * read alike), and a list of numbers (a mesh's devices) compared place by place. */
#define SPMD__DETAIL_FIELDS 6
#define SPMD__DETAIL_LIST 64
typedef struct spmd__details {
    int num_fields;
    const char *names[SPMD__DETAIL_FIELDS]; /* static text, alike on every process */
    uint64_t hashes[SPMD__DETAIL_FIELDS];
    const char *list_name; /* "device ids"; NULL: no list */
    int list_length;
    int32_t list[SPMD__DETAIL_LIST]; /* its first entries */
} spmd__details;

typedef struct spmd__agreement {
    uint64_t fingerprint;
    void (*describe)(const void *arg, char *text, size_t size);
    const void *arg;
    /** optional, failure path only: fills the details of the call (arg as for describe) */
    void (*details)(const void *arg, spmd__details *out);
} spmd__agreement;

/**
 * A communicator over `processes` (ascending runtime process indices, this one included);
 * rank r is processes[r]. Collective over exactly those processes; `tag` must differ between
 * creations that may run at the same time over overlapping sets.
 */
spmd_status spmd__comm_create(const int *processes, int n, int tag, spmd__comm **out);
/**
 * A view of the runtime's communicator restricted to `processes` (ascending, this one
 * included), for an agreement before any communicator exists: it makes no collective MPI call,
 * so it cannot hang, and its messages use tags reserved for views (one agreement over a view
 * at a time in a process).
 */
spmd_status spmd__comm_view(const int *processes, int n, spmd__comm **out);
/**
 * The ranks `ranks[0..n)` (ascending, this one included) of `parent`, for the exchanges of one
 * of `lanes` subsets of it that may run at the same time: subset `lane` has tags of its own (its
 * share of the tag space, which wraps after a few hundred exchanges: the fingerprints then tell
 * apart anything stale), so it needs no MPI communicator of its own; one is made, collectively,
 * only when a large collective needs MPI's. Its exchanges are counted from `first_exchange`,
 * which every rank gives alike. Not collective; it lives no longer than `parent`.
 */
spmd_status spmd__comm_subset(spmd__comm *parent, const int *ranks, int n, int lane, int lanes,
                              unsigned long first_exchange, spmd__comm **out);
/** How many lanes spmd__comm_subset can give subsets of one communicator (the tag space). */
long spmd__comm_subset_lanes(void);
/** The largest MPI tag that libspmd uses (MPI_TAG_UB, at most 2^30); 0 without MPI. */
int spmd__comm_tag_ub(void);
/** Makes a subset's MPI communicator now (see spmd__comm_subset): collective over its ranks. */
spmd_status spmd__comm_make_whole(spmd__comm *c);
/** Frees a communicator with no operation pending. NULL-safe. */
void spmd__comm_destroy(spmd__comm *c);
/**
 * Drops a communicator that a failed exchange may have left with operations pending: it is
 * never used or freed again (MPI cannot cancel a collective), nor are its buffers.
 */
void spmd__comm_abandon(spmd__comm *c);
/** A new private communicator (spmd_init): the creations over it are counted afresh (wire). */
void spmd__comm_restart_wires(void);
/**
 * Keeps a heap block alive and reachable until the process ends, instead of freeing it: an
 * abandoned operation may still read or write it.
 */
void spmd__comm_keep(void *block);
int spmd__comm_rank(const spmd__comm *c);
int spmd__comm_size(const spmd__comm *c);

/*
 * The control plane. Every exchange below runs recursive doubling over the ranks: ceil(log2 n)
 * rounds (two more for the ranks beyond the largest power of two), one message sent and one
 * received per round, each a payload of constant size followed by a header (16 bytes while all
 * is well, 64 once something failed: the range of fingerprints seen, who holds them, the
 * processes found missing and what was heard of them). Success costs no more;
 * the details (what two processes called) are exchanged only when fingerprints differ. A rank
 * that never arrives is named by the rank that waited for it; the waits of later rounds end a
 * little later than those of earlier ones so that this news reaches everyone. Any failure
 * leaves the communicator to be abandoned.
 */

/**
 * Checks that every rank passes the same fingerprint: SPMD_ERR_COLLECTIVE_MISMATCH quotes two
 * differing descriptions; a rank that never arrives gives SPMD_ERR_TIMEOUT naming it (or the
 * cancellation status).
 */
spmd_status spmd__comm_agree(spmd__comm *c, uint64_t fingerprint, const char *description,
                             spmd__wait *w);
/** As spmd__comm_agree, with the description written only if it is needed. */
spmd_status spmd__comm_check(spmd__comm *c, const spmd__agreement *a, spmd__wait *w);

/** Merges a record that arrived into this rank's (see spmd__comm_reduce_record). */
typedef void (*spmd__combine_fn)(void *mine, const void *theirs, size_t theirs_bytes, void *arg);
/** out = mine op theirs (theirs_bytes of each), in one pass: the bits of a copy of mine into out
 * and then combine(out, theirs). */
typedef void (*spmd__combine_from_fn)(void *out, const void *mine, const void *theirs,
                                      size_t theirs_bytes, void *arg);
/**
 * Checks `a` and reduces a record of at most `capacity` bytes over the ranks in the same
 * exchange: *bytes of `record` are sent, records that arrive are merged by combine() (which
 * must be commutative and associative, and may grow *bytes up to capacity), and every rank ends
 * with the same record.
 */
spmd_status spmd__comm_reduce_record(spmd__comm *c, const spmd__agreement *a, void *record,
                                     size_t *bytes, size_t capacity, spmd__combine_fn combine,
                                     void *combine_arg, spmd__wait *w);

/* The collectives of shard_map, each checked: the agreement travels with the data (one
 * exchange) for messages up to SPMD__COMM_COMBINED_BYTES, and runs beside or before the data
 * movement beyond. They wait at most the collective timeout in all. */
#define SPMD__COMM_COMBINED_BYTES (64 * 1024)

/* Beyond this size, a message within a machine whose peer reads this process's memory
 * straight (host_rings.h) goes as a note of where it lies: one copy, by the reader, where the
 * rings' slots copy it twice. */
#define SPMD__COMM_STRAIGHT_ABOVE (64 * 1024)
/* Beyond this size and up to SPMD__COMM_STRAIGHT_ABOVE, such a message goes as a note or
 * through the slots, whichever the pair measured cheaper lately (spmd__ring_pick_direct): there
 * the winner changes with the machine's state (ring_stream_mpi.c). */
#define SPMD__COMM_CONTESTED_ABOVE (32 * 1024)

/** The largest message a collective sends through spmd__comm_paired_exchange on c; larger ones
 * go through the checked exchanges, whose messages may be read straight.
 * SPMD__COMM_COMBINED_BYTES, or SPMD__COMM_CONTESTED_ABOVE within one machine whose processes
 * made their rings and outnumber none of its cores (on a crowded machine only messages from
 * 128 KiB are read straight). Alike on every rank of c. */
size_t spmd__comm_paired_max_bytes(const spmd__comm *c);

/** A run of `count` elements at `data`: part of a reduction's vector (spmd__tree_inputs). */
typedef struct spmd__piece_run {
    void *data;
    size_t count;
} spmd__piece_run;

/** Where a reduction's inputs sit in its canonical order (runtime/base/tree.h). */
typedef struct spmd__tree_inputs {
    int n;              /* positions */
    const int *rank_of; /* [n] the rank holding each position */
    /* > 0: every rank holds an aligned block of `block` positions (a power of two), already
       added up in acc, the block of rank rank_of_vrank[v] being [v * block, (v + 1) * block) */
    int block;
    const int *rank_of_vrank;
    int my_vrank;
    int split; /* combine() applies to any run of whole elements: large blocks may go by
                  reduce-scatter and all-gather */
    /* nruns > 0 (with a block, split, beyond SPMD__COMM_COMBINED_BYTES): the vector is these
       runs one after another, in place of acc (a many-block reduction, packed by MPI only) */
    int nruns;
    const spmd__piece_run *runs;
    /* with runs: where the vector's values are on entry, run for run (NULL: in the runs); the
       reduction reads them there and writes the runs, each element before reading it back */
    const spmd__piece_run *sources;
    /* with sources: a run's first sum taken from its source and the arrival in one pass, with
       the combine's argument (NULL: the source copied into the run first) */
    spmd__combine_from_fn combine_sources;
    /* with a block and no runs: where acc's values are on entry, if not in acc (NULL); the
       reduction reads them there, and writes each element of acc before reading it back */
    const void *acc_source;
    /* > 0 (with a block, split, no runs): a reduce-scatter; the rank of vrank v needs only
       acc[v * scatter, (v + 1) * scatter), which alone is then written (the rest of acc is left
       as the reduction found it) */
    size_t scatter;
    /* block 0: this rank's positions, ascending, and their inputs (accumulator dtype) */
    int count;
    const int *positions;
    const void *const *inputs;
    /* acc lies in host memory (not a device's): a peer on this machine may read its parts
       straight (tree_mpi.c) */
    int host;
} spmd__tree_inputs;

/** acc's values on entry, copied from where they are (acc_source) for the paths that read acc. */
static inline void spmd__tree_load_acc(const spmd__tree_inputs *in, void *acc, size_t bytes)
{
    if (in->acc_source && in->acc_source != acc)
        memcpy(acc, in->acc_source, bytes);
}

/**
 * A reduction in the canonical order of runtime/base/tree.h, whatever the ranks hold: acc (count
 * elements of the accumulator dtype) receives the result; with in->block > 0 it holds this
 * rank's block on entry (or in->acc_source does). combine() applies op (acc op= in). Small messages
 * with blocks carry the agreement (one exchange); the others run the agreement first, as do two
 * ranks of a machine that is not crowded past 4 KiB (their rounds then stream through the rings).
 */
spmd_status spmd__comm_checked_tree_allreduce(spmd__comm *c, const spmd__agreement *a,
                                              const spmd__tree_inputs *in, void *acc, size_t count,
                                              spmd_dtype dtype, spmd__combine_fn combine,
                                              void *combine_arg, spmd__wait *w);
/** recv receives counts[r] bytes from each rank r, packed in rank order; send NULL: this
 * rank's part already sits in place in recv. */
spmd_status spmd__comm_checked_allgatherv(spmd__comm *c, const spmd__agreement *a, const void *send,
                                          void *recv, const size_t *counts, spmd__wait *w);
/** send_counts[r] bytes to rank r (packed in rank order); recv_counts[r] bytes from it.
 * `large`, which every rank must give alike, picks the protocol: the agreement beside the data
 * (large), or the messages checking each other (at most SPMD__COMM_COMBINED_BYTES a rank). */
spmd_status spmd__comm_checked_alltoallv(spmd__comm *c, const spmd__agreement *a, const void *send,
                                         const size_t *send_counts, void *recv,
                                         const size_t *recv_counts, int large, spmd__wait *w);

/** Where a gathered buffer holds its blocks: block b is `outer` runs of `run` bytes, `stride`
 * bytes apart, the first at byte b * run (a tiled or stacked all_gather's output). */
typedef struct spmd__block_layout {
    size_t outer, run, stride;
    /* whole blocks (outer 1): this rank's, as they lie in the caller's input too, unchanged
     * until the all-gather returns; sent from there (their copy in recv may still be the
     * caller's fresh writes), or NULL */
    const void *own;
} spmd__block_layout;

/** 1 when every rank of c is on this machine, each of whose processes made its rings (the
 * data then streams between them): alike on every rank of c. */
int spmd__comm_on_linked_machine(const spmd__comm *c);

/* The output from which a whole-block all_gather within a machine whose processes made their
 * rings goes straight into its output. */
#define SPMD__COMM_LINKED_GATHER_BYTES (16 * 1024)

/**
 * An all-gather straight into its destination (more than SPMD__COMM_COMBINED_BYTES in all, or
 * SPMD__COMM_LINKED_GATHER_BYTES where spmd__comm_on_linked_machine and the runs are whole
 * blocks, or any size for two ranks of one block each): checks `a`, then rank r's counts[r]
 * blocks land at blocks displs[r] onwards of recv, each rank's own blocks already being in place
 * there. The rings (within a machine) or MPI (a derived datatype where runs are strided) move
 * the data between the blocks, without the caller's staging. Two ranks whose blocks lie in rank
 * order send one message each way with the agreement on it, up to SPMD__COMM_COMBINED_BYTES
 * (SPMD__COMM_LINKED_GATHER_BYTES within such a machine), through the communicator's buffers
 * (spmd__comm_checked_allgatherv's exchange); beyond, the agreement runs beside the data.
 */
spmd_status spmd__comm_checked_allgather_placed(spmd__comm *c, const spmd__agreement *a, void *recv,
                                                const spmd__block_layout *layout,
                                                const size_t *counts, const size_t *displs,
                                                spmd__wait *w);

/** One point-to-point message of spmd__comm_checked_exchange. */
typedef struct spmd__message {
    int peer; /* rank */
    void *data;
    size_t bytes;
} spmd__message;
/**
 * The messages carry the check: each is sent with this rank's fingerprint, and each received
 * one is compared with it (a mismatch names the sender). It checks only the pairs that exchange
 * a message: for a pattern in which the ranks are all connected by messages, that is every
 * rank; otherwise use spmd__comm_checked_exchange. One tag for every message: the messages
 * between two ranks match in the order they are listed.
 */
spmd_status spmd__comm_paired_exchange(spmd__comm *c, const spmd__agreement *a, int nsend,
                                       const spmd__message *sends, int nrecv,
                                       const spmd__message *recvs, spmd__wait *w);
/** Checks `a` while every send and receive is under way (the messages between two ranks
 * match in the order they are listed), then waits for them. */
spmd_status spmd__comm_checked_exchange(spmd__comm *c, const spmd__agreement *a, int nsend,
                                        const spmd__message *sends, int nrecv,
                                        const spmd__message *recvs, spmd__wait *w);
/** As spmd__comm_checked_exchange, for messages in host memory, which the sends' buffers hold
 * unchanged until it returns: a peer of this machine may read them straight there. */
spmd_status spmd__comm_checked_exchange_host(spmd__comm *c, const spmd__agreement *a, int nsend,
                                             const spmd__message *sends, int nrecv,
                                             const spmd__message *recvs, spmd__wait *w);

/* Data movement once every rank agreed to it (the multihost collectives, resharding). Each
 * waits at most the collective timeout (spmd__comm_set_timeout): a rank that stops in the
 * middle makes it SPMD_ERR_TIMEOUT; the communicator must then be abandoned (MPI may still use
 * the buffers). */
/** The timeout of every wait between processes (the runtime's collective timeout). */
void spmd__comm_set_timeout(int64_t timeout_ns);
/** The grace period after a timeout in which the processes still running meet once more: a
 * tenth of the timeout, at least 0.5 s. */
int64_t spmd__comm_grace_ns(void);
/** recv receives counts[r] bytes from each rank r, packed in rank order; send NULL: this
 * rank's part already sits in place in recv. */
spmd_status spmd__comm_allgatherv(spmd__comm *c, const void *send, void *recv,
                                  const size_t *counts);
/** As spmd__comm_allgatherv, into recv on rank `root` only (elsewhere recv is unused). */
spmd_status spmd__comm_gatherv(spmd__comm *c, int root, const void *send, void *recv,
                               const size_t *counts);
/** `bytes` of data from rank `root` to every rank. */
spmd_status spmd__comm_bcast(spmd__comm *c, int root, void *data, size_t bytes);

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
 * As spmd__comm_checked_exchange, for messages made of boxes sent and received in place (MPI
 * derived datatypes: no staging copy). One MPI message per message: a sender's boxes and its
 * receiver's may differ in shape, only their bytes in order must agree. The messages between
 * two ranks match in list order.
 */
spmd_status spmd__comm_checked_exchange_pieces(spmd__comm *c, const spmd__agreement *a, int nsend,
                                               const spmd__piece_message *sends, int nrecv,
                                               const spmd__piece_message *recvs, spmd__wait *w);

/** Discards the abort records of calls up to `epoch`; those of later calls are kept. */
void spmd__comm_drain(spmd__comm *c, unsigned long epoch);
/**
 * Sends `bytes` of an abort record to every other rank, without waiting: down a binomial tree
 * rooted at this rank, each rank passing it on as it takes it in (spmd__comm_poll_abort,
 * spmd__comm_drain), so that no rank sends more than ceil(log2 size) of them. A record begins
 * with the number (unsigned long) of the call that failed.
 */
void spmd__comm_post_abort(spmd__comm *c, const void *record, size_t bytes);
/** Takes in the abort records that arrived, passing them on down their trees, and keeps them
 * for spmd__comm_poll_abort and spmd__comm_drain: for a wait that cannot be cancelled, so that
 * its process does not cut its subtree off. */
void spmd__comm_pass_on_aborts(spmd__comm *c);
/**
 * 1 (record filled) when an abort record of call `epoch` from another rank has arrived, else 0.
 * Records of earlier calls are dropped, those of later calls kept for then.
 */
int spmd__comm_poll_abort(spmd__comm *c, unsigned long epoch, void *record, size_t bytes);

#endif /* SPMD_RUNTIME_COMM_H */
