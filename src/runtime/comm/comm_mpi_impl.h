/* Private to the MPI communicator files (comm_mpi.c: communicators and data movement;
 * check_mpi.c: the checked exchanges of the control plane). */
#ifndef SPMD_RUNTIME_COMM_MPI_IMPL_H
#define SPMD_RUNTIME_COMM_MPI_IMPL_H

#include <mpi.h>
#include <pthread.h>

#include "runtime/comm/comm.h"
#include "runtime/comm/mpi_failure.h"

struct spmd__comm {
    MPI_Comm comm; /* carries the messages: this communicator, or its parent's */
    uint64_t wire; /* comm's identity, alike on every member: a ring message's envelope */
    /* exactly these ranks, for MPI's collectives: `comm` itself, or (a subset) made on first
     * use; MPI_COMM_NULL until then */
    MPI_Comm whole;
    int owns_comm, owns_whole;
    int rank;
    int size;
    int *processes; /* runtime process index of each rank */
    int *peer;      /* rank in `comm` of each rank: itself, or its rank in the parent */
    int is_view;
    int lane, lanes; /* a subset: its share of the parent's tags (lanes 0: not a subset) */
    unsigned long lane_blocks; /* a subset: its tag blocks, a power of two (a mask, no division) */
    unsigned long exchanges;   /* exchanges begun, counted alike on every rank */
    uint32_t stamp;            /* the last exchange's stamp (spmd__comm_exchange_tag) */
    /* buffers of sends never waited for: they live as long as the communicator */
    void **kept;
    int num_kept;
    pthread_mutex_t kept_lock; /* abort records may be posted and polled from several threads */
    /* sends an exchange went on without (their receiver slow, or gone), with their buffers:
     * freed once they end, buried if they never do */
    MPI_Request *open_reqs;
    void **open_bufs;
    int num_open;
    /* staging of the checked exchanges (one exchange at a time per communicator) */
    void *buf[2];
    size_t buf_bytes[2];
    /* a receive kept posted for notes "I gave up waiting for you" (check_mpi.c) */
    MPI_Request note_req;
    char note_buf[64];
    /* abort records of calls this rank has not reached yet */
    void **later_records;
    size_t *later_bytes;
    int num_later;
};

/* With less than MPI_THREAD_MULTIPLE, device threads take turns in MPI (process_mpi.c). */
void spmd__mpi_lock(void);
void spmd__mpi_unlock(void);
/** The top of the tag space (MPI_TAG_UB, at most 2^30), alike on every process; the fixed tags
 * below lie under it, the exchanges' blocks under those (process_mpi.c). */
int spmd__mpi_tag_top(void);

/** Tags: each exchange owns a block of SPMD__TAGS_PER_EXCHANGE consecutive tags. */
#define SPMD__TAGS_PER_EXCHANGE 4
/**
 * The first tag of the next exchange on c: from w->key when it is set, else c's count. It also
 * sets c->stamp, which the exchange's messages carry: tags are reused (a few thousand blocks),
 * and a message that an exchange given up left behind is told apart by it, and dropped.
 */
int spmd__comm_exchange_tag(spmd__comm *c, unsigned long key);
/** The tag of resharding's data messages (outside every exchange's block). */
int spmd__comm_pieces_tag(void);
/** The tag of the notes to a rank that was given up on (outside every exchange's block). */
int spmd__comm_note_tag(void);
/** The tag of the notes between processes about their calls (calls.h), on the private
 * communicator (outside every exchange's block). */
int spmd__comm_calls_tag(void);
/** The tag of the start-up's exchange of shared-memory names (host_rings.h), on the private
 * communicator (outside every exchange's block). */
int spmd__comm_rings_tag(void);

/* The shape of recursive doubling over n ranks, from one rank's point of view: the checked
 * exchanges' steps (check_mpi.c), and how early a wait for data ends (comm_mpi.c). */
typedef struct spmd__comm_topology {
    int n, me;
    int p2;        /* largest power of two <= n */
    int levels;    /* log2 p2 */
    int is_extra;  /* me >= p2: hands its part to me - p2 */
    int has_extra; /* me + p2 < n: takes the part of me + p2 */
} spmd__comm_topology;

static inline spmd__comm_topology spmd__comm_topology_of(int n, int me)
{
    spmd__comm_topology t = {n, me, 1, 0, 0, 0};
    while (t.p2 * 2 <= n) {
        t.p2 *= 2;
        t.levels++;
    }
    t.is_extra = me >= t.p2;
    t.has_extra = me + t.p2 < n;
    return t;
}

/** An agreement's describe function for a plain text (its arg). */
void spmd__comm_describe_text(const void *arg, char *text, size_t size);

/**
 * Tells the notes between processes (calls.h) about a wait on c that lasts: for agreement `a`
 * (NULL: data after one), where w says, for rank `rank` (-1: several); ahead[0..num_ahead):
 * the ranks met in the exchange's later steps (spmd__wait_info.ahead). Returns the slot to give
 * spmd__calls_wait_end.
 */
int spmd__comm_track(spmd__comm *c, const spmd__agreement *a, const spmd__wait *w, int rank,
                     const int *ahead, int num_ahead);

/** A copy of `bytes` of data that lives as long as c, for a send never waited for. */
void *spmd__comm_keep_copy(spmd__comm *c, const void *data, size_t bytes);
/** Keeps `block` (a send may still read it) as long as c. */
void spmd__comm_keep_with(spmd__comm *c, void *block);

/** Staging buffer `which` (0 or 1) of c, at least `bytes` long; NULL when out of memory. */
void *spmd__comm_buffer(spmd__comm *c, int which, size_t bytes);
/** Gives staging buffer `which` up to a send still in flight: kept, and a new one next time. */
void spmd__comm_detach_buffer(spmd__comm *c, int which);

/** c->whole, made now if c is a subset (collective over c's ranks, which all agreed). */
spmd_status spmd__comm_whole(spmd__comm *c, MPI_Comm *out);

/** The collective timeout, which bounds every wait for data. */
int64_t spmd__comm_timeout_ns(void);
/** How much later each step of a checked exchange over n ranks may end than the one before. */
int64_t spmd__comm_stagger_ns(void);
/** How long before its deadline the first step of an exchange over n ranks ends (the steps
 * are counted back from the deadline); waits for data end as early, so that processes give up
 * on a missing one at the same moment whatever they were waiting in. */
int64_t spmd__comm_count_back_ns(int n);

/**
 * Waits for n requests, polling against the collective timeout; from[i] >= 0 names the rank a
 * receive expects data from, for the message. On SPMD_ERR_TIMEOUT the open requests stay with
 * MPI: the communicator must be abandoned.
 */
spmd_status spmd__comm_wait_data(spmd__comm *c, int n, MPI_Request *reqs, const int *from,
                                 const char *what);
/** The deadline spmd__comm_wait_data would set now: for several waits that share one. */
int64_t spmd__comm_data_deadline(const spmd__comm *c);
/** spmd__comm_wait_data up to a deadline (spmd__now_ns's clock); it also ends, with its status,
 * when cancel (if given) says the call was given up. */
spmd_status spmd__comm_wait_data_until(spmd__comm *c, int n, MPI_Request *reqs, const int *from,
                                       const char *what, int64_t deadline,
                                       const spmd__wait *cancel);
/** What a stream does with each chunk that arrives: `bytes` at `offset` of the message,
 * read where they lie in the sender's slot (a copy out, or an addition straight from there). */
typedef void (*spmd__chunk_fn)(void *arg, size_t offset, const void *data, size_t bytes);
/** 1 when rank `peer` and this one share a machine with wide ring slots both ways: a swap of
 * data with it may go by spmd__comm_ring_streams (alike on both sides). */
int spmd__comm_ring_stream_usable(const spmd__comm *c, int peer);
/** A swap of data with one rank through the rings (spmd__comm_ring_streams). What goes out is
 * sbytes from send, or (fill not NULL) what fill writes into each chunk in turn. */
typedef struct spmd__stream {
    int peer, tag, round;
    const void *send;
    size_t sbytes, rbytes;
    spmd__chunk_fn take;
    void *arg;
    void (*fill)(void *fill_arg, char *dst, size_t bytes, int streaming);
    void *fill_arg;
    /* send stays as it is until the stream ends (nothing of this process writes it): where the
     * peer reads this process's memory straight (spmd__ring_direct_to), it reads it there */
    int send_stays;
    /* not NULL: take copies each chunk to into + offset, so a straight read may land there */
    void *into;
} spmd__stream;
/** A stream's progress (ring_stream_mpi.c's to read and write): its name in the rings, what
 * went out and came in, its listener, its note's word. */
typedef struct spmd__stream_state {
    uint64_t key; /* of the exchange as it began (the communicator's stamp then) */
    size_t sent, got;
    int listener;
    int word;         /* claimed for its note (-1: none) */
    int noted;        /* the note went out: sent once the peer answered in the word */
    int chunked;      /* no word was free: the data goes through the slots */
    int as_note;      /* chosen as it began: the data goes as a note */
    int64_t first_ns; /* when its first chunk was claimed (spmd__ring_note_cost) */
} spmd__stream_state;
/**
 * Swaps data with each stream's rank through the shared-memory rings (ring_stream_mpi.c), in
 * chunks of a wide slot at its tag: sbytes of `send` go out while rbytes arrive, each chunk
 * handed to take() as it comes, so that the copy and its use overlap and stay in the caches.
 * Either side may be empty. `round` tells apart the streams of one tag with the same peer
 * (alike on both sides): a chunk goes out only once the peer listens for that round. None waits
 * for another, whatever order their peers run theirs in. `state`: NULL, or what
 * spmd__comm_ring_streams_begin set up for these streams (this call ends them). mpi_beside:
 * MPI transfers posted beside them need this thread's polls for their progress, so its waits
 * never sleep through them (spmd__ring_pause). Ends at `deadline` naming the peer, or when
 * `cancel` says the call was given up; the communicator must then be abandoned.
 */
spmd_status spmd__comm_ring_streams(spmd__comm *c, int n, const spmd__stream *streams,
                                    spmd__stream_state *state, const char *what, int64_t deadline,
                                    const spmd__wait *cancel, int mpi_beside);
/**
 * Begins the n streams of an exchange before its agreement: listens now for what they will
 * bring, so that their peers find it as they begin, and sends the notes of those that go as one
 * (spmd__comm_ring_streams_note_early, whose answer it returns). Each state is ended by
 * spmd__comm_ring_streams, or by spmd__comm_ring_streams_end where the streams never run. The
 * streams' tags must be set; c must not take another exchange's tag before they run.
 */
int spmd__comm_ring_streams_begin(spmd__comm *c, int n, const spmd__stream *streams,
                                  spmd__stream_state *state);
/**
 * Sends the notes (where this process's data lies) of the streams that go as one and whose
 * peers listen already: 1 while some note is still to send. A note may go before this process
 * agreed to the call: its reader reads the data only once its own agreement ended, which every
 * process of the communicator passed alike, so only the same call reads it; a sender that gives
 * up releases the note's word, and a read that finds it released fails (host_rings.h).
 */
int spmd__comm_ring_streams_note_early(spmd__comm *c, int n, const spmd__stream *streams,
                                       spmd__stream_state *state);
/** Ends streams begun that never run (their agreement failed): their listeners and words. */
void spmd__comm_ring_streams_end(spmd__comm *c, int n, const spmd__stream *streams,
                                 spmd__stream_state *state);
/**
 * The data of a canonical-order reduction (runtime/base/tree.h) once every rank agreed to it, by
 * recursive doubling over the tree's nodes at `tag`: a rank whose positions do not fill a node
 * exchanges with every rank holding part of the node it lacks. Result in acc.
 */
spmd_status spmd__comm_tree_allreduce_agreed(spmd__comm *c, int tag, const spmd__tree_inputs *in,
                                             void *acc, size_t count, size_t elem,
                                             spmd__combine_fn combine, void *combine_arg,
                                             const spmd__wait *w);

/**
 * Cancels a receive and lets it settle: SPMD__CANCELLED, SPMD__ARRIVED (it had matched a whole
 * message; *status tells), or SPMD__STUCK (it matched a message whose sender stopped half way:
 * the request is left to MPI, which may still write the buffer, so the caller keeps it).
 */
enum { SPMD__CANCELLED, SPMD__ARRIVED, SPMD__STUCK };
int spmd__comm_cancel_receive(MPI_Request *req, MPI_Status *status);
/**
 * Goes on without a send still open from staging buffer `which`: the request and the buffer
 * stay with the communicator (a fresh staging buffer comes next time) until the send ends, or
 * for good when it never does.
 */
void spmd__comm_leave_send(spmd__comm *c, MPI_Request *req, int which);
/** Gives up on unfinished sends (their buffers must outlive them). */
void spmd__comm_abandon_sends(int n, MPI_Request *reqs, const int *done);

/* The data movement behind the checked collectives once the ranks agreed (comm_mpi.c). */
spmd_status spmd__comm_allgather_placed_agreed(spmd__comm *c, void *recv,
                                               const spmd__block_layout *layout,
                                               const size_t *counts, const size_t *displs);
/** Posts messages made of boxes (no wait; nothing when it fails): one MPI message each, so
 * reqs and from hold nsend + nrecv entries; from[i] is the peer of a receive, -1 for a send. */
spmd_status spmd__comm_post_pieces(spmd__comm *c, int tag, int nsend,
                                   const spmd__piece_message *sends, int nrecv,
                                   const spmd__piece_message *recvs, MPI_Request *reqs, int *from);
/** Posts the sends and receives of an all-to-all (no wait): reqs holds 2 * size requests. */
spmd_status spmd__comm_post_alltoallv(spmd__comm *c, int tag, const void *send,
                                      const size_t *send_counts, void *recv,
                                      const size_t *recv_counts, MPI_Request *reqs, int *from,
                                      int *n);
/** Posts a list of messages (no wait): reqs holds nsend + nrecv requests. */
spmd_status spmd__comm_post_messages(spmd__comm *c, int tag, int nsend, const spmd__message *sends,
                                     int nrecv, const spmd__message *recvs, MPI_Request *reqs,
                                     int *from);

#endif /* SPMD_RUNTIME_COMM_MPI_IMPL_H */
