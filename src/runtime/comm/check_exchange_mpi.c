/* The exchanges that run an agreement beside their data (comm.h): all_to_all and ppermute
 * check beside their posted requests; paired exchanges whose every message carries its
 * sender's header; alltoallv, message lists and pieces beside an agreement; large collectives
 * straight between the blocks once the agreement is done. The engine they share (a checked
 * step, the header, the verdict) is check_mpi.c's (check_mpi_impl.h). */
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/base/stream_copy.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/comm_mpi_impl.h"
#include "runtime/comm/host_rings.h"
#include "runtime/comm/piece_cursor.h"
#include "runtime/comm/check_mpi_impl.h"

#define lock spmd__mpi_lock
#define unlock spmd__mpi_unlock

/* A message of an exchange beside its agreement past this streams through the rings (one copy)
 * rather than MPI's shared memory (two), where its peer's rings allow: medians of 3-6 runs,
 * ratio to MPI, 2 x 1: all_gather 32-128 KiB of output 0.81-0.97 -> 1.00-1.07, all_to_all
 * 128 KiB 0.87 -> 0.93; 4 x 1 on 2 cores: all_gather 64-256 KiB 0.87-0.90 -> 1.07-1.25,
 * all_to_all 128-256 KiB 0.64 -> 0.70-0.81 (at 4 KiB alike; a 16 KiB threshold gained less). */
#define STREAM_ABOVE_BYTES 8192

static size_t stream_above(void)
{
    size_t wide = spmd__ring_capacity(); /* narrower where a machine has many processes */
    return wide < STREAM_ABOVE_BYTES ? wide : STREAM_ABOVE_BYTES;
}

/* ---- all_to_all and ppermute: the agreement runs while the data moves ---- */

/* The streams whose notes the agreement's waits send early (spmd__comm_ring_streams_note_early). */
typedef struct early_notes {
    spmd__comm *c;
    int n;
    const spmd__stream *streams;
    spmd__stream_state *state;
} early_notes;

static int send_early_notes(void *arg)
{
    early_notes *e = arg;
    return spmd__comm_ring_streams_note_early(e->c, e->n, e->streams, e->state);
}

/* Checks `a` beside n posted requests, then runs the streams through the rings (none when
 * nstreams is 0), then waits for the requests; on failure the receives are cancelled and the
 * sends left to MPI (w->data_pending). The streams begin before the agreement: they listen, so
 * that a peer that finishes it finds them listening and sends at once where it waited for that
 * (a crossing of the two processes' caches, and on a crowded machine maybe a turn of the
 * reader's), and their notes go out as soon as their readers listen, during the agreement's
 * waits too, so that a reader reads the data as soon as its own agreement ends, whether or not
 * its sender has the core then. What a stream takes is still only this call's data: its reader
 * reads a note, and its sender sends a chunk, only once it agreed. */
static spmd_status check_beside(spmd__comm *c, const spmd__agreement *a, spmd__wait *w, int tag,
                                int n, MPI_Request *reqs, const int *from, int nstreams,
                                const spmd__stream *streams, const char *what)
{
    spmd__stream_state begun_one, *begun = nstreams == 1 ? &begun_one
                                           : nstreams    ? malloc((size_t)nstreams * sizeof *begun)
                                                         : NULL;
    early_notes early = {c, nstreams, streams, begun};
    if (begun && spmd__comm_ring_streams_begin(c, nstreams, streams, begun)) {
        w->meanwhile = send_early_notes; /* the notes whose readers do not listen yet */
        w->meanwhile_arg = &early;
    }
    spmd_status st = spmd__xchg_check_with_tag(c, a, w, tag);
    w->meanwhile = NULL;
    if (st == SPMD_OK && nstreams) /* after the agreement: only the same call's data streams */
        st = spmd__comm_ring_streams(c, nstreams, streams, begun, what, spmd__comm_data_deadline(c),
                                     w, n > 0);
    else if (begun)
        spmd__comm_ring_streams_end(c, nstreams, streams, begun);
    if (nstreams > 1)
        free(begun);
    if (st == SPMD_OK)
        st = spmd__comm_wait_data(c, n, reqs, from, what);
    else {
        int *done = calloc((size_t)(n ? n : 1), sizeof *done);
        if (done) {
            for (int i = 0; i < n; i++)
                done[i] = reqs[i] == MPI_REQUEST_NULL;
            MPI_Status status;
            for (int i = 0; i < n; i++)
                if (from[i] >= 0 && !done[i])
                    done[i] = spmd__comm_cancel_receive(&reqs[i], &status) == SPMD__ARRIVED;
            spmd__comm_abandon_sends(n, reqs, done);
        }
        free(done);
    }
    if (st != SPMD_OK)
        w->data_pending = n > 0; /* the streams copied as they went: nothing is left */
    return st;
}

/* ---- exchanges whose messages check each other: every message carries its sender's trailer ----
 */

/* Slack in each receive beyond the expected message: a mismatched one a little longer still
 * arrives whole, trailer and all. */
#define PAIRED_SLACK 256

/* A paired exchange's partners send through MPI alone: a message of this exchange's tag from
 * `rank` in a ring comes from a step of another exchange, which that rank runs instead (1). */
static int ring_mismatch(xchg *x, int rank)
{
    spmd__comm *c = x->c;
    if (!spmd__ring_from(c->processes[rank]))
        return 0;
    char message[SPMD__RING_BYTES];
    long n;
    while ((n = spmd__ring_take(c->processes[rank], c->wire, x->tag, message, sizeof message)) >= 0)
        if (spmd__xchg_is_current(x, message, (size_t)n, sizeof message))
            return 1;
    return 0;
}

static int by_peer_order(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* Marks in single[i] the messages whose peer no other message of the list has. */
static int mark_single_peers(int n, const spmd__message *m, int *single)
{
    if (n == 1) { /* a ppermute's one peer each way */
        single[0] = 1;
        return 1;
    }
    if (n <= 8) { /* the usual lists: a permutation's one or two peers */
        for (int i = 0; i < n; i++) {
            single[i] = 1;
            for (int j = 0; j < n && single[i]; j++)
                single[i] = j == i || m[j].peer != m[i].peer;
        }
        return 1;
    }
    int *by_peer = malloc((size_t)n * 2 * sizeof *by_peer);
    if (!by_peer)
        return 0;
    for (int i = 0; i < n; i++) {
        by_peer[2 * i] = m[i].peer;
        by_peer[2 * i + 1] = i;
    }
    qsort(by_peer, (size_t)n, 2 * sizeof *by_peer, by_peer_order);
    for (int k = 0; k < n; k++)
        single[by_peer[2 * k + 1]] = (k == 0 || by_peer[2 * k - 2] != by_peer[2 * k]) &&
                                     (k == n - 1 || by_peer[2 * k + 2] != by_peer[2 * k]);
    free(by_peer);
    return 1;
}

/* A message of `count` bytes (MPI's error `err` for it) came for receive `recv` into buf: 0 when
 * an exchange given up on that had this tag left it (not this one's: receive again); else 1,
 * its payload copied to the receive, or the exchange marked a mismatch naming the sender. */
static int take_paired(xchg *x, const spmd__agreement *a, const spmd__message *recv,
                       const char *buf, size_t count, size_t cap, int err, int *culprit)
{
    if (err == MPI_SUCCESS && !spmd__xchg_is_current(x, buf, count, cap))
        return 0;
    header in;
    size_t payload = 0;
    int ours = err == MPI_SUCCESS && count <= cap &&
               spmd__header_unseal(buf, count, recv->peer, &in, &payload);
    if (!ours || in.fp_min != a->fingerprint || in.fp_max != a->fingerprint ||
        payload != recv->bytes) {
        x->h.flags |= FLAG_SIZE; /* mismatch: told apart by the sender named below */
        if (*culprit < 0)
            *culprit = recv->peer;
        return 1;
    }
    spmd__header_merge(&x->h, &in);
    if (!spmd__header_failed(&x->h))
        memcpy(recv->data, buf, payload);
    return 1;
}

/* A paired exchange of up to this many messages keeps their handles on the stack. */
#define PAIRED_STACK 8

/* A receive that waits on a ring looks at MPI this often (spins): for a message its sender
 * could not put in the ring (full), or one of a call that differs. */
#define PAIRED_MPI_EVERY 16 /* a power of two: a look tests a mask, not a division */
_Static_assert((PAIRED_MPI_EVERY & (PAIRED_MPI_EVERY - 1)) == 0,
               "a look at MPI tests a mask: a power of two");
/* ... and yields the core between looks after this long. */
#define PAIRED_SPIN_NS 1000000

/*
 * A message of at most a wide slot, and the only one between its two processes in the list, goes
 * through the shared-memory ring between them (host_rings.h) where they share a machine: the
 * receiver knows from the sizes it lists, which its sender lists alike unless the calls differ
 * (then the messages tell). A message that finds its ring full goes through MPI; its receiver
 * probes MPI now and then.
 */
spmd_status spmd__comm_paired_exchange(spmd__comm *c, const spmd__agreement *a, int nsend,
                                       const spmd__message *sends, int nrecv,
                                       const spmd__message *recvs, spmd__wait *w)
{
    xchg x;
    spmd__xchg_init(&x, c, a, w, spmd__comm_exchange_tag(c, w->key), w->deadline_ns);
    int n = nsend + nrecv, n1 = n ? n : 1;
    size_t sbytes = 0, rbytes = 0;
    for (int i = 0; i < nsend; i++)
        sbytes += sends[i].bytes + SEAL_MAX;
    for (int i = 0; i < nrecv; i++)
        rbytes += recvs[i].bytes + SEAL_MAX + PAIRED_SLACK;
    char *S = spmd__comm_buffer(c, 0, sbytes ? sbytes : 1);
    char *R = spmd__comm_buffer(c, 1, rbytes ? rbytes : 1);
    /* the handles of a permutation's few messages on the stack: a small exchange allocates
     * nothing */
    MPI_Request stack_reqs[PAIRED_STACK];
    MPI_Status stack_statuses[PAIRED_STACK];
    int stack_ints[3 * PAIRED_STACK];
    size_t stack_slots[2 * PAIRED_STACK];
    int small = n1 <= PAIRED_STACK;
    MPI_Request *reqs =
        small ? stack_reqs
              : malloc((size_t)n1 * (sizeof *reqs + sizeof(MPI_Status) + 3 * sizeof(int)));
    size_t *slot = small ? stack_slots : malloc(2 * (size_t)n1 * sizeof *slot);
    if (!S || !R || !reqs || !slot) {
        if (!small) {
            free(reqs);
            free(slot);
        }
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY,
                          "out of memory for %zu bytes of messages between processes",
                          sbytes + rbytes);
    }
    size_t *sealed = slot + n1;
    MPI_Status *statuses = small ? stack_statuses : (MPI_Status *)(reqs + n1);
    int *idx = small ? stack_ints : (int *)(statuses + n1), *done = idx + n1, *ring = done + n1;
    /* ring[i]: receive i waits on its sender's ring (1), or found its message in MPI by a
     * probe (2); send i goes into the receiver's ring */
    if (!mark_single_peers(nrecv, recvs, ring) || !mark_single_peers(nsend, sends, ring + nrecv)) {
        if (!small) {
            free(reqs);
            free(slot);
        }
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int rings_open = 0;
    size_t ring_capacity = spmd__ring_capacity();
    for (int i = 0; i < n; i++) {
        const spmd__message *m = i < nrecv ? &recvs[i] : &sends[i - nrecv];
        ring[i] = ring[i] && m->bytes + SEAL_MAX <= ring_capacity &&
                  (i >= nrecv || spmd__ring_from(c->processes[m->peer]));
        reqs[i] = MPI_REQUEST_NULL;
        done[i] = 0;
    }
    int left = n;
    for (int i = 0, at = 0; i < nsend; i++) {
        int k = nrecv + i;
        if (ring[k]) { /* straight from the data into the ring, the trailer after it */
            char trailer[SEAL_MAX];
            size_t tail = spmd__header_seal(&x.h, x.stamp, trailer, 0);
            ring[k] = spmd__ring_send_parts(c->processes[sends[i].peer], c->wire, x.tag, x.stamp,
                                            sends[i].data, sends[i].bytes, trailer, tail);
            done[k] = ring[k];
            left -= ring[k];
        }
        if (ring[k])
            continue;
        memcpy(S + at, sends[i].data, sends[i].bytes);
        sealed[k] = spmd__header_seal(&x.h, x.stamp, S + at, sends[i].bytes);
        slot[k] = (size_t)at;
        at += (int)sealed[k];
    }
    lock();
    for (int i = 0, at = 0; i < nrecv; i++) {
        slot[i] = (size_t)at;
        int cap = (int)(recvs[i].bytes + SEAL_MAX + PAIRED_SLACK);
        if (!ring[i])
            MPI_Irecv(R + at, cap, MPI_BYTE, c->peer[recvs[i].peer], x.tag, c->comm, &reqs[i]);
        rings_open += ring[i];
        at += cap;
    }
    for (int i = nrecv; i < n; i++)
        if (!done[i])
            MPI_Isend(S + slot[i], (int)sealed[i], MPI_BYTE, c->peer[sends[i - nrecv].peer], x.tag,
                      c->comm, &reqs[i]);
    unlock();
    int timed_out = 0, culprit = -1, tracked = -1, tracked_request = -1;
    /* the coarse clock: deadlines are seconds away, probes milliseconds */
    int64_t started = x.begun, probe_after = spmd__calls_probe_after_ns();
    int64_t now = started;
    unsigned spins = 0;
    int every = spmd__rings_crowded() ? 1 : PAIRED_MPI_EVERY;
    doubt suspected = {0, 0};
    spmd__pause pause;
    spmd__pause_begin(&pause, now);
    while (left > 0 && x.stopped == SPMD_OK) {
        uint64_t suspicion = spmd__calls_wait_suspicion(tracked);
        /* a suspicion makes every test a full look: the message may be in MPI, unseen */
        int look = suspicion || (spins & (unsigned)(every - 1)) == (unsigned)every - 1;
        for (int i = 0; rings_open && i < nrecv; i++) {
            if (ring[i] != 1 || done[i])
                continue;
            size_t cap = recvs[i].bytes + SEAL_MAX + PAIRED_SLACK;
            spmd__ring_message in; /* read where it lies: its payload goes straight out */
            while (spmd__ring_claim(c->processes[recvs[i].peer], c->wire, x.tag, &in)) {
                int taken =
                    take_paired(&x, a, &recvs[i], in.data, in.bytes, cap, MPI_SUCCESS, &culprit);
                spmd__ring_release(&in);
                if (taken) {
                    done[i] = 1;
                    left--;
                    rings_open--;
                    break;
                }
            }
            if (done[i] || !look)
                continue;
            int flag = 0;
            MPI_Message message;
            lock(); /* it came through MPI: received as any other from now on */
            int rc = MPI_Improbe(c->peer[recvs[i].peer], x.tag, c->comm, &flag, &message,
                                 MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS && flag)
                rc = MPI_Imrecv(R + slot[i], (int)cap, MPI_BYTE, &message, &reqs[i]);
            unlock();
            if (rc != MPI_SUCCESS)
                spmd__xchg_broken(&x, rc, "MPI_Imrecv");
            if (flag) {
                ring[i] = 2; /* in MPI: back to the ring if it was an older exchange's */
                rings_open--;
            }
        }
        int got = 0, rc = MPI_SUCCESS;
        if (left > rings_open) { /* MPI's requests: their progress at every look */
            lock();
            rc = MPI_Testsome(n, reqs, &got, idx, statuses);
            unlock();
        }
        if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
            spmd__xchg_broken(&x, rc, "MPI_Testsome");
            break;
        }
        for (int k = 0; got != MPI_UNDEFINED && k < got; k++) {
            int i = idx[k];
            done[i] = 1;
            left--;
            if (i >= nrecv)
                continue;
            int count = 0;
            MPI_Get_count(&statuses[k], MPI_BYTE, &count);
            size_t cap = recvs[i].bytes + SEAL_MAX + PAIRED_SLACK;
            int err = rc == MPI_ERR_IN_STATUS ? statuses[k].MPI_ERROR : MPI_SUCCESS;
            if (!take_paired(&x, a, &recvs[i], R + slot[i], (size_t)count, cap, err,
                             &culprit)) { /* left by an exchange given up on: not ours */
                done[i] = 0;
                left++;
                if (ring[i]) { /* this one's may be in the ring: look there again */
                    ring[i] = 1;
                    rings_open++;
                    continue;
                }
                lock();
                MPI_Irecv(R + slot[i], (int)cap, MPI_BYTE, c->peer[recvs[i].peer], x.tag, c->comm,
                          &reqs[i]);
                unlock();
            }
        }
        if ((spins & 15) == 15) /* a ring message for a receive through MPI: another exchange */
            for (int i = 0; i < nrecv; i++)
                if (!done[i] && !ring[i] && reqs[i] != MPI_REQUEST_NULL &&
                    ring_mismatch(&x, recvs[i].peer)) {
                    MPI_Status status; /* that partner is in another exchange */
                    if (spmd__comm_cancel_receive(&reqs[i], &status) == SPMD__STUCK)
                        spmd__comm_detach_buffer(c, 1);
                    done[i] = 1;
                    left--;
                    x.h.flags |= FLAG_SIZE;
                    if (culprit < 0)
                        culprit = recvs[i].peer;
                }
        if (look)
            spmd__xchg_weigh_doubt(&suspected, tracked, suspicion,
                                   tracked_request >= 0 && !done[tracked_request]);
        if ((++spins & 7) == 0) /* the clock every few tests: a test is far shorter than any
                                   deadline, and reading it cost a tenth of a short call */
            now = spmd__coarse_now_ns();
        if (left > 0 && x.next_cancel_check == 0)
            x.next_cancel_check = now + CANCEL_FIRST_NS;
        if (left > 0 && now > x.deadline) {
            timed_out = 1;
            break;
        }
        if (left > 0 && tracked < 0 && now - started > probe_after) {
            int peer = -1; /* the first receive still open: whom this waits for */
            for (int i = 0; i < nrecv && peer < 0; i++)
                if (!done[i]) {
                    peer = recvs[i].peer;
                    tracked_request = i;
                }
            tracked = spmd__comm_track(c, a, w, peer, NULL, 0);
        }
        if (tracked >= 0)
            spmd__calls_poll_notes();
        if (left > 0)
            (void)spmd__xchg_cancelled(&x, now);
        /* a ring is polled without MPI's progress, which would yield the core when others
         * wait for it: so does a wait for rings alone on a crowded machine, or after a while */
        if (left > 0 && left == rings_open)
            spmd__pause_step(&pause, now, spmd__rings_crowded() ? 0 : PAIRED_SPIN_NS);
    }
    spmd__calls_wait_end(tracked);
    int sends_open = 0;
    for (int i = 0; i < n; i++) {
        if (done[i])
            continue;
        if (i < nrecv) {
            if (reqs[i] != MPI_REQUEST_NULL) {
                MPI_Status status;
                int settled = spmd__comm_cancel_receive(&reqs[i], &status);
                done[i] = settled == SPMD__ARRIVED;
                if (settled == SPMD__STUCK)
                    spmd__comm_detach_buffer(c, 1); /* MPI may still write into R */
            }
            if (timed_out && !done[i])
                spmd__xchg_missed(&x, recvs[i].peer);
        } else {
            sends_open = 1;
            if (timed_out) /* its receiver never took it: stopped since its own message came */
                spmd__xchg_missed(&x, sends[i - nrecv].peer);
        }
    }
    if (sends_open) {
        spmd__comm_abandon_sends(n, reqs, done);
        spmd__comm_detach_buffer(c, 0);
    }
    if (!small) { /* the handles' arrays: MPI keeps what it still needs of an abandoned send */
        free(reqs);
        free(slot);
    }
    spmd_status st = x.stopped;
    if (st != SPMD_OK)
        return st;
    char what[TEXT];
    const header *h = &x.h;
    if (h->missing[0] >= 0) {
        spmd__xchg_hear_missing(c, &x.h);
        return spmd__xchg_missing_error(c, h, a, w);
    }
    if (culprit >= 0) /* only the ranks that exchange messages compare: the other one's text
                          is not here (the end of the call tells every process this one) */
        return SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH,
                          "processes issued different collectives: process %d called %s, but "
                          "the message of process %d in it belongs to another collective (or has "
                          "another size); every process must issue the same collectives with "
                          "the same shapes in the same order",
                          c->processes[c->rank], spmd__xchg_what_of(w, a, what, sizeof what),
                          c->processes[culprit]);
    return SPMD_OK;
}

spmd_status spmd__comm_checked_alltoallv(spmd__comm *c, const spmd__agreement *a, const void *send,
                                         const size_t *send_counts, void *recv,
                                         const size_t *recv_counts, int large, spmd__wait *w)
{
    if (c->size == 1) {
        memmove(recv, send, send_counts[0]);
        return SPMD_OK;
    }
    if (!large) {
        /* every rank sends to every other: their messages check each other, no agreement of
         * its own */
        spmd__message *m = malloc(2 * (size_t)c->size * sizeof *m);
        SPMD_REQUIRE(m != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
        int ns = 0, nr = 0;
        size_t soff = 0, roff = 0;
        for (int r = 0; r < c->size; r++) {
            if (r == c->rank)
                spmd__copy_cached((char *)recv + roff, (const char *)send + soff, send_counts[r]);
            else {
                m[ns++] = (spmd__message){r, (char *)send + soff, send_counts[r]};
                m[c->size + nr++] = (spmd__message){r, (char *)recv + roff, recv_counts[r]};
            }
            soff += send_counts[r];
            roff += recv_counts[r];
        }
        spmd_status st = spmd__comm_paired_exchange(c, a, ns, m, nr, m + c->size, w);
        free(m);
        return st;
    }
    int tag = spmd__comm_exchange_tag(c, w->key), n = 0;
    MPI_Request *reqs = malloc(2 * (size_t)c->size * sizeof *reqs);
    int *from = malloc(2 * (size_t)c->size * sizeof *from);
    spmd_status st = reqs && from ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == SPMD_OK)
        st = spmd__comm_post_alltoallv(c, tag + 2, send, send_counts, recv, recv_counts, reqs, from,
                                       &n);
    /* this rank's own part */
    size_t soff = 0, roff = 0;
    for (int r = 0; r < c->rank; r++) {
        soff += send_counts[r];
        roff += recv_counts[r];
    }
    if (st == SPMD_OK)
        spmd__copy_cached((char *)recv + roff, (const char *)send + soff, send_counts[c->rank]);
    if (st == SPMD_OK)
        st = check_beside(c, a, w, tag, n, reqs, from, 0, NULL, "all_to_all");
    free(reqs); /* the handles' array: MPI keeps what it still needs of an abandoned request */
    free(from);
    return st;
}

/* Posts an exchange's messages at `tag` (reqs and from hold one entry per message). */
typedef spmd_status (*post_fn)(spmd__comm *c, int tag, const void *arg, MPI_Request *reqs,
                               int *from);

/* Posts n messages with `post`, then checks `a` beside them (check_beside), then streams. */
static spmd_status exchange_beside(spmd__comm *c, const spmd__agreement *a, int n, post_fn post,
                                   const void *arg, int nstreams, spmd__stream *streams,
                                   const char *what, spmd__wait *w)
{
    int tag = spmd__comm_exchange_tag(c, w->key);
    for (int i = 0; i < nstreams; i++)
        streams[i].tag = tag + 2;
    MPI_Request *reqs = malloc((size_t)(n ? n : 1) * sizeof *reqs);
    int *from = malloc((size_t)(n ? n : 1) * sizeof *from);
    spmd_status st = reqs && from ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == SPMD_OK)
        st = post(c, tag + 2, arg, reqs, from);
    if (st == SPMD_OK)
        st = check_beside(c, a, w, tag, n, reqs, from, nstreams, streams, what);
    free(reqs); /* the handles' array: MPI keeps what it still needs of an abandoned request */
    free(from);
    return st;
}

typedef struct message_lists {
    int nsend, nrecv;
    const spmd__message *sends, *recvs;
} message_lists;

static spmd_status post_message_lists(spmd__comm *c, int tag, const void *arg, MPI_Request *reqs,
                                      int *from)
{
    const message_lists *m = arg;
    return spmd__comm_post_messages(c, tag, m->nsend, m->sends, m->nrecv, m->recvs, reqs, from);
}

static void copy_chunk(void *arg, size_t offset, const void *data, size_t bytes)
{
    memcpy((char *)arg + offset, data, bytes);
}

/* The stream with the message's peer: its other direction's, or a new one (a few: a machine's
 * peers). */
static spmd__stream *stream_with(spmd__stream *streams, int *nstreams, int peer)
{
    int k = 0;
    while (k < *nstreams && streams[k].peer != peer)
        k++;
    if (k == *nstreams)
        streams[(*nstreams)++] = (spmd__stream){.peer = peer};
    return &streams[k];
}

/*
 * Marks in streamed[] (the receives, then the sends) the messages that stream through the rings
 * (spmd__comm_ring_streams): longer than STREAM_ABOVE_BYTES, the peer on this machine, and no
 * other message of its list with that peer. Alike on both sides when the calls are alike (the
 * agreement runs before any stream).
 */
static spmd_status mark_streams(spmd__comm *c, int nsend, const spmd__message *sends, int nrecv,
                                const spmd__message *recvs, int *streamed)
{
    if (!mark_single_peers(nrecv, recvs, streamed) ||
        !mark_single_peers(nsend, sends, streamed + nrecv))
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < nsend + nrecv; i++) {
        const spmd__message *m = i < nrecv ? &recvs[i] : &sends[i - nrecv];
        streamed[i] =
            streamed[i] && m->bytes > stream_above() && spmd__comm_ring_stream_usable(c, m->peer);
    }
    return SPMD_OK;
}

/* Splits the lists into streams (mark_streams) and the messages that stay with MPI (mpi,
 * whose lists lie in kept); host: the buffers
 * lie in host memory, the sends' unchanged until the exchange ends (a peer may read them). */
static spmd_status split_streams(spmd__comm *c, int nsend, const spmd__message *sends, int nrecv,
                                 const spmd__message *recvs, int host, int *nstreams,
                                 spmd__stream *streams, message_lists *mpi, spmd__message *kept)
{
    int n = nsend + nrecv, *streamed = malloc((size_t)(n ? n : 1) * sizeof *streamed);
    SPMD_REQUIRE(streamed != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    spmd_status st = mark_streams(c, nsend, sends, nrecv, recvs, streamed);
    *nstreams = 0;
    mpi->nsend = mpi->nrecv = 0;
    mpi->recvs = kept;
    mpi->sends = kept + nrecv;
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        int is_send = i >= nrecv;
        const spmd__message *m = is_send ? &sends[i - nrecv] : &recvs[i];
        spmd__stream *s = streamed[i] ? stream_with(streams, nstreams, m->peer) : NULL;
        if (s && is_send) {
            s->send = m->data;
            s->sbytes = m->bytes;
            s->send_stays = host;
        } else if (s) {
            s->take = copy_chunk;
            s->arg = m->data;
            s->into = host ? m->data : NULL;
            s->rbytes = m->bytes;
        } else if (is_send) {
            kept[nrecv + mpi->nsend++] = *m;
        } else {
            kept[mpi->nrecv++] = *m;
        }
    }
    free(streamed);
    return st;
}

/* spmd__comm_checked_exchange, its errors naming `what`. */
static spmd_status exchange_streamed(spmd__comm *c, const spmd__agreement *a, int nsend,
                                     const spmd__message *sends, int nrecv,
                                     const spmd__message *recvs, int host, const char *what,
                                     spmd__wait *w)
{
    int n = nsend + nrecv, nstreams = 0, longer = 0;
    for (int i = 0; i < n; i++) { /* MPI's limit on every message: the same wherever it goes */
        size_t bytes = i < nrecv ? recvs[i].bytes : sends[i - nrecv].bytes;
        SPMD_REQUIRE(bytes <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                     "%s: a block of more than 2 GiB exceeds MPI's int counts", what);
        longer |= bytes > stream_above(); /* the usual small ones: nothing to sort out */
    }
    if (!longer) {
        message_lists all = {nsend, nrecv, sends, recvs};
        return exchange_beside(c, a, n, post_message_lists, &all, 0, NULL, what, w);
    }
    spmd__stream *streams = malloc((size_t)(n ? n : 1) * sizeof *streams);
    spmd__message *kept = malloc((size_t)(n ? n : 1) * sizeof *kept);
    message_lists mpi;
    spmd_status st =
        streams && kept ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == SPMD_OK)
        st = split_streams(c, nsend, sends, nrecv, recvs, host, &nstreams, streams, &mpi, kept);
    if (st == SPMD_OK)
        st = exchange_beside(c, a, mpi.nsend + mpi.nrecv, post_message_lists, &mpi, nstreams,
                             streams, what, w);
    free(streams);
    free(kept);
    return st;
}

spmd_status spmd__comm_checked_exchange(spmd__comm *c, const spmd__agreement *a, int nsend,
                                        const spmd__message *sends, int nrecv,
                                        const spmd__message *recvs, spmd__wait *w)
{
    return exchange_streamed(c, a, nsend, sends, nrecv, recvs, 0, "the ppermute exchange", w);
}

spmd_status spmd__comm_checked_exchange_host(spmd__comm *c, const spmd__agreement *a, int nsend,
                                             const spmd__message *sends, int nrecv,
                                             const spmd__message *recvs, spmd__wait *w)
{
    return exchange_streamed(c, a, nsend, sends, nrecv, recvs, 1, "the ppermute exchange", w);
}

/* A large all-gather of whole blocks within one machine, or of two ranks anywhere: each rank's
 * blocks straight to every other rank beside the agreement, streamed through the rings where a
 * pair has them (else MPI). The ranks are a machine's processes (a few) or two, so a message to
 * each is no more than MPI's ring. */
static spmd_status allgather_streamed(spmd__comm *c, const spmd__agreement *a, char *recv,
                                      const spmd__block_layout *layout, const size_t *counts,
                                      const size_t *displs, spmd__wait *w)
{
    size_t unit = layout->run;
    int n = c->size - 1;
    for (int r = 0; r < c->size; r++) /* MPI's limit, as where the processes span machines */
        SPMD_REQUIRE((counts[r] + displs[r]) * unit <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                     "all_gather: more than 2 GiB in one cross-process collective exceeds MPI's "
                     "int counts; split the array into smaller pieces");
    spmd__message *m = malloc(2 * (size_t)(n ? n : 1) * sizeof *m);
    SPMD_REQUIRE(m != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    /* the input's clean lines rather than the copy just written (the reader's copy then
     * needs nothing from this process's caches) */
    char *mine = layout->own ? (char *)(uintptr_t)layout->own : recv + displs[c->rank] * unit;
    for (int r = 0, k = 0; r < c->size; r++) {
        if (r == c->rank)
            continue;
        m[k] = (spmd__message){r, recv + displs[r] * unit, counts[r] * unit};
        m[n + k++] = (spmd__message){r, mine, counts[c->rank] * unit};
    }
    /* whole blocks of host memory (collectives_gather.c); the caller's untouched meanwhile */
    spmd_status st = exchange_streamed(c, a, n, m + n, n, m, 1, "all_gather", w);
    free(m);
    return st;
}

/* ---- large collectives straight between the blocks: the agreement with the data (two ranks,
 * a machine's processes), or first, then MPI ---- */

spmd_status spmd__comm_checked_allgather_placed(spmd__comm *c, const spmd__agreement *a, void *recv,
                                                const spmd__block_layout *layout,
                                                const size_t *counts, const size_t *displs,
                                                spmd__wait *w)
{
    if (c->size == 1)
        return SPMD_OK;
    int linked = spmd__comm_on_linked_machine(c);
    if (layout->outer == 1 && c->size == 2) {
        /* Two ranks: one message each way. Up to a combined message (within a machine that
         * made its rings, up to where the data streams) it carries the agreement, through the
         * communicator's buffers but without the caller's scratch (medians of 4 runs at 2 x 1,
         * with the caller's tables on the stack, of MPI_Allgather: 16-512 B of output 0.54-0.60
         * -> 0.70-0.74, 1-4 KiB 0.71-0.78 -> 0.89-0.95). Beyond, the agreement runs beside the
         * data: between machines, where it was a round trip before MPI's (medians of 7 runs
         * over TCP at 2 x 1: 64 KiB of output 0.83 -> 0.91, 128 KiB 0.82 -> 0.91, 256 KiB
         * 0.85 -> 0.93). */
        size_t bytes[2] = {counts[0] * layout->run, counts[1] * layout->run};
        if (displs[0] == 0 && displs[1] == counts[0] &&
            bytes[0] + bytes[1] <=
                (linked ? SPMD__COMM_LINKED_GATHER_BYTES : SPMD__COMM_COMBINED_BYTES))
            return spmd__comm_checked_allgatherv(c, a, NULL, recv, bytes, w);
        return allgather_streamed(c, a, recv, layout, counts, displs, w);
    }
    if (layout->outer == 1 && linked)
        return allgather_streamed(c, a, recv, layout, counts, displs, w);
    SPMD_CHECK(spmd__xchg_check_then_whole(c, a, w));
    spmd_status st = spmd__comm_allgather_placed_agreed(c, recv, layout, counts, displs);
    w->data_pending = st != SPMD_OK;
    return st;
}

typedef struct piece_lists {
    int nsend, nrecv;
    const spmd__piece_message *sends, *recvs;
} piece_lists;

static spmd_status post_piece_lists(spmd__comm *c, int tag, const void *arg, MPI_Request *reqs,
                                    int *from)
{
    const piece_lists *m = arg;
    return spmd__comm_post_pieces(c, tag, m->nsend, m->sends, m->nrecv, m->recvs, reqs, from);
}

/* A stream's side made of boxes: the next bytes read from them or written into them. */
static void fill_from_pieces(void *arg, char *dst, size_t bytes, int streaming)
{
    spmd__piece_cursor_read(arg, dst, bytes, streaming);
}

static void take_into_pieces(void *arg, size_t offset, const void *data, size_t bytes)
{
    (void)offset; /* chunks come in order */
    spmd__piece_cursor_write(arg, data, bytes);
}

spmd_status spmd__comm_checked_exchange_pieces(spmd__comm *c, const spmd__agreement *a, int nsend,
                                               const spmd__piece_message *sends, int nrecv,
                                               const spmd__piece_message *recvs, spmd__wait *w)
{
    int n = nsend + nrecv, n1 = n ? n : 1, nstreams = 0, longer = 0;
    for (int i = 0; i < n; i++) {
        const spmd__piece_message *m = i < nrecv ? &recvs[i] : &sends[i - nrecv];
        for (int k = 0; k < m->npieces; k++) /* MPI's limit: the same wherever it goes */
            for (int d = 0; d < m->pieces[k].ndim; d++)
                SPMD_REQUIRE(m->pieces[k].shape[d] <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                             "all_to_all: a block dimension of %lld elements exceeds MPI's int "
                             "counts (2^31 - 1)",
                             (long long)m->pieces[k].shape[d]);
        /* the usual small ones: nothing to sort out */
        longer |= spmd__pieces_bytes(m->pieces, m->npieces) > stream_above();
    }
    if (!longer) {
        piece_lists all = {nsend, nrecv, sends, recvs};
        return exchange_beside(c, a, n, post_piece_lists, &all, 0, NULL, "all_to_all", w);
    }
    /* each message as its peer and length, to mark the ones that stream */
    spmd__message *sized = calloc((size_t)n1, sizeof *sized);
    int *streamed = malloc((size_t)n1 * sizeof *streamed);
    spmd__stream *streams = malloc((size_t)n1 * sizeof *streams);
    spmd__piece_cursor *cursors = malloc((size_t)n1 * sizeof *cursors);
    spmd__piece_message *kept = malloc((size_t)n1 * sizeof *kept);
    spmd_status st = sized && streamed && streams && cursors && kept
                         ? SPMD_OK
                         : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        const spmd__piece_message *m = i < nrecv ? &recvs[i] : &sends[i - nrecv];
        sized[i] = (spmd__message){m->peer, NULL, spmd__pieces_bytes(m->pieces, m->npieces)};
    }
    if (st == SPMD_OK)
        st = mark_streams(c, nsend, sized + nrecv, nrecv, sized, streamed);
    piece_lists mpi = {0, 0, kept + nrecv, kept};
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        int is_send = i >= nrecv;
        const spmd__piece_message *m = is_send ? &sends[i - nrecv] : &recvs[i];
        if (!streamed[i]) {
            if (is_send)
                kept[nrecv + mpi.nsend++] = *m;
            else
                kept[mpi.nrecv++] = *m;
            continue;
        }
        spmd__stream *s = stream_with(streams, &nstreams, m->peer);
        spmd__piece_cursor_init(&cursors[i], m->pieces, m->npieces);
        /* one run (a block's whole rows): sent from where it lies, which may be read
         * straight there; the caller's blocks stay untouched until the exchange ends */
        void *run = spmd__piece_cursor_one_run(&cursors[i]);
        if (is_send) {
            s->send = run;
            s->send_stays = run != NULL;
            s->fill = run ? NULL : fill_from_pieces;
            s->fill_arg = &cursors[i];
            s->sbytes = sized[i].bytes;
        } else {
            s->take = take_into_pieces;
            s->arg = &cursors[i];
            s->into = run;
            s->rbytes = sized[i].bytes;
        }
    }
    if (st == SPMD_OK)
        st = exchange_beside(c, a, mpi.nsend + mpi.nrecv, post_piece_lists, &mpi, nstreams, streams,
                             "all_to_all", w);
    free(sized);
    free(streamed);
    free(streams);
    free(cursors);
    free(kept);
    return st;
}
