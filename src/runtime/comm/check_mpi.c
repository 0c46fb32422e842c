/*
 * The control plane between processes: checked exchanges by recursive doubling.
 *
 * Every message carries a header (a trailer after its payload: 16 bytes while all is well, 64
 * once something failed): the least and greatest fingerprint seen so far and the lowest ranks
 * holding them, and the ranks found missing with what was heard of them. n ranks exchange in
 * ceil(log2 n) rounds: rank r and rank r ^ 2^k swap what they know in round k, so after the
 * last round every rank knows every fingerprint through min and max (equal <=> all agree).
 * Ranks beyond the largest power of two p2 first hand their part to rank r - p2 and get the
 * result back at the end. A payload may follow the header: the data of a small collective
 * (reduced or gathered along the way, so the check costs no extra message) or a record that
 * callers merge (shard_map's outcome).
 *
 * A rank that never arrives is named by the rank that waited for it in vain, which marks it
 * missing and goes on with the later rounds: everyone ends with the same verdict, or with the
 * list of missing ranks. Waits of round k end k * stagger after those of round 0, the last one
 * a stagger before the common deadline, so that a rank that gave up on a missing partner has told
 * its later partners before they give up on it. When fingerprints differ, a second exchange of the
 * same shape carries the two descriptions the message quotes: the success path never formats or
 * sends text.
 */
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/comm_mpi_impl.h"
#include "runtime/comm/host_rings.h"
#include "runtime/comm/check_mpi_impl.h"
#include "runtime/base/stream_copy.h"

#define lock spmd__mpi_lock
#define unlock spmd__mpi_unlock

/* ---- headers ---- */

static void header_init(header *h, uint64_t fingerprint, int rank)
{
    h->fp_min = h->fp_max = fingerprint;
    h->rank_min = h->rank_max = rank;
    for (int i = 0; i < LISTED; i++)
        h->missing[i] = h->waits_for[i] = -1;
    h->flags = h->unused = 0;
}

/* Of two processes' news of a missing one, the one every process keeps, whatever the order of
 * merges: GONE over a process it waits for (the lowest) over ALIVE over NOT_HEARD. */
static int32_t stronger(int32_t a, int32_t b)
{
    if (a == GONE || b == GONE)
        return GONE;
    if (a >= 0 && b >= 0)
        return a < b ? a : b;
    return a >= 0 ? a : b >= 0 ? b : a == ALIVE ? a : b;
}

/* Lists `rank` as missing, with what was heard of it (waits_for). */
static void add_missing_heard(header *h, int rank, int32_t waits_for)
{
    int i = 0;
    while (i < LISTED && h->missing[i] >= 0 && h->missing[i] < rank)
        i++;
    if (i < LISTED && h->missing[i] == rank) {
        h->waits_for[i] = stronger(h->waits_for[i], waits_for);
        return;
    }
    if (i == LISTED) {
        h->flags |= FLAG_MORE_MISSING;
        return;
    }
    if (h->missing[LISTED - 1] >= 0)
        h->flags |= FLAG_MORE_MISSING;
    size_t moved = (size_t)(LISTED - 1 - i) * sizeof h->missing[0];
    memmove(&h->missing[i + 1], &h->missing[i], moved);
    memmove(&h->waits_for[i + 1], &h->waits_for[i], moved);
    h->missing[i] = rank;
    h->waits_for[i] = waits_for;
}

static void add_missing(header *h, int rank) { add_missing_heard(h, rank, NOT_HEARD); }

static int listed_missing(const header *h, int rank)
{
    for (int i = 0; i < LISTED && h->missing[i] >= 0; i++)
        if (h->missing[i] == rank)
            return 1;
    return 0;
}

void spmd__header_merge(header *h, const header *in)
{
    if (in->fp_min < h->fp_min || (in->fp_min == h->fp_min && in->rank_min < h->rank_min)) {
        h->fp_min = in->fp_min;
        h->rank_min = in->rank_min;
    }
    if (in->fp_max > h->fp_max || (in->fp_max == h->fp_max && in->rank_max < h->rank_max)) {
        h->fp_max = in->fp_max;
        h->rank_max = in->rank_max;
    }
    for (int i = 0; i < LISTED && in->missing[i] >= 0; i++)
        add_missing_heard(h, in->missing[i], in->waits_for[i]);
    h->flags |= in->flags;
}

int spmd__header_failed(const header *h)
{
    return h->missing[0] >= 0 || h->fp_min != h->fp_max || (h->flags & FLAG_SIZE);
}

/* The communicator keeps one receive posted for notes, tested with each step's messages (no
 * probe of its own on the fast path). Called locked. */
static void post_note_receive(spmd__comm *c)
{
    MPI_Irecv(c->note_buf, (int)sizeof c->note_buf, MPI_BYTE, MPI_ANY_SOURCE, spmd__comm_note_tag(),
              c->comm, &c->note_req);
}

/* A note came (status: its sender): it counts when it is about this exchange; the receive is
 * posted again either way. Called locked. */
static void take_note(xchg *x, const MPI_Status *status)
{
    spmd__comm *c = x->c;
    note n;
    memcpy(&n, c->note_buf, sizeof n);
    if (n.tag == x->tag && (n.h.fp_min == x->h.fp_min || n.h.fp_max == x->h.fp_min))
        for (int r = 0; r < c->size; r++)
            if (c->peer[r] == status->MPI_SOURCE && x->late_by < 0)
                x->late_by = r;
    post_note_receive(c);
}

/*
 * On the wire the header is a trailer after the payload, in one of two forms: 16 bytes while
 * every fingerprint seen is the same and nothing failed (the fingerprint and the lowest rank
 * holding it), else all of it. Its last word says which. Small: a payload of up to 240 bytes
 * stays within the 256 bytes that Open MPI's shared-memory transport sends fastest.
 */

/* Writes h after `payload` bytes of msg, with the exchange's stamp; returns the message's
 * size. */
size_t spmd__header_seal(const header *h, uint32_t stamp, char *msg, size_t payload)
{
    if (h->fp_min == h->fp_max && h->missing[0] < 0 && h->flags == 0) {
        seal_compact t = {h->fp_min, stamp, SEAL_COMPACT};
        memcpy(msg + payload, &t, sizeof t);
        return payload + sizeof t;
    }
    seal_full t;
    memset(&t, 0, sizeof t);
    t.h = *h;
    t.stamp = stamp;
    t.kind = SEAL_FULL;
    memcpy(msg + payload, &t, sizeof t);
    return payload + sizeof t;
}

/* The stamp of a message of `got` bytes; 0 when it is not one of ours (or was cut). */
uint32_t spmd__header_stamp_of(const char *msg, size_t got)
{
    uint32_t kind = 0, stamp = 0;
    if (got < sizeof(seal_compact))
        return 0;
    memcpy(&kind, msg + got - sizeof kind, sizeof kind);
    if ((kind == SEAL_COMPACT) || (kind == SEAL_FULL && got >= sizeof(seal_full)))
        memcpy(&stamp, msg + got - 2 * sizeof stamp, sizeof stamp);
    return stamp;
}

/* Reads the trailer of a message of `got` bytes from rank `sender`; 0 when it is not one of
 * ours (or was cut). */
int spmd__header_unseal(const char *msg, size_t got, int sender, header *h, size_t *payload)
{
    uint32_t kind = 0;
    if (got < sizeof(seal_compact))
        return 0;
    memcpy(&kind, msg + got - sizeof kind, sizeof kind);
    if (kind == SEAL_COMPACT) {
        seal_compact t;
        memcpy(&t, msg + got - sizeof t, sizeof t);
        header_init(h, t.fp, sender);
        *payload = got - sizeof t;
        return 1;
    }
    if (kind == SEAL_FULL && got >= sizeof(seal_full)) {
        seal_full t;
        memcpy(&t, msg + got - sizeof t, sizeof t);
        *h = t.h;
        *payload = got - sizeof t;
        return 1;
    }
    return 0;
}

/* Receives are posted for the largest message an exchange over the same tag may carry (a small
 * collective's), so that a mismatched one arrives whole and its trailer can be read. */
static size_t recv_capacity(size_t capacity)
{
    return (capacity > SPMD__COMM_COMBINED_BYTES ? capacity : SPMD__COMM_COMBINED_BYTES) + SEAL_MAX;
}

/* ---- one step: a send and a receive, the receive against a deadline ---- */

/* The partner's message was waiting when this step began: the partner may have given up on
 * this rank since, and its note may sit behind that message, not yet taken in by MPI's
 * progress. One more test (start-up, where arrivals are far apart: up to 2 ms of them) lets
 * it in. Called unlocked. */
static void look_for_late_note(xchg *x)
{
    spmd__comm *c = x->c;
    int64_t until = x->w->spread_arrivals ? spmd__now_ns() + 2000000 : 0; /* 0: one test */
    do {
        MPI_Status status;
        int arrived = 0;
        lock();
        if (c->note_req == MPI_REQUEST_NULL)
            post_note_receive(c);
        int rc = MPI_Test(&c->note_req, &arrived, &status);
        if (rc == MPI_SUCCESS && arrived)
            take_note(x, &status);
        unlock();
        if (rc != MPI_SUCCESS || x->late_by >= 0)
            return;
    } while (until && spmd__now_ns() < until);
}

/* A verdict of the notes between processes (calls.h) that ends wait w, as its status. */
static spmd_status verdict_for(const xchg *x)
{
    int kind = spmd__calls_has_verdict();
    if (!kind || (kind == 1 && x->w->settled_only))
        return SPMD_OK;
    return spmd__calls_verdict(NULL);
}

int spmd__xchg_cancelled(xchg *x, int64_t now)
{
    if (now < x->next_cancel_check || x->w->no_stop)
        return 0;
    x->next_cancel_check = now + CANCEL_EVERY_NS;
    spmd_status st = verdict_for(x);
    if (st == SPMD_OK && x->w->cancelled)
        st = x->w->cancelled(x->w->arg);
    if (st == SPMD_OK)
        return 0;
    x->stopped = st;
    return 1;
}

void spmd__xchg_broken(xchg *x, int rc, const char *what)
{
    if (!x->broken && x->stopped == SPMD_OK)
        x->stopped = spmd__mpi_failure(rc, what);
    x->broken = 1;
}

/* The exchange, for the notes that go through the rings. */
static uint64_t ring_token(const xchg *x)
{
    return (x->c->wire * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(uint32_t)x->tag << 32) ^ x->stamp;
}

/* A message of `count` bytes came for this step into rbuf (rcap + 1: longer than rcap): 1 when
 * it is this exchange's, 0 when an exchange given up on that had this tag left it. */
int spmd__xchg_is_current(const xchg *x, const void *rbuf, size_t count, size_t rcap)
{
    if (count > rcap)
        return 1; /* a longer message: the header came first */
    uint32_t stamp = spmd__header_stamp_of(rbuf, count);
    return !stamp || stamp == x->stamp;
}

/* The receive of a step from a peer that writes into a ring: the ring's message; else (now and
 * then) one that came through MPI instead (too long for a slot, or the ring was full), whose
 * receive then goes on in *req like any other (it may be long: a sender that stops half way
 * must not hold this rank). */
static void ring_receive(xchg *x, int from, void *rbuf, size_t rcap, int probe_mpi, size_t *got,
                         int *done, MPI_Request *req)
{
    spmd__comm *c = x->c;
    long n;
    while ((n = spmd__ring_take(c->processes[from], c->wire, x->tag, rbuf, rcap)) >= 0)
        if (spmd__xchg_is_current(x, rbuf, (size_t)n, rcap)) {
            *got = (size_t)n;
            *done = 1;
            return;
        }
    if (!probe_mpi || *req != MPI_REQUEST_NULL)
        return;
    int flag = 0;
    MPI_Message message;
    lock();
    int rc = MPI_Improbe(c->peer[from], x->tag, c->comm, &flag, &message, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && flag)
        rc = MPI_Imrecv(rbuf, (int)rcap, MPI_BYTE, &message, req);
    unlock();
    if (rc != MPI_SUCCESS)
        spmd__xchg_broken(x, rc, "MPI_Imrecv");
}

/* A ring message came while a receive through MPI was posted into rbuf (the exchanges differ):
 * the receive is called off. 0 when it cannot be (its message is half in, from a sender that
 * stopped: rbuf stays with MPI); else 1, with *done set when the receive had a message of this
 * exchange, which stays in rbuf. */
static int call_off_receive(xchg *x, MPI_Request *req, void *rbuf, size_t rcap, size_t *got,
                            int *done)
{
    MPI_Status status;
    int settled = spmd__comm_cancel_receive(req, &status);
    if (settled == SPMD__STUCK) {
        spmd__comm_detach_buffer(x->c, 1);
        return 0;
    }
    if (settled == SPMD__ARRIVED) {
        int count = 0;
        MPI_Get_count(&status, MPI_BYTE, &count);
        size_t n = status.MPI_ERROR == MPI_ERR_TRUNCATE ? rcap + 1 : (size_t)count;
        if (spmd__xchg_is_current(x, rbuf, n, rcap)) {
            *got = n;
            *done = 1;
        }
    }
    return 1;
}

/* A note that says the awaited peer went past this wait is confirmed only after this many
 * full looks (its ring and MPI: each look runs MPI's progress, which takes in a few messages at
 * a time) found nothing: a message that came through MPI while this wait looked at its ring
 * alone is not taken for a missing one. */
#define CONFIRM_LOOKS 3

/* One full look found the awaited message still missing (`missing`) under `suspicion`. */
void spmd__xchg_weigh_doubt(doubt *d, int tracked, uint64_t suspicion, int missing)
{
    if (!suspicion || !missing)
        return;
    if (d->suspicion != suspicion) {
        d->suspicion = suspicion;
        d->looks = 0;
    }
    if (++d->looks >= CONFIRM_LOOKS)
        spmd__calls_wait_confirm(tracked, suspicion);
}

/* In a step with a ring, MPI is polled every this many tests (its progress costs more than a
 * look at a ring): for a message that came through it, the note receive and a send; every
 * RING_MPI_RARELY tests when this rank's message went into a ring (the partner's, as long,
 * comes through MPI then only when its ring was full, or when the exchanges differ). */
#define RING_MPI_EVERY 16 /* powers of two: a look tests a mask, not a division */
#define RING_MPI_RARELY 256
_Static_assert((RING_MPI_EVERY & (RING_MPI_EVERY - 1)) == 0 &&
                   (RING_MPI_RARELY & (RING_MPI_RARELY - 1)) == 0,
               "a look at MPI tests a mask: powers of two");
/* ... and waits for a ring longer than this yield the core between looks. */
#define RING_SPIN_NS 1000000

/* Whom a rank meets in the reduction: in rank order, the ranks r >= p2 first fold into
 * r - p2; in the canonical order of runtime/base/tree.h (one block per rank), block
 * 2i + 1 < 2 rem folds into block 2i, and the p2 blocks left meet by recursive doubling in
 * block order. */
typedef struct pairing {
    int is_extra, has_extra, extra; /* the rank folded into, or folding into this one */
    int index;                      /* this rank's among the p2 */
    int rem;
    const spmd__tree_inputs *order;
} pairing;

static pairing pairing_of(const spmd__comm_topology *t, const spmd__tree_inputs *order)
{
    pairing p = {t->is_extra, t->has_extra, t->is_extra ? t->me - t->p2 : t->me + t->p2,
                 t->me,       t->n - t->p2, order};
    if (order) {
        int v = order->my_vrank;
        p.is_extra = v < 2 * p.rem && (v & 1);
        p.has_extra = v < 2 * p.rem && !(v & 1);
        p.extra = p.is_extra || p.has_extra ? order->rank_of_vrank[v ^ 1] : -1;
        p.index = v < 2 * p.rem ? v / 2 : v - p.rem;
    }
    return p;
}

/* The rank this one meets in round k. */
static int partner_at(const pairing *p, int k)
{
    int i = p->index ^ (1 << k);
    return p->order ? p->order->rank_of_vrank[i < p->rem ? 2 * i : i + p->rem] : i;
}

/* The partners of the steps from x->ahead_level on, asked where they are when a step's wait
 * lasts (spmd__comm_track): a verdict naming one of them missing can then tell a live one that
 * waits for another. A roll call skips those already missing. Built only then: a step that
 * waits briefly pays two stores. Kept out of the step's loop (inlined there it cost a 2 x 1
 * call 0.01-0.03 us). */
SPMD__COLD static int look_ahead(const xchg *x, int ahead[SPMD__WAIT_AHEAD])
{
    int n = 0;
    if (!x->pairing || x->pairing->is_extra) /* its one step is its last */
        return 0;
    for (int k = x->ahead_level; k < x->t.levels && n < SPMD__WAIT_AHEAD; k++) {
        int partner = partner_at(x->pairing, k);
        if (!(x->skip_missing && listed_missing(&x->h, partner)))
            ahead[n++] = partner;
    }
    return n;
}

/*
 * Sends sbytes of sbuf to rank `to` (-1: none) and receives at most rcap bytes into rbuf from
 * rank `from` (-1: none), waiting for the receive until `deadline`, then for the send as long.
 * *got is the size of the message received (rcap + 1 when it was longer than rcap).
 * *send_open is set when the send did not complete: sbuf then belongs to MPI. A peer on this
 * machine exchanges through the shared-memory rings (host_rings.h) where it can.
 */
int spmd__xchg_step(xchg *x, int to, const void *sbuf, size_t sbytes, int from, void *rbuf,
                    size_t rcap, int64_t deadline, size_t *got, int *send_open)
{
    spmd__comm *c = x->c;
    MPI_Request reqs[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int done[2] = {from < 0, to < 0};
    *send_open = 0;
    int ring_in = from >= 0 && spmd__ring_from(c->processes[from]);
    if (to >= 0 && spmd__ring_send(c->processes[to], c->wire, x->tag, x->stamp, sbuf, sbytes))
        done[1] = 1;
    /* This rank's message fitted a slot: the partner's, of the same exchange, should too. When
     * it did not, the partner's should come through MPI too: its receive is posted, as without
     * a ring (straight into rbuf), and the ring looked at now and then (exchanges that differ). */
    int hybrid = ring_in && to >= 0 && !done[1];
    int every = to >= 0 && !hybrid ? RING_MPI_RARELY : RING_MPI_EVERY;
    /* On a crowded machine each look yields the core: MPI's turn comes at every one where its
     * message may come through MPI, and at every RING_MPI_EVERY-th otherwise (its progress
     * yields too: a call at 4 x 1 on 2 cores took 1.5x as long when MPI had every look) */
    if (spmd__rings_crowded())
        every = to >= 0 && !hybrid ? RING_MPI_EVERY : 1;
    lock();
    if (from >= 0 && (!ring_in || hybrid))
        MPI_Irecv(rbuf, (int)rcap, MPI_BYTE, c->peer[from], x->tag, c->comm, &reqs[0]);
    if (!done[1])
        MPI_Isend(sbuf, (int)sbytes, MPI_BYTE, c->peer[to], x->tag, c->comm, &reqs[1]);
    if (x->watch_notes) {
        if (c->note_req == MPI_REQUEST_NULL)
            post_note_receive(c);
        reqs[2] = c->note_req;
    }
    unlock();
    int outcome = GOT, tracked = -1, tracked_request = 0, tests = 0, waiting_at_first = 0;
    x->last_from = from;
    int64_t started = 0, received_at = 0, probe_after = 0, now = 0;
    spmd__pause pause;
    doubt suspected = {0, 0};
    for (;;) {
        uint64_t suspicion = spmd__calls_wait_suspicion(tracked);
        /* a suspicion makes every test a full look: the message may be in MPI, unseen */
        int look = suspicion || (tests & (every - 1)) == every - 1; /* every: a power of two */
        int poll_mpi = !ring_in || look || done[0] || reqs[0] != MPI_REQUEST_NULL;
        if (hybrid && look && !done[0] && reqs[0] != MPI_REQUEST_NULL &&
            spmd__ring_ready(c->processes[from], c->wire, x->tag, x->stamp) &&
            !call_off_receive(x, &reqs[0], rbuf, rcap, got, &done[0])) {
            outcome = MISSED; /* its sender stopped half way through a message */
            break;
        }
        if (ring_in && !done[0] && reqs[0] == MPI_REQUEST_NULL)
            ring_receive(x, from, rbuf, rcap, poll_mpi, got, &done[0], &reqs[0]);
        if (ring_in && done[0] && done[1] && !tests) /* the fast path: MPI not called at all */
            poll_mpi = 0, tests++, waiting_at_first = 1;
        if (poll_mpi) {
            /* one call tests them all (each test runs MPI's progress, which may yield) */
            MPI_Status statuses[3];
            int idx[3], n = 0;
            lock();
            int rc = MPI_Testsome(3, reqs, &n, idx, statuses);
            for (int k = 0; n != MPI_UNDEFINED && k < n; k++)
                if (idx[k] == 2) { /* a note, not a message of this step */
                    take_note(x, &statuses[k]);
                    reqs[2] = c->note_req;
                    idx[k] = idx[n - 1];
                    statuses[k] = statuses[n - 1];
                    n--;
                    k--;
                }
            unlock();
            if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
                spmd__xchg_broken(x, rc, "MPI_Testsome");
                break;
            }
            for (int k = 0; n != MPI_UNDEFINED && k < n; k++) {
                int i = idx[k], err = rc == MPI_ERR_IN_STATUS ? statuses[k].MPI_ERROR : MPI_SUCCESS;
                done[i] = 1;
                int cls = MPI_SUCCESS;
                if (err != MPI_SUCCESS)
                    MPI_Error_class(err, &cls);
                if (i == 0 && cls == MPI_ERR_TRUNCATE) { /* the header came first */
                    *got = rcap + 1;
                } else if (err != MPI_SUCCESS) {
                    spmd__xchg_broken(x, err, "MPI_Testsome");
                    *got = 0;
                } else if (i == 0) {
                    int count = 0;
                    MPI_Get_count(&statuses[k], MPI_BYTE, &count);
                    *got = (size_t)count;
                    if (!spmd__xchg_is_current(x, rbuf, *got, rcap)) {
                        /* left by an exchange given up on that had this tag: not this one's
                         * (with a ring, the next look at it and at MPI goes on) */
                        done[0] = 0;
                        lock();
                        if (!ring_in)
                            MPI_Irecv(rbuf, (int)rcap, MPI_BYTE, c->peer[from], x->tag, c->comm,
                                      &reqs[0]);
                        unlock();
                    }
                }
            }
        }
        if (x->broken)
            break;
        waiting_at_first |= tests++ == 0 && from >= 0 && done[0];
        if (done[0] && done[1])
            break;
        if (x->w->meanwhile && !x->w->meanwhile(x->w->meanwhile_arg))
            x->w->meanwhile = NULL;
        /* a message matched in MPI (its receive under way) is not missing: it may come in
         * parts, from a sender that has gone on */
        spmd__xchg_weigh_doubt(&suspected, tracked, suspicion,
                               !done[tracked_request] && !(tracked_request == 0 && ring_in &&
                                                           !hybrid && reqs[0] != MPI_REQUEST_NULL));
        if (!started || (tests & 7) == 0) /* as in spmd__comm_paired_exchange */
            now = spmd__coarse_now_ns();
        if (!started) {
            started = now;
            spmd__pause_begin(&pause, now);
            if (x->next_cancel_check == 0)
                x->next_cancel_check = now + CANCEL_FIRST_NS;
            probe_after = spmd__calls_probe_after_ns();
        }
        if (now > deadline) {
            outcome = done[0] ? GOT : MISSED;
            break;
        }
        if (tracked < 0 && now - started > probe_after) {
            tracked_request = done[0];
            int ahead[SPMD__WAIT_AHEAD];
            int num_ahead = look_ahead(x, ahead);
            tracked = spmd__comm_track(c, x->a, x->w, !done[0] ? from : to, ahead, num_ahead);
        }
        if (tracked >= 0)
            spmd__calls_poll_notes();
        /* a ring is polled without MPI's progress, which would yield the core when others
         * wait for it: so does a wait for a ring on a crowded machine, or after a while */
        if (ring_in && !done[0]) {
            /* the core is kept only for what comes through MPI: else both go through rings */
            pause.holds_core = hybrid || reqs[0] != MPI_REQUEST_NULL;
            spmd__pause_step(&pause, now, spmd__rings_crowded() ? 0 : RING_SPIN_NS);
        }
        /* Once the partner's message is in, its receive for ours is posted: our send ends
         * soon, unless the partner stopped since (a long message waits for it to take the
         * rest). The send then stays with MPI. */
        if (done[0] && !received_at)
            received_at = now;
        if (done[0] && to == from && now - received_at > x->stagger)
            break;
        if (spmd__xchg_cancelled(x, now)) {
            outcome = STOPPED;
            break;
        }
    }
    spmd__calls_wait_end(tracked);
    if (waiting_at_first && x->watch_notes && x->late_by < 0 && outcome == GOT) {
        if (!ring_in)
            look_for_late_note(x);
        else if (spmd__ring_gave_up(c->processes[from], ring_token(x)))
            x->late_by = from; /* its note through MPI may come later than its message */
    }
    if (!done[0] && reqs[0] != MPI_REQUEST_NULL) { /* one that matched before the cancel ends */
        MPI_Status status;
        int settled = spmd__comm_cancel_receive(&reqs[0], &status);
        if (settled == SPMD__ARRIVED) {
            int count = 0;
            MPI_Get_count(&status, MPI_BYTE, &count);
            size_t n = status.MPI_ERROR == MPI_ERR_TRUNCATE ? rcap + 1 : (size_t)count;
            if (spmd__xchg_is_current(x, rbuf, n,
                                      rcap)) { /* not one an exchange given up on left */
                *got = n;
                if (outcome == MISSED)
                    outcome = GOT;
            }
        } else if (settled == SPMD__STUCK) {
            spmd__comm_detach_buffer(c, 1); /* MPI may still write rbuf */
        }
    }
    if (!done[1]) { /* MPI keeps reading sbuf (staging buffer 0) until the send ends */
        spmd__comm_leave_send(c, &reqs[1], 0);
        *send_open = 1;
    }
    return x->broken ? STOPPED : outcome;
}

/* After a send that did not complete: MPI keeps reading S, so go on in a fresh buffer holding
 * the same bytes. 0 when out of memory (the exchange is then stopped). */
static int renew_send_buffer(xchg *x, char **S, size_t bytes)
{
    char *old = *S;
    spmd__comm_detach_buffer(x->c, 0);
    char *fresh = spmd__comm_buffer(x->c, 0, bytes);
    if (!fresh) {
        if (x->stopped == SPMD_OK)
            x->stopped = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
        return 0;
    }
    memcpy(fresh, old, bytes);
    *S = fresh;
    return 1;
}

/* Rank `rank` missed its step: it is marked missing, and told so on the note tag, in case it
 * arrives after all (its partners' messages would otherwise let it finish as if nothing had
 * happened). */
void spmd__xchg_missed(xchg *x, int rank)
{
    add_missing(&x->h, rank);
    spmd__comm *c = x->c;
    spmd__ring_give_up(c->processes[rank], ring_token(x));
    note n = {x->h, x->tag};
    void *copy = spmd__comm_keep_copy(c, &n, sizeof n);
    if (!copy)
        return;
    MPI_Request req;
    lock();
    if (MPI_Isend(copy, (int)sizeof n, MPI_BYTE, c->peer[rank], spmd__comm_note_tag(), c->comm,
                  &req) == MPI_SUCCESS)
        MPI_Request_free(&req);
    unlock();
}

static int64_t deadline_of(const xchg *x, int step_index)
{
    return x->deadline + (int64_t)step_index * x->stagger;
}

/* A step between a rank beyond the largest power of two and its partner. S is not sent from
 * again: a send still open leaves it to MPI. A missed sender is marked (and told). */
static int step_with_extra(xchg *x, int to, const char *S, size_t sent, int from, char *R,
                           size_t rcap, int step_index, size_t *got)
{
    int open = 0;
    int o = spmd__xchg_step(x, to, S, sent, from, R, rcap, deadline_of(x, step_index), got, &open);
    if (open)
        spmd__comm_detach_buffer(x->c, 0);
    if (o == MISSED && !x->skip_missing) /* a roll call only gathers lists */
        spmd__xchg_missed(x, from);
    return o;
}

/* A message of this step, `got` bytes in R: its header is merged; 1 when all is well and its
 * payload is `want` bytes (ANY_SIZE: at most `limit`), its size then in *payload. */
#define ANY_SIZE ((size_t)-1)
static int accept(xchg *x, const char *R, size_t got, size_t want, size_t limit, size_t *payload)
{
    header in;
    if (!spmd__header_unseal(R, got, x->last_from, &in,
                             payload)) { /* not ours, or cut: it cannot be read */
        x->h.flags |= FLAG_SIZE;
        return 0;
    }
    spmd__header_merge(&x->h, &in);
    if (spmd__header_failed(&x->h))
        return 0;
    if (want == ANY_SIZE ? *payload > limit : *payload != want) {
        x->h.flags |= FLAG_SIZE;
        return 0;
    }
    return 1;
}

/* ---- the reduction driver: a record (or a collective's data) merged along the way ---- */

typedef struct reducer {
    size_t *bytes; /* current payload bytes (after the header in S) */
    size_t capacity;
    int fixed; /* every rank's payload has exactly *bytes bytes */
    spmd__combine_fn combine;
    void *arg;
    const spmd__tree_inputs *order; /* NULL: any order (rank order) */
} reducer;

/* What arrived in R (got bytes): header merged, payload combined into S's (or, `replace`,
 * copied over it). */
static void take(xchg *x, const reducer *rd, char *S, const char *R, size_t got, int replace)
{
    size_t payload = 0;
    if (!accept(x, R, got, rd->fixed ? *rd->bytes : ANY_SIZE, rd->capacity, &payload))
        return;
    if (replace) {
        memcpy(S, R, payload);
        *rd->bytes = payload;
    } else if (rd->combine) {
        rd->combine(S, R, payload, rd->arg);
    }
}

/* The message of the current step: the payload while nothing failed, and the trailer. */
static size_t outgoing(xchg *x, char *S, const reducer *rd)
{
    return spmd__header_seal(&x->h, x->stamp, S, spmd__header_failed(&x->h) ? 0 : *rd->bytes);
}

static void reduce_steps(xchg *x, const reducer *rd, char **S, char **R)
{
    const spmd__comm_topology *t = &x->t;
    const pairing pv = *x->pairing, *p = &pv; /* a copy: the original's address escaped */
    size_t cap = recv_capacity(rd->capacity), scap = rd->capacity + SEAL_MAX, got = 0;
    int open = 0, last = t->levels + 1;
    if (p->is_extra) {
        if (x->skip_missing && listed_missing(&x->h, p->extra))
            return;
        size_t sent = outgoing(x, *S, rd); /* its only message */
        if (step_with_extra(x, p->extra, *S, sent, p->extra, *R, cap, last, &got) == GOT)
            take(x, rd, *S, *R, got, 1);
        return;
    }
    int extra = p->has_extra && !(x->skip_missing && listed_missing(&x->h, p->extra));
    if (extra) {
        x->ahead_level = 0;
        int o = step_with_extra(x, -1, NULL, 0, p->extra, *R, cap, 0, &got);
        if (o == STOPPED)
            return;
        if (o == GOT)
            take(x, rd, *S, *R, got, 0);
    }
    for (int k = 0; k < t->levels; k++) {
        int partner = partner_at(p, k);
        if (x->skip_missing && listed_missing(&x->h, partner))
            continue;
        x->ahead_level = k + 1;
        size_t sent = outgoing(x, *S, rd);
        int o = spmd__xchg_step(x, partner, *S, sent, partner, *R, cap, deadline_of(x, k + 1), &got,
                                &open);
        if (open && !renew_send_buffer(x, S, scap))
            return;
        if (o == STOPPED)
            return;
        if (o == GOT)
            take(x, rd, *S, *R, got, 0);
        else if (!x->skip_missing) /* a roll call only gathers lists */
            spmd__xchg_missed(x, partner);
    }
    if (extra) {
        x->ahead_level = t->levels;
        size_t sent = outgoing(x, *S, rd);
        (void)step_with_extra(x, p->extra, *S, sent, -1, NULL, 0, last, &got);
    }
}

/*
 * Runs the exchange with this rank's payload already at the start of S. S and R are the
 * communicator's staging buffers 0 (capacity + SEAL_MAX long) and 1 (recv_capacity).
 */
static void run_reduce(xchg *x, const reducer *rd, char **S, char **R)
{
    pairing p = pairing_of(&x->t, rd->order);
    x->pairing = &p;
    reduce_steps(x, rd, S, R);
    x->pairing = NULL;
}

/* ---- outcome: the verdict every rank reaches ---- */

static void list_ranks(const spmd__comm *c, const header *h, char *out, size_t size)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, out, size);
    for (int i = 0; i < LISTED && h->missing[i] >= 0; i++)
        spmd__strbuf_printf(&sb, "%s%d", i ? ", " : "", c->processes[h->missing[i]]);
    if (h->flags & FLAG_MORE_MISSING)
        spmd__strbuf_printf(&sb, " and others");
}

typedef struct side {
    char text[TEXT];
    int32_t num_fields, list_length;
    uint64_t hashes[SPMD__DETAIL_FIELDS];
    int32_t list[SPMD__DETAIL_LIST];
} side;

typedef struct texts {
    side side[2];
} texts;

static void merge_texts(void *mine, const void *theirs, size_t bytes, void *arg)
{
    (void)arg;
    texts *m = mine;
    const texts *t = theirs;
    if (bytes < sizeof *t)
        return;
    for (int i = 0; i < 2; i++)
        if (!m->side[i].text[0] && t->side[i].text[0])
            m->side[i] = t->side[i];
}

/* " (they differ in ...; the device ids first differ at position 3: 2 against 5)": what two
 * descriptions may not show. */
static void differences(const spmd__agreement *a, const texts *t, int first, char *out, size_t size)
{
    out[0] = '\0';
    if (!a->details)
        return;
    spmd__details mine;
    memset(&mine, 0, sizeof mine);
    a->details(a->arg, &mine); /* for the names, alike on every process */
    const side *s0 = &t->side[first], *s1 = &t->side[!first]; /* in the message's order */
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, out, size);
    int named = 0, alike = strcmp(s0->text, s1->text) == 0;
    for (int f = 0; alike && f < mine.num_fields && f < s0->num_fields && f < s1->num_fields; f++)
        if (s0->hashes[f] != s1->hashes[f])
            spmd__strbuf_printf(&sb, "%s%s",
                                named++ ? ", "
                                        : " (their descriptions read alike: "
                                          "they differ in ",
                                mine.names[f]);
    if (named)
        spmd__strbuf_printf(&sb, ")");
    if (!mine.list_name)
        return;
    int n = s0->list_length < s1->list_length ? s0->list_length : s1->list_length;
    int shown = n < SPMD__DETAIL_LIST ? n : SPMD__DETAIL_LIST;
    for (int k = 0; k < shown; k++)
        if (s0->list[k] != s1->list[k]) {
            spmd__strbuf_printf(&sb, " (the %s first differ at position %d: %d against %d)",
                                mine.list_name, k, (int)s0->list[k], (int)s1->list[k]);
            return;
        }
    if (s0->list_length != s1->list_length)
        spmd__strbuf_printf(&sb, " (the %s number %d against %d)", mine.list_name,
                            (int)s0->list_length, (int)s1->list_length);
}

static spmd_status run_exchange(spmd__comm *c, const spmd__agreement *a, spmd__wait *w,
                                int tag_base, int64_t deadline, void *payload, size_t *bytes,
                                size_t capacity, int fixed, spmd__combine_fn combine, void *arg,
                                const spmd__tree_inputs *order, header *verdict);

/* The wait of an exchange that follows a failed one among the same processes: w's texts and
 * cancellation, a deadline of its own, and only a verdict that abandons the call ends it. */
static spmd__wait follow_up_wait(const spmd__wait *w, int64_t deadline)
{
    spmd__wait quick = {.deadline_ns = deadline,
                        .cancelled = w->cancelled,
                        .arg = w->arg,
                        .what = w->what,
                        .timeout_name = w->timeout_name,
                        .late_told_later = 1,
                        .settled_only = 1};
    return quick;
}

/* Second exchange, after fingerprints differed: the two processes named in the verdict send
 * their descriptions (deadline: a grace period, since everyone is already there). */
static void fetch_texts(spmd__comm *c, const spmd__agreement *a, spmd__wait *w, int tag,
                        const header *v, texts *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < 2; i++) {
        if (c->rank != (i ? v->rank_max : v->rank_min))
            continue;
        side *s = &out->side[i];
        a->describe(a->arg, s->text, TEXT);
        if (a->details) {
            spmd__details d;
            memset(&d, 0, sizeof d);
            a->details(a->arg, &d);
            s->num_fields = d.num_fields;
            memcpy(s->hashes, d.hashes, sizeof s->hashes);
            s->list_length = d.list_length;
            memcpy(s->list, d.list, sizeof s->list);
        }
    }
    int64_t timeout = spmd__comm_timeout_ns();
    int64_t grace = spmd__comm_grace_ns();
    spmd__agreement same = {0, NULL, NULL, NULL};
    spmd__wait quick = follow_up_wait(w, spmd__now_ns() + (grace < timeout ? grace : timeout));
    quick.follows_another = 1;
    size_t bytes = sizeof *out;
    header h;
    if (run_exchange(c, &same, &quick, tag + 1, quick.deadline_ns, out, &bytes, sizeof *out, 1,
                     merge_texts, NULL, NULL, &h) != SPMD_OK)
        out->side[0].text[0] = out->side[1].text[0] = '\0'; /* the message says less */
}

/* What the wait is for, for a message: w->what, or (NULL) the agreement's description. */
const char *spmd__xchg_what_of(const spmd__wait *w, const spmd__agreement *a, char *buf,
                               size_t size)
{
    if (w->what)
        return w->what;
    if (a && a->describe)
        a->describe(a->arg, buf, size);
    else
        spmd__copy_text(buf, size, "an exchange between processes");
    return buf;
}

/* Whom process p, heard from, waits for by its note: the process that said nothing (dead?), or
 * ALIVE. */
static int32_t waiting_for(int p)
{
    int q = spmd__calls_blocking_process(p);
    return q >= 0 ? q : ALIVE;
}

/* What this process knows of missing process p: GONE (seen on its machine), what its note said
 * (waiting_for), or NOT_HEARD. */
static int32_t heard_of(int p)
{
    if (spmd__ring_process_gone(p))
        return GONE;
    return spmd__calls_heard_from(p) ? waiting_for(p) : NOT_HEARD;
}

void spmd__xchg_hear_missing(const spmd__comm *c, header *h)
{
    for (int i = 0; i < LISTED && h->missing[i] >= 0; i++)
        h->waits_for[i] = stronger(h->waits_for[i], heard_of(c->processes[h->missing[i]]));
}

/* Whether process q took part in this exchange: a member not listed missing (a list cut short
 * says nothing of the others). A failure path's search. */
static int came(const spmd__comm *c, const header *h, int q)
{
    if (q == c->processes[c->rank])
        return 1;
    if (h->flags & FLAG_MORE_MISSING)
        return 0;
    for (int r = 0; r < c->size; r++)
        if (c->processes[r] == q)
            return !listed_missing(h, r);
    return 0;
}

/* SPMD_ERR_TIMEOUT naming the processes the header lists as missing. */
spmd_status spmd__xchg_missing_error(const spmd__comm *c, const header *h, const spmd__agreement *a,
                                     spmd__wait *w)
{
    char who[128], what[TEXT], alive[1024] = "";
    list_ranks(c, h, who, sizeof who);
    w->peer_missing = 1;
    /* What the notes between processes (calls.h) said of the missing processes, here or (the
     * header) to another process that came: one that is alive (inside another call, or stuck
     * waiting for one that said nothing: dead?) is not named as missing; the one it waits for
     * is, first. */
    int named[LISTED + 1], num_named = 0, blame[LISTED], here[LISTED], gone[LISTED], renamed = 0;
    int listed = 0;
    for (; listed < LISTED && h->missing[listed] >= 0; listed++) {
        int i = listed, p = c->processes[h->missing[i]];
        int32_t heard = h->waits_for[i];
        gone[i] = heard == GONE; /* as every process that shared the header saw it */
        here[i] = !gone[i] && spmd__calls_heard_from(p);
        if (here[i] && heard == NOT_HEARD)
            heard = waiting_for(p);
        /* one waiting for a process that came (this one among them) is only late */
        int q = heard == NOT_HEARD || gone[i] ? p : heard;
        if (q >= 0 && q != p && came(c, h, q))
            q = p;
        blame[i] = q;
        renamed |= q != p;
        int known = q < 0;
        for (int k = 0; k < num_named; k++)
            known |= named[k] == q;
        if (!known)
            named[num_named++] = q;
    }
    /* this process's notes in full; another's where they changed whom it names */
    int any_alive = 0;
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, alive, sizeof alive);
    for (int i = 0; i < listed; i++) {
        int p = c->processes[h->missing[i]];
        if (gone[i]) {
            spmd__strbuf_printf(&sb, "%sprocess %d has exited", any_alive++ ? "; " : " (", p);
        } else if (here[i]) {
            char seen[512];
            spmd__calls_peer_text(p, seen, sizeof seen);
            spmd__strbuf_printf(&sb, "%s%s", any_alive++ ? "; " : " (", seen);
        } else if (blame[i] != p && num_named > 0) {
            spmd__strbuf_printf(&sb, "%sprocess %d is alive by its note to another process",
                                any_alive++ ? "; " : " (", p);
            if (blame[i] >= 0)
                spmd__strbuf_printf(&sb, ", waiting for process %d", blame[i]);
        }
    }
    if (any_alive)
        spmd__strbuf_printf(&sb, ")");
    if (renamed && num_named > 0) {
        spmd__strbuf wb;
        spmd__strbuf_init(&wb, who, sizeof who);
        for (int k = 0; k < num_named; k++)
            spmd__strbuf_printf(&wb, "%s%d", k ? ", " : "", named[k]);
        if (h->flags & FLAG_MORE_MISSING)
            spmd__strbuf_printf(&wb, " and others");
    }
    if (w->timeout_name)
        return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                          "%s: process(es) %s did not arrive within %s%s; every process must "
                          "make this call, and one that is only slow needs a larger %s",
                          spmd__xchg_what_of(w, a, what, sizeof what), who, w->timeout_name, alive,
                          w->timeout_name);
    return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                      "%s: process(es) %s did not arrive within the collective timeout "
                      "(SPMD_COLLECTIVE_TIMEOUT)%s; every process must issue the same collectives "
                      "in the same order",
                      spmd__xchg_what_of(w, a, what, sizeof what), who, alive);
}

/*
 * After an exchange that found processes missing: those that came compare their lists once more
 * (the exchange's last tag, within a grace period, no wait for a partner already known missing),
 * so that every one of them names the same processes: each list held only those its own steps
 * missed and what reached it before (with several gone, more often than not). The union of
 * the lists, with what each heard of them. Twice, within the same window: a rank whose partner is
 * missing skips that step, and hears only in the second pass what a process met later in the first
 * had heard (5 processes, process 1 dead: 3 meets only 2, which meets 0 after).
 */
static header roll_call(const xchg *x)
{
    header all = x->h;
    /* a list already cut short says "and others" anyway */
    if (x->stopped != SPMD_OK || x->broken || x->w->follows_another ||
        (x->h.flags & FLAG_MORE_MISSING))
        return all;
    /* the processes that came end the exchange within its steps' spread of each other: the
     * window covers that twice, within a grace period; one that does not come (it returned,
     * late or stopped) costs no more, and is not named */
    int64_t grace = spmd__comm_grace_ns(), spread = 2 * (int64_t)(x->t.levels + 2) * x->stagger;
    int64_t window = spread + 100000000 < grace ? spread + 100000000 : grace;
    int64_t end = spmd__now_ns() + window;
    if (x->w->grace_in_deadline && end > x->w->deadline_ns)
        end = x->w->deadline_ns; /* the last step ended at least a stagger before it */
    spmd__agreement none = {0, NULL, NULL, NULL}; /* the lists alone are compared */
    spmd__wait quick = follow_up_wait(x->w, end);
    for (int pass = 0; pass < 2 && !(all.flags & FLAG_MORE_MISSING); pass++) {
        xchg r;
        spmd__xchg_init(&r, x->c, &none, &quick, x->tag + 3, quick.deadline_ns);
        /* the exchange's, whatever the communicator took since; each pass its own, so that a
         * message of the first never counts in the second */
        r.stamp = x->stamp ^ (pass ? 0x80000000u : 0);
        r.skip_missing = 1;
        memcpy(r.h.missing, all.missing, sizeof r.h.missing);
        memcpy(r.h.waits_for, all.waits_for, sizeof r.h.waits_for);
        char *S = spmd__comm_buffer(x->c, 0, SEAL_MAX);
        char *R = spmd__comm_buffer(x->c, 1, recv_capacity(0));
        if (!S || !R)
            break;
        size_t bytes = 0;
        reducer rd = {&bytes, 0, 1, NULL, NULL, NULL};
        run_reduce(&r, &rd, &S, &R);
        if (r.stopped != SPMD_OK || r.broken)
            break;
        for (int i = 0; i < LISTED && r.h.missing[i] >= 0; i++)
            add_missing_heard(&all, r.h.missing[i], r.h.waits_for[i]);
        all.flags |= r.h.flags & FLAG_MORE_MISSING;
    }
    return all;
}

static spmd_status verdict(xchg *x, const spmd__agreement *a)
{
    spmd__comm *c = x->c;
    const header *h = &x->h;
    spmd__wait *w = x->w;
    char what[TEXT];
    if (x->stopped != SPMD_OK)
        return x->stopped;
    if (h->missing[0] >= 0) {
        spmd__xchg_hear_missing(c, &x->h);
        header all = roll_call(x);
        return spmd__xchg_missing_error(c, &all, a, w);
    }
    int pa = c->processes[h->rank_min], pb = c->processes[h->rank_max];
    if (h->fp_min != h->fp_max) {
        texts *t = calloc(1, sizeof *t);
        if (t && a->describe)
            fetch_texts(c, a, w, x->tag, h, t);
        int first = pa > pb; /* the lower process first */
        if (t && t->side[0].text[0] && t->side[1].text[0]) {
            char diff[512];
            differences(a, t, first, diff, sizeof diff);
            spmd_status st = SPMD_ERROR(
                SPMD_ERR_COLLECTIVE_MISMATCH,
                "processes issued different collectives: process %d called %s, process %d "
                "called %s%s; every process must issue the same collectives with the same "
                "shapes in the same order",
                first ? pb : pa, t->side[first].text, first ? pa : pb, t->side[!first].text, diff);
            free(t);
            return st;
        }
        free(t);
        /* the other side's text did not come: this one's own says which call it was */
        char mine[TEXT] = "";
        if (a->describe)
            a->describe(a->arg, mine, sizeof mine);
        return SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH,
                          "%s: processes %d and %d issued different collectives (fingerprints "
                          "%016llx and %016llx); this process (%d) called %s; every process must "
                          "issue the same collectives with the same shapes in the same order",
                          spmd__xchg_what_of(w, a, what, sizeof what), pa, pb,
                          (unsigned long long)h->fp_min, (unsigned long long)h->fp_max,
                          c->processes[c->rank], mine[0] ? mine : "(no description)");
    }
    if (!(h->flags & FLAG_SIZE)) {
        int by = x->late_by;
        if (by >= 0 && w->timeout_name)
            return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                              "%s: this process (%d) arrived after process %d had given up "
                              "waiting for it, more than %s late; every process must make this "
                              "call, and one that is only slow needs a larger %s",
                              spmd__xchg_what_of(w, a, what, sizeof what), c->processes[c->rank],
                              c->processes[by], w->timeout_name, w->timeout_name);
        if (by >= 0)
            return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                              "%s: this process (%d) arrived after process %d had given up "
                              "waiting for it, more than the collective timeout "
                              "(SPMD_COLLECTIVE_TIMEOUT) late; every process must issue the same "
                              "collectives in the same order",
                              spmd__xchg_what_of(w, a, what, sizeof what), c->processes[c->rank],
                              c->processes[by]);
        return SPMD_OK;
    }
    return SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH,
                      "%s: a process sent a message of another size than its partner "
                      "expected; every process must issue the same collectives with the "
                      "same shapes in the same order",
                      spmd__xchg_what_of(w, a, what, sizeof what));
}

/* Sets up an exchange: topology, tag, timing. */
void spmd__xchg_init(xchg *x, spmd__comm *c, const spmd__agreement *a, spmd__wait *w, int tag,
                     int64_t deadline)
{
    memset(x, 0, sizeof *x);
    x->c = c;
    x->w = w;
    x->a = a;
    x->t = spmd__comm_topology_of(c->size, c->rank);
    x->tag = tag;
    x->stamp = c->stamp; /* of the exchange whose tag the caller just took */
    /* at most half of a short window (a grace period) shared out over the steps */
    int64_t s = w->spread_arrivals ? 250000000 : spmd__comm_stagger_ns();
    /* the wait's clock serves its first exchange only: a later one may start long after */
    x->begun = w->begun_ns ? w->begun_ns : spmd__coarse_now_ns();
    w->begun_ns = 0;
    int64_t shares = 2 * (int64_t)(x->t.levels + 2), left = deadline - x->begun;
    if (left < s * shares) { /* near the deadline only: a division on every exchange showed */
        int64_t share = left / shares;
        s = share > 1000000 ? share : 1000000;
    }
    x->stagger = s;
    /* counted back from the deadline, so that the last step ends a stagger before it: what
     * follows a failed exchange (messages, the outcome) fits in before the deadline too */
    x->deadline = deadline - (int64_t)(x->t.levels + 2) * x->stagger;
    x->watch_notes = !w->late_told_later;
    x->late_by = -1;
    header_init(&x->h, a->fingerprint, c->rank);
}

static spmd_status run_exchange(spmd__comm *c, const spmd__agreement *a, spmd__wait *w, int tag,
                                int64_t deadline, void *payload, size_t *bytes, size_t capacity,
                                int fixed, spmd__combine_fn combine, void *arg,
                                const spmd__tree_inputs *order, header *out)
{
    xchg x;
    spmd__xchg_init(&x, c, a, w, tag, deadline);
    char *S = spmd__comm_buffer(c, 0, capacity + SEAL_MAX);
    char *R = spmd__comm_buffer(c, 1, recv_capacity(capacity));
    SPMD_REQUIRE(S && R, SPMD_ERR_OUT_OF_MEMORY,
                 "out of memory for a %zu-byte message between processes", capacity + SEAL_MAX);
    if (*bytes)
        memcpy(S, payload, *bytes);
    reducer rd = {bytes, capacity, fixed, combine, arg, order};
    run_reduce(&x, &rd, &S, &R);
    if (x.stopped == SPMD_OK && !spmd__header_failed(&x.h) && *bytes)
        memcpy(payload, S, *bytes);
    *out = x.h;
    return verdict(&x, a);
}

/*
 * The combined exchange of two ranks by halves, the agreement riding on every message: each
 * sends the half its partner sums; then (rounds 2) the half it summed, where both need the whole
 * vector (recursive halving, then doubling). A reduce-scatter (rounds 1) needs no more than the
 * first round: one round trip where the agreement and the halving took two. A whole vector in
 * two messages stays under MPI's eager limit (64 KiB with its header over TCP) where one message
 * would take a rendezvous, a round trip more (measured over TCP at 64 KiB: one message 67-76 us,
 * the agreement then the halving 59-67 us, these two rounds 51-52 us, MPI_Allreduce 45-53 us).
 * The same sums as the single message's: each half is added by one rank, mine op= the
 * partner's. The kept half is the rank's vrank's half (the reduce-scatter's range).
 */
static spmd_status run_halves(spmd__comm *c, const spmd__agreement *a, spmd__wait *w, int tag,
                              const spmd__tree_inputs *order, char *acc, size_t count, size_t elem,
                              spmd__combine_fn combine, void *arg, int rounds)
{
    xchg x;
    spmd__xchg_init(&x, c, a, w, tag, w->deadline_ns);
    size_t total = count * elem, mid = count / 2 * elem, cap = recv_capacity(total), got = 0;
    char *S = spmd__comm_buffer(c, 0, total + SEAL_MAX);
    char *R = spmd__comm_buffer(c, 1, cap);
    SPMD_REQUIRE(S && R, SPMD_ERR_OUT_OF_MEMORY,
                 "out of memory for a %zu-byte message between processes", cap);
    pairing p = pairing_of(&x.t, order);
    int partner = partner_at(&p, 0), upper = p.index & 1;
    size_t keep = upper ? mid : 0, kept = upper ? total - mid : mid;
    size_t give = upper ? 0 : mid, given = total - kept;
    for (int round = 0; round < rounds; round++) {
        /* round 0: the partner's half goes out, mine comes in; round 1 the other way round */
        size_t out_at = round ? keep : give, out = round ? kept : given;
        size_t in_at = round ? give : keep, want = round ? given : kept;
        /* its own tag: where a ring links the pair but not every process, one round's message
         * may come through MPI and the next through the ring, and overtake it */
        x.tag = tag + 2 * round;
        int failed = spmd__header_failed(&x.h);
        if (!failed)
            memcpy(S, acc + out_at, out);
        size_t sent = spmd__header_seal(&x.h, x.stamp, S, failed ? 0 : out);
        int open = 0;
        int o = spmd__xchg_step(&x, partner, S, sent, partner, R, cap, deadline_of(&x, round + 1),
                                &got, &open);
        if (open && !renew_send_buffer(&x, &S, total + SEAL_MAX))
            break;
        if (o == STOPPED)
            break;
        if (o == MISSED) {
            spmd__xchg_missed(&x, partner);
            break;
        }
        size_t payload = 0;
        if (accept(&x, R, got, want, want, &payload)) {
            if (round)
                memcpy(acc + in_at, R, want);
            else
                combine(acc + in_at, R, want, arg);
        }
        if (x.h.fp_min != x.h.fp_max)
            break; /* both know it now: the partner's call may have had one message */
        if (x.late_by >= 0)
            break; /* the partner gave up on this one: no next round comes */
    }
    x.tag = tag; /* what follows a failure goes on the exchange's own tags */
    return verdict(&x, a);
}

/* ---- the entry points ---- */

spmd_status spmd__xchg_check_with_tag(spmd__comm *c, const spmd__agreement *a, spmd__wait *w,
                                      int tag)
{
    if (c->size == 1)
        return SPMD_OK;
    size_t bytes = 0;
    header h;
    return run_exchange(c, a, w, tag, w->deadline_ns, NULL, &bytes, 0, 1, NULL, NULL, NULL, &h);
}

spmd_status spmd__comm_check(spmd__comm *c, const spmd__agreement *a, spmd__wait *w)
{
    return spmd__xchg_check_with_tag(c, a, w, spmd__comm_exchange_tag(c, w->key));
}

spmd_status spmd__comm_agree(spmd__comm *c, uint64_t fingerprint, const char *description,
                             spmd__wait *w)
{
    spmd__agreement a = {fingerprint, spmd__comm_describe_text, description, NULL};
    return spmd__comm_check(c, &a, w);
}

spmd_status spmd__comm_reduce_record(spmd__comm *c, const spmd__agreement *a, void *record,
                                     size_t *bytes, size_t capacity, spmd__combine_fn combine,
                                     void *combine_arg, spmd__wait *w)
{
    if (c->size == 1)
        return SPMD_OK;
    header h;
    return run_exchange(c, a, w, spmd__comm_exchange_tag(c, w->key), w->deadline_ns, record, bytes,
                        capacity, 0, combine, combine_arg, NULL, &h);
}

/* The largest two-rank reduction within a machine whose agreement travels with its data. */
#define LINKED_STREAM_BYTES 4096

spmd_status spmd__comm_checked_tree_allreduce(spmd__comm *c, const spmd__agreement *a,
                                              const spmd__tree_inputs *in, void *acc, size_t count,
                                              spmd_dtype dtype, spmd__combine_fn combine,
                                              void *combine_arg, spmd__wait *w)
{
    size_t elem = spmd_dtype_size(dtype), bytes = count * elem;
    /* two ranks within a machine whose processes all made their rings, more cores than
     * processes: past a page the rounds stream (the agreement first; the receiver adds straight
     * out of the sender's slot), where the combined exchange copies the vector four times
     * (medians at 2 x 1: psum 16 KiB 3.8 against 5.3 us, 64 KiB 15.2 against 18.9,
     * psum_scatter 8 KiB 2.0 against 3.0; at 4 KiB alike; crowded, 4 x 1 on 2 cores, the extra
     * round trip costs more than it saves: 8 KiB 28-41 against 15-19 us) */
    int streamed = c->size == 2 && bytes > LINKED_STREAM_BYTES && !spmd__rings_crowded() &&
                   spmd__comm_on_linked_machine(c); /* alike on both */
    /* two ranks, each message at most a combined one: the agreement rides on the halves */
    int by_halves = !streamed && c->size == 2 && in->block > 0 && in->split && !in->nruns &&
                    (!in->scatter || count == 2 * in->scatter);
    /* a reduce-scatter of two ranks: the halving sends each half its vector in one round trip,
     * the combined exchange all of it (measured: 2x at 16-64 KiB; medians of 8 runs at 2 x 1,
     * ratio to MPI_Reduce_scatter_block: 1-4 KiB 0.73-0.93 -> 1.12-1.21, 8-512 B 0.81-0.89 ->
     * 0.85-0.99; over TCP without the rings, 8 B-64 KiB 0.85-0.96 -> 0.92-1.00; at 4 ranks on
     * 2 cores the halving's extra steps cost more than the bytes it saves, so more ranks keep
     * the exchange). Past two combined messages, the tree halves after the agreement. */
    int halves_scatter = by_halves && in->scatter && bytes / 2 <= SPMD__COMM_COMBINED_BYTES;
    int halves_sum = by_halves && !in->scatter && bytes <= SPMD__COMM_COMBINED_BYTES &&
                     bytes > SPMD__COMM_COMBINED_BYTES / 2 &&
                     !spmd__ring_on_linked_machine(c->processes[1 - c->rank]); /* alike on both */
    int combined = bytes <= SPMD__COMM_COMBINED_BYTES && !streamed && in->block > 0 && !in->nruns &&
                   c->size > 1;
    if (halves_scatter || halves_sum || combined)
        spmd__tree_load_acc(in, acc, bytes); /* these exchanges read it there */
    if (halves_scatter || halves_sum)
        return run_halves(c, a, w, spmd__comm_exchange_tag(c, w->key), in, acc, count, elem,
                          combine, combine_arg, halves_scatter ? 1 : 2);
    if (combined) {
        header h; /* the agreement travels with the data, blocks meeting in the tree's order */
        return run_exchange(c, a, w, spmd__comm_exchange_tag(c, w->key), w->deadline_ns, acc,
                            &bytes, bytes, 1, combine, combine_arg, in, &h);
    }
    int tag = spmd__comm_exchange_tag(c, w->key);
    SPMD_CHECK(spmd__xchg_check_with_tag(c, a, w, tag));
    spmd_status st =
        spmd__comm_tree_allreduce_agreed(c, tag + 2, in, acc, count, elem, combine, combine_arg, w);
    w->data_pending = st != SPMD_OK;
    return st;
}

/* ---- all_gather: recursive doubling that gathers along the way ---- */

typedef struct gather_layout {
    const size_t *counts;
    size_t *displ; /* [n + 1] */
} gather_layout;

/* Bytes of ranks [lo, hi) and, packed after them, of their extras. */
static size_t block_bytes(const gather_layout *g, const spmd__comm_topology *t, int lo, int hi)
{
    size_t b = g->displ[hi] - g->displ[lo];
    int elo = lo + t->p2, ehi = (hi < t->n - t->p2 ? hi : t->n - t->p2) + t->p2;
    if (elo < ehi)
        b += g->displ[ehi] - g->displ[elo];
    return b;
}

static void move_block(const gather_layout *g, const spmd__comm_topology *t, int lo, int hi,
                       char *packed, char *recv, int pack)
{
    size_t real = g->displ[hi] - g->displ[lo];
    if (pack)
        memcpy(packed, recv + g->displ[lo], real);
    else
        memcpy(recv + g->displ[lo], packed, real);
    int elo = lo + t->p2, ehi = (hi < t->n - t->p2 ? hi : t->n - t->p2) + t->p2;
    if (elo < ehi) {
        size_t extra = g->displ[ehi] - g->displ[elo];
        if (pack)
            memcpy(packed + real, recv + g->displ[elo], extra);
        else
            memcpy(recv + g->displ[elo], packed + real, extra);
    }
}

/* What arrived in a gather step: the header merged, and the block placed when all is well. */
static void take_block(xchg *x, const gather_layout *g, char *recv, const char *R, size_t got,
                       size_t want, int lo, int hi, int single)
{
    size_t payload = 0;
    if (!accept(x, R, got, want, want, &payload))
        return;
    if (single)
        memcpy(recv + g->displ[lo], R, want);
    else
        move_block(g, &x->t, lo, hi, (char *)R, recv, 0);
}

/* One round: sends this rank's block [lo, lo + span) (with its extras) and receives the
 * partner's. */
static int gather_round(xchg *x, const gather_layout *g, char *recv, int partner, int span,
                        int step_index, char **S, char *R)
{
    const spmd__comm_topology *t = &x->t;
    int lo = t->me & ~(span - 1), plo = partner & ~(span - 1);
    size_t out = 0, want = block_bytes(g, t, plo, plo + span), got = 0, total = g->displ[t->n];
    int open = 0;
    if (!spmd__header_failed(&x->h)) {
        out = block_bytes(g, t, lo, lo + span);
        move_block(g, t, lo, lo + span, *S, recv, 1);
    }
    size_t sent = spmd__header_seal(&x->h, x->stamp, *S, out);
    int o = spmd__xchg_step(x, partner, *S, sent, partner, R, recv_capacity(total),
                            deadline_of(x, step_index), &got, &open);
    if (open && !renew_send_buffer(x, S, total + SEAL_MAX))
        return STOPPED;
    if (o == GOT)
        take_block(x, g, recv, R, got, want, plo, plo + span, 0);
    else if (o == MISSED)
        spmd__xchg_missed(x, partner);
    return o;
}

/* Sets up an exchange of blocks of `g` (all_gather, psum_scatter) and its staging buffers. */
static spmd_status start_over_layout(xchg *x, spmd__comm *c, const spmd__agreement *a,
                                     spmd__wait *w, const gather_layout *g, char **S, char **R)
{
    spmd__xchg_init(x, c, a, w, spmd__comm_exchange_tag(c, w->key), w->deadline_ns);
    size_t total = g->displ[c->size];
    *S = spmd__comm_buffer(c, 0, total + SEAL_MAX);
    *R = spmd__comm_buffer(c, 1, recv_capacity(total));
    SPMD_REQUIRE(*S && *R, SPMD_ERR_OUT_OF_MEMORY,
                 "out of memory for a %zu-byte message between processes", recv_capacity(total));
    return SPMD_OK;
}

static spmd_status gather_combined(spmd__comm *c, const spmd__agreement *a, char *recv,
                                   const gather_layout *g, spmd__wait *w)
{
    xchg x;
    char *S = NULL, *R = NULL;
    SPMD_CHECK(start_over_layout(&x, c, a, w, g, &S, &R));
    const spmd__comm_topology *t = &x.t;
    size_t total = g->displ[t->n], got = 0, rcap = recv_capacity(total);
    int last = t->levels + 1, o = GOT;
    if (t->is_extra) { /* hand this rank's block over, get everything back */
        int partner = t->me - t->p2;
        size_t mine = g->counts[t->me];
        memcpy(S, recv + g->displ[t->me], mine);
        size_t sent = spmd__header_seal(&x.h, x.stamp, S, mine);
        if (step_with_extra(&x, partner, S, sent, partner, R, rcap, last, &got) == GOT)
            take_block(&x, g, recv, R, got, total, 0, t->n, 1);
        return verdict(&x, a);
    }
    pairing p = pairing_of(t, NULL); /* rank order: partner_at(&p, k) is me ^ (1 << k) */
    x.pairing = &p;
    if (t->has_extra) {
        int e = t->me + t->p2;
        x.ahead_level = 0;
        o = step_with_extra(&x, -1, NULL, 0, e, R, rcap, 0, &got);
        if (o == GOT)
            take_block(&x, g, recv, R, got, g->counts[e], e, e + 1, 1);
    }
    for (int k = 0; k < t->levels && o != STOPPED; k++) {
        x.ahead_level = k + 1;
        o = gather_round(&x, g, recv, partner_at(&p, k), 1 << k, k + 1, &S, R);
    }
    x.ahead_level = t->levels;
    if (t->has_extra && o != STOPPED) {
        size_t out = spmd__header_failed(&x.h) ? 0 : total;
        if (out)
            memcpy(S, recv, total);
        size_t sent = spmd__header_seal(&x.h, x.stamp, S, out);
        (void)step_with_extra(&x, t->me + t->p2, S, sent, -1, NULL, 0, last, &got);
    }
    x.pairing = NULL;
    return verdict(&x, a);
}

/* Salts the key of the round before a subset's MPI communicator is made. */
#define WHOLE_SALT 0x3a0e1c0d5b7f9e21ul

/*
 * The check, then, on a subset's first collective that runs in MPI, the subset's own MPI
 * communicator (spmd__comm_whole), whose creation blocks until every member calls it. The
 * check alone may end on one member and be stopped on another after it sent its part (its
 * device aborted, its call given up), so a second round runs first, in which nothing but a
 * deadline (a fresh one) stops a member that sent its part: a member finishes it only when
 * every member will make the communicator.
 */
spmd_status spmd__xchg_check_then_whole(spmd__comm *c, const spmd__agreement *a, spmd__wait *w)
{
    int64_t budget = w->deadline_ns - spmd__now_ns();
    SPMD_CHECK(spmd__comm_check(c, a, w));
    if (c->whole != MPI_COMM_NULL)
        return SPMD_OK;
    spmd_status st = w->cancelled ? w->cancelled(w->arg) : SPMD_OK;
    if (st != SPMD_OK) /* before this member sends anything of the second round */
        return st;
    spmd__wait round = spmd__second_round_wait(w, budget, 0);
    round.late_told_later = w->late_told_later;
    round.where = w->where;
    round.no_stop = 1;
    SPMD_CHECK(spmd__xchg_check_with_tag(
        c, a, &round, spmd__comm_exchange_tag(c, w->key ? w->key ^ WHOLE_SALT : 0)));
    return spmd__comm_make_whole(c);
}

/* A gather of up to this many ranks keeps its offsets on the stack. */
#define GATHER_STACK_RANKS 16

spmd_status spmd__comm_checked_allgatherv(spmd__comm *c, const spmd__agreement *a, const void *send,
                                          void *recv, const size_t *counts, spmd__wait *w)
{
    size_t stack_displ[GATHER_STACK_RANKS + 1];
    int small = c->size <= GATHER_STACK_RANKS;
    size_t *displ = small ? stack_displ : malloc(((size_t)c->size + 1) * sizeof *displ);
    SPMD_REQUIRE(displ != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    displ[0] = 0;
    for (int r = 0; r < c->size; r++)
        displ[r + 1] = displ[r] + counts[r];
    if (send)
        spmd__copy_cached((char *)recv + displ[c->rank], send, counts[c->rank]);
    spmd_status st = SPMD_OK;
    if (c->size == 1) {
        /* nothing to exchange */
    } else if (displ[c->size] > SPMD__COMM_COMBINED_BYTES) {
        st = spmd__xchg_check_then_whole(c, a, w);
        if (st == SPMD_OK) {
            st = spmd__comm_allgatherv(c, NULL, recv, counts);
            w->data_pending = st != SPMD_OK;
        }
    } else {
        gather_layout g = {counts, displ};
        st = gather_combined(c, a, recv, &g, w);
    }
    if (!small)
        free(displ);
    return st;
}
