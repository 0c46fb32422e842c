/* Communicators between processes over MPI, and the data movement that follows an agreement.
 * Every wait that could hang on a missing process is nonblocking underneath and ends at a
 * deadline. The checked exchanges of the control plane are in check_mpi.c. */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <spmd/mpi.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/comm_mpi_impl.h"
#include "runtime/comm/host_rings.h"
#include "runtime/comm/process.h"

#define lock spmd__mpi_lock
#define unlock spmd__mpi_unlock

/* ---- tags ---- */

/* The fixed tags sit at the top of the tag space (process_mpi.c: spmd__mpi_tag_top). */
static int tag_top(void) { return spmd__mpi_tag_top(); }
static int abort_tag(void) { return tag_top() - 1; }
static int view_tag(void) { return tag_top() - 2 * SPMD__TAGS_PER_EXCHANGE; }

/* Exchanges keyed by a number (and those of communicators that are not subsets) use the first
 * KEYED_BLOCKS blocks; the subsets of a communicator share the rest, each its lane. */
#define KEYED_BLOCKS (1ul << 12)

static unsigned long mix_key(unsigned long k)
{
    uint64_t h = k;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return (unsigned long)(h ^ (h >> 33));
}

/* The blocks of tags exchanges may own, below the fixed tags. */
static unsigned long exchange_blocks(void)
{
    return (unsigned long)((tag_top() - 4 * SPMD__TAGS_PER_EXCHANGE) / SPMD__TAGS_PER_EXCHANGE);
}

/* A subset's share of the blocks past the keyed ones, rounded down to a power of two. */
static unsigned long lane_blocks(int lanes)
{
    unsigned long blocks = exchange_blocks(), share = 1;
    unsigned long fair = (blocks - KEYED_BLOCKS) / (unsigned long)lanes; /* >= 1: checked */
    while (share * 2 <= fair)
        share *= 2;
    return share;
}

long spmd__comm_subset_lanes(void)
{
    unsigned long blocks = exchange_blocks();
    return blocks > KEYED_BLOCKS ? (long)(blocks - KEYED_BLOCKS) : 0;
}

int spmd__comm_tag_ub(void) { return tag_top(); }

int spmd__comm_exchange_tag(spmd__comm *c, unsigned long key)
{
    if (c->is_view && !key) { /* an agreement that makes a communicator keys its tags */
        c->stamp = 0x76696577u;
        return view_tag();
    }
    /* a key's bits all count: keys of calls a few apart must not share a block */
    unsigned long n = key ? mix_key(key) : c->exchanges++, block;
    c->stamp =
        (uint32_t)(mix_key(n ^ ((unsigned long)c->lane << 40) ^ (key ? 1ul << 63 : 0)) >> 32) | 1u;
    if (c->lanes) {
        block = KEYED_BLOCKS + (n & (c->lane_blocks - 1)) * (unsigned long)c->lanes +
                (unsigned long)c->lane;
    } else if (c->is_view) { /* nothing else uses the private communicator's blocks */
        block = n % exchange_blocks();
    } else {
        unsigned long blocks = exchange_blocks();
        block = blocks < KEYED_BLOCKS ? n % blocks : n & (KEYED_BLOCKS - 1); /* no division */
    }
    return (int)block * SPMD__TAGS_PER_EXCHANGE;
}

/* ---- timing and tracking of the waits ---- */

int64_t spmd__comm_stagger_ns(void)
{
    /* a hundredth of the timeout per step, within [10 ms, 250 ms] */
    int64_t s = spmd__comm_timeout_ns() / 100;
    return s < 10000000 ? 10000000 : s > 250000000 ? 250000000 : s;
}

int64_t spmd__comm_count_back_ns(int n)
{
    return (int64_t)(spmd__comm_topology_of(n, 0).levels + 2) * spmd__comm_stagger_ns();
}

void spmd__comm_describe_text(const void *arg, char *text, size_t size)
{
    spmd__copy_text(text, size, arg);
}

/* A wait that lasts is told to the notes (calls.h): whom it waits for and where. */
int spmd__comm_track(spmd__comm *c, const spmd__agreement *a, const spmd__wait *w, int rank,
                     const int *ahead, int num_ahead)
{
    const spmd__wait_where *where = w->where;
    spmd__wait_info info = {
        .peer = rank >= 0 ? c->processes[rank] : -1,
        .phase = where ? where->phase : 0,
        .device = where ? where->device : -1,
        .peer_device = where && where->rank_device && rank >= 0 ? where->rank_device[rank] : -1,
        .fingerprint = a ? a->fingerprint : 0,
        .describe = a && a->describe ? a->describe : spmd__comm_describe_text,
        .arg = a && a->describe ? a->arg : (w->what ? w->what : "an exchange between processes")};
    for (int i = 0; i < num_ahead && i < SPMD__WAIT_AHEAD; i++)
        info.ahead[info.num_ahead++] = c->processes[ahead[i]];
    return spmd__calls_wait_begin(&info);
}

/* ---- communicators ---- */

static spmd__comm *new_wrapper(const int *processes, int n)
{
    spmd__comm *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->processes = malloc(2 * (size_t)n * sizeof(int));
    if (!c->processes) {
        free(c);
        return NULL;
    }
    c->peer = c->processes + n;
    memcpy(c->processes, processes, (size_t)n * sizeof(int));
    c->size = n;
    c->comm = c->whole = MPI_COMM_NULL;
    c->note_req = MPI_REQUEST_NULL;
    pthread_mutex_init(&c->kept_lock, NULL);
    return c;
}

static void free_wrapper(spmd__comm *c)
{
    free(c->open_reqs);
    free(c->open_bufs);
    for (int i = 0; i < c->num_kept; i++)
        free(c->kept[i]);
    free(c->kept);
    for (int i = 0; i < 2; i++)
        free(c->buf[i]);
    for (int i = 0; i < c->num_later; i++)
        free(c->later_records[i]);
    free(c->later_records);
    free(c->later_bytes);
    free(c->processes);
    pthread_mutex_destroy(&c->kept_lock);
    free(c);
}

/* A communicator over ranks[0..n) of base, errors returned: collective over those ranks only
 * (unlike MPI_Comm_split); `tag` keeps apart such creations from one base at the same time. */
static int create_over(MPI_Comm base, const int *ranks, int n, int tag, MPI_Comm *out)
{
    MPI_Group all = MPI_GROUP_NULL, mine = MPI_GROUP_NULL;
    lock();
    int rc = MPI_Comm_group(base, &all);
    if (rc == MPI_SUCCESS)
        rc = MPI_Group_incl(all, n, ranks, &mine);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_create_group(base, mine, tag, out);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    if (mine != MPI_GROUP_NULL) /* freeing MPI_GROUP_NULL is an error */
        MPI_Group_free(&mine);
    if (all != MPI_GROUP_NULL)
        MPI_Group_free(&all);
    unlock();
    return rc;
}

/* How many communicators were made over each group and tag (wire_of_created). */
static pthread_mutex_t made_lock = PTHREAD_MUTEX_INITIALIZER;
static struct creation {
    uint64_t key;
    unsigned long count;
} * created;
static int num_made;

void spmd__comm_restart_wires(void)
{
    pthread_mutex_lock(&made_lock);
    free(created);
    created = NULL;
    num_made = 0;
    pthread_mutex_unlock(&made_lock);
}

/* The identity of the communicator made now over processes[0..n) with `tag`, alike on every
 * member: MPI pairs the creations over one group and tag in the order each member makes them,
 * so the n-th of them here is the n-th everywhere. 1 is the private communicator's. */
static uint64_t wire_of_created(const int *processes, int n, int tag)
{
    uint64_t key = spmd__fnv1a(SPMD__FNV1A_SEED, processes, (size_t)n * sizeof *processes);
    key = spmd__fnv1a(key, &tag, sizeof tag);
    unsigned long ordinal = 0;
    pthread_mutex_lock(&made_lock);
    int i = 0;
    while (i < num_made && created[i].key != key)
        i++;
    if (i == num_made) {
        struct creation *grown = realloc(created, (size_t)(num_made + 1) * sizeof *created);
        if (grown) {
            created = grown;
            created[num_made++] = (struct creation){key, 0};
        }
    }
    int counted = i < num_made;
    if (counted)
        ordinal = created[i].count++;
    pthread_mutex_unlock(&made_lock);
    /* 0 (out of memory): uncounted, it would not be the others' */
    return counted ? (uint64_t)mix_key((unsigned long)(key ^ mix_key(ordinal + 1))) | 2 : 0;
}

spmd_status spmd__comm_create(const int *processes, int n, int tag, spmd__comm **out)
{
    *out = NULL;
    spmd__comm *c = new_wrapper(processes, n);
    SPMD_REQUIRE(c != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory for a communicator");
    int rc = create_over(spmd_mpi_comm(), processes, n, tag, &c->comm);
    if (rc != MPI_SUCCESS) {
        free_wrapper(c);
        return spmd__mpi_failure(rc, "MPI_Comm_create_group");
    }
    MPI_Comm_rank(c->comm, &c->rank);
    for (int r = 0; r < n; r++)
        c->peer[r] = r;
    c->whole = c->comm;
    c->owns_comm = 1;
    c->wire = wire_of_created(processes, n, tag);
    if (!c->wire) {
        spmd__comm_destroy(c);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory for a communicator");
    }
    *out = c;
    return SPMD_OK;
}

spmd_status spmd__comm_subset(spmd__comm *parent, const int *ranks, int n, int lane, int lanes,
                              unsigned long first_exchange, spmd__comm **out)
{
    *out = NULL;
    /* lanes past the tag space would run into the fixed tags (the caller refuses such a mesh) */
    SPMD_REQUIRE(lanes == 0 || (lane >= 0 && lane < lanes && lanes <= spmd__comm_subset_lanes()),
                 SPMD_ERR_INTERNAL,
                 "a communicator subset in lane %d of %d (the tag space has room for %ld "
                 "lanes)",
                 lane, lanes, spmd__comm_subset_lanes());
    spmd__comm *c = new_wrapper(ranks, n);
    SPMD_REQUIRE(c != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory for a communicator");
    c->comm = parent->comm;
    c->wire = parent->wire;
    c->rank = -1;
    for (int r = 0; r < n; r++) {
        c->processes[r] = parent->processes[ranks[r]];
        c->peer[r] = parent->peer[ranks[r]];
        if (ranks[r] == parent->rank)
            c->rank = r;
    }
    if (c->rank < 0) {
        free_wrapper(c);
        return SPMD_ERROR(SPMD_ERR_INTERNAL, "a communicator subset without this process");
    }
    /* Never the parent's MPI communicator, even over all its processes: several subsets may
     * start MPI collectives at once from different threads, and MPI would pair them in
     * whatever order each process started them. Each makes its own (spmd__comm_whole). */
    c->lane = lane;
    c->lanes = lanes;
    c->lane_blocks = lanes ? lane_blocks(lanes) : 0;
    c->exchanges = first_exchange;
    *out = c;
    return SPMD_OK;
}

spmd_status spmd__comm_whole(spmd__comm *c, MPI_Comm *out)
{
    if (c->whole == MPI_COMM_NULL) {
        /* the lane keeps apart the subsets of one parent made at the same time */
        int rc = create_over(c->comm, c->peer, c->size, c->lane % tag_top(), &c->whole);
        if (rc != MPI_SUCCESS) {
            c->whole = MPI_COMM_NULL;
            return spmd__mpi_failure(rc, "MPI_Comm_create_group");
        }
        c->owns_whole = 1;
    }
    *out = c->whole;
    return SPMD_OK;
}

spmd_status spmd__comm_view(const int *processes, int n, spmd__comm **out)
{
    *out = NULL;
    spmd__comm *c = new_wrapper(processes, n);
    SPMD_REQUIRE(c != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory for a communicator");
    c->comm = spmd_mpi_comm();
    c->wire = 1;
    c->is_view = 1;
    int me = 0;
    MPI_Comm_rank(c->comm, &me);
    c->rank = -1;
    for (int r = 0; r < n; r++) {
        c->peer[r] = processes[r];
        if (processes[r] == me)
            c->rank = r;
    }
    if (c->rank < 0) {
        free_wrapper(c);
        return SPMD_ERROR(SPMD_ERR_INTERNAL, "a communicator view without this process");
    }
    *out = c;
    return SPMD_OK;
}

spmd_status spmd__comm_make_whole(spmd__comm *c)
{
    MPI_Comm whole;
    return spmd__comm_whole(c, &whole);
}

/* Buffers of abandoned communicators and operations: MPI may still use them (their requests
 * are never waited for), so they live until the process ends, reachable from here. */
static pthread_mutex_t graveyard_lock = PTHREAD_MUTEX_INITIALIZER;
static void **graveyard;
static int graveyard_count;

static int bury(void *const *blocks, int n)
{
    pthread_mutex_lock(&graveyard_lock);
    void **grown = realloc(graveyard, (size_t)(graveyard_count + n) * sizeof *grown);
    if (grown) {
        graveyard = grown;
        for (int i = 0; i < n; i++)
            graveyard[graveyard_count++] = blocks[i];
    } /* else: the caller leaks them unreachable, which is still safe */
    pthread_mutex_unlock(&graveyard_lock);
    return grown != NULL;
}

/* Frees the buffers of left sends that ended; with `all`, buries those of the others. */
static void reap_sends(spmd__comm *c, int all)
{
    int kept = 0;
    for (int i = 0; i < c->num_open; i++) {
        int ended = 0;
        lock();
        MPI_Test(&c->open_reqs[i], &ended, MPI_STATUS_IGNORE);
        unlock();
        if (ended) {
            free(c->open_bufs[i]);
        } else if (all) {
            if (!bury(&c->open_bufs[i], 1))
                c->open_bufs[i] = NULL; /* leaked unreachable: still safe */
        } else {
            c->open_reqs[kept] = c->open_reqs[i];
            c->open_bufs[kept++] = c->open_bufs[i];
        }
    }
    c->num_open = kept;
}

void spmd__comm_leave_send(spmd__comm *c, MPI_Request *req, int which)
{
    reap_sends(c, 0);
    MPI_Request *reqs = realloc(c->open_reqs, (size_t)(c->num_open + 1) * sizeof *reqs);
    if (reqs)
        c->open_reqs = reqs;
    void **bufs = reqs ? realloc(c->open_bufs, (size_t)(c->num_open + 1) * sizeof *bufs) : NULL;
    if (bufs)
        c->open_bufs = bufs;
    if (!reqs || !bufs) { /* out of memory: the buffer lives as long as the communicator */
        spmd__comm_abandon_sends(1, req, (int[]){0});
        spmd__comm_detach_buffer(c, which);
        return;
    }
    c->open_reqs[c->num_open] = *req;
    c->open_bufs[c->num_open++] = c->buf[which];
    *req = MPI_REQUEST_NULL;
    c->buf[which] = NULL;
    c->buf_bytes[which] = 0;
}

void spmd__comm_destroy(spmd__comm *c)
{
    if (!c)
        return;
    reap_sends(c, 1);
    lock();
    if (c->note_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&c->note_req);
        MPI_Wait(&c->note_req, MPI_STATUS_IGNORE);
    }
    if (c->owns_whole)
        MPI_Comm_free(&c->whole);
    if (c->owns_comm)
        MPI_Comm_free(&c->comm);
    unlock();
    if (c->owns_comm) /* what its exchanges left in the rings would only take up slots */
        spmd__ring_forget(c->wire);
    free_wrapper(c);
}

void spmd__comm_abandon(spmd__comm *c)
{
    /* The MPI communicator itself is leaked on purpose: freeing it would wait for the
     * operations that will never complete. */
    if (!c)
        return;
    if (c->owns_comm)
        spmd__ring_forget(c->wire);
    if (c->note_req != MPI_REQUEST_NULL) { /* a receive can be called off: it writes no more */
        lock();
        MPI_Cancel(&c->note_req);
        MPI_Wait(&c->note_req, MPI_STATUS_IGNORE);
        unlock();
    }
    for (int i = 0; i < 2; i++)
        if (c->buf[i])
            spmd__comm_keep_with(c, c->buf[i]);
    c->buf[0] = c->buf[1] = NULL;
    for (int i = 0; i < c->num_open; i++) /* their sends are never waited for */
        spmd__comm_keep_with(c, c->open_bufs[i]);
    c->num_open = 0;
    if (c->num_kept == 0 || bury(c->kept, c->num_kept)) {
        c->num_kept = 0;
        free_wrapper(c);
    } /* else: the wrapper is leaked with them */
}

void spmd__comm_keep(void *block)
{
    if (block)
        (void)bury(&block, 1);
}

int spmd__comm_rank(const spmd__comm *c) { return c->rank; }
int spmd__comm_size(const spmd__comm *c) { return c->size; }

int spmd__comm_on_linked_machine(const spmd__comm *c)
{
    for (int r = 0; r < c->size; r++) /* at most a machine's processes: off at the first other */
        if (!spmd__ring_on_linked_machine(c->processes[r]))
            return 0;
    return 1;
}

size_t spmd__comm_paired_max_bytes(const spmd__comm *c)
{
    return spmd__comm_on_linked_machine(c) && !spmd__rings_crowded() ? SPMD__COMM_CONTESTED_ABOVE
                                                                     : SPMD__COMM_COMBINED_BYTES;
}

/* spmd__comm_keep_with, with kept_lock held. */
static void keep_locked(spmd__comm *c, void *block)
{
    void **grown = realloc(c->kept, (size_t)(c->num_kept + 1) * sizeof *grown);
    if (grown) {
        c->kept = grown;
        c->kept[c->num_kept++] = block;
    } else {
        spmd__comm_keep(block);
    }
}

void spmd__comm_keep_with(spmd__comm *c, void *block)
{
    pthread_mutex_lock(&c->kept_lock);
    keep_locked(c, block);
    pthread_mutex_unlock(&c->kept_lock);
}

void *spmd__comm_keep_copy(spmd__comm *c, const void *data, size_t bytes)
{
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        return NULL;
    memcpy(copy, data, bytes);
    spmd__comm_keep_with(c, copy);
    return copy;
}

void *spmd__comm_buffer(spmd__comm *c, int which, size_t bytes)
{
    if (c->buf_bytes[which] >= bytes && c->buf[which])
        return c->buf[which];
    size_t grown = c->buf_bytes[which] * 2 > bytes ? c->buf_bytes[which] * 2 : bytes;
    void *p = NULL;
    if (posix_memalign(&p, 64, grown ? grown : 64))
        return NULL;
    free(c->buf[which]);
    c->buf[which] = p;
    c->buf_bytes[which] = grown;
    return p;
}

void spmd__comm_detach_buffer(spmd__comm *c, int which)
{
    if (c->buf[which])
        spmd__comm_keep_with(c, c->buf[which]);
    c->buf[which] = NULL;
    c->buf_bytes[which] = 0;
}

/* ---- waiting ---- */

void spmd__comm_abandon_sends(int n, MPI_Request *reqs, const int *done)
{
    lock();
    for (int i = 0; i < n; i++)
        if (!done[i] && reqs[i] != MPI_REQUEST_NULL)
            MPI_Request_free(&reqs[i]);
    unlock();
}

/* How long a cancelled receive may take to settle. An unmatched one settles at once; one that
 * matched a message whose sender stopped half way (a long message comes in parts) never does. */
#define CANCEL_SETTLE_NS 3000000

int spmd__comm_cancel_receive(MPI_Request *req, MPI_Status *status)
{
    lock();
    MPI_Cancel(req);
    unlock();
    int64_t give_up = spmd__now_ns() + CANCEL_SETTLE_NS;
    for (;;) {
        int settled = 0;
        lock();
        MPI_Test(req, &settled, status);
        unlock();
        if (settled) {
            int cancelled = 0;
            MPI_Test_cancelled(status, &cancelled);
            return cancelled ? SPMD__CANCELLED : SPMD__ARRIVED;
        }
        if (spmd__now_ns() > give_up)
            break;
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
    /* MPI keeps the request and may still write the buffer, which the caller must keep */
    lock();
    MPI_Request_free(req);
    unlock();
    return SPMD__STUCK;
}

/* How long a wait may take: the collective timeout ($SPMD_COLLECTIVE_TIMEOUT). */
static _Atomic int64_t data_timeout_ns = (int64_t)300 * 1000000000;

void spmd__comm_set_timeout(int64_t timeout_ns) { atomic_store(&data_timeout_ns, timeout_ns); }
int64_t spmd__comm_timeout_ns(void) { return atomic_load(&data_timeout_ns); }

int64_t spmd__comm_grace_ns(void)
{
    int64_t tenth = atomic_load(&data_timeout_ns) / 10;
    return tenth > 500000000 ? tenth : 500000000;
}

/*
 * Polls against the timeout, so that a process that stops in the middle (killed, stuck) ends
 * the wait with SPMD_ERR_TIMEOUT instead of a hang. Unfinished requests stay with MPI (a
 * collective cannot be cancelled): the caller abandons the communicator, and the buffers must
 * outlive the process.
 */
int64_t spmd__comm_data_deadline(const spmd__comm *c)
{
    return spmd__now_ns() + atomic_load(&data_timeout_ns) - spmd__comm_count_back_ns(c->size);
}

spmd_status spmd__comm_wait_data(spmd__comm *c, int n, MPI_Request *reqs, const int *from,
                                 const char *what)
{
    return spmd__comm_wait_data_until(c, n, reqs, from, what, spmd__comm_data_deadline(c), NULL);
}

/* How often a data wait asks whether its call was given up. */
#define DATA_CANCEL_EVERY_NS 1000000

spmd_status spmd__comm_wait_data_until(spmd__comm *c, int n, MPI_Request *reqs, const int *from,
                                       const char *what, int64_t deadline, const spmd__wait *cancel)
{
    int64_t start = spmd__now_ns(), probe_after = spmd__calls_probe_after_ns();
    int64_t next_cancel_check = start + DATA_CANCEL_EVERY_NS;
    int tracked = -1;
    spmd__pause pause;
    spmd__pause_begin(&pause, start);
    for (;;) {
        /* one test of them all: each test runs MPI's progress, which may yield the core */
        int all = 0;
        lock();
        int rc = MPI_Testall(n, reqs, &all, MPI_STATUSES_IGNORE);
        unlock();
        if (rc != MPI_SUCCESS || all) {
            spmd__calls_wait_end(tracked);
            return all ? SPMD_OK : spmd__mpi_failure(rc, what);
        }
        int64_t now = spmd__now_ns();
        if (now > deadline)
            break;
        if (cancel && cancel->cancelled && now > next_cancel_check) {
            /* the call was given up (here, or by a process whose data this waits for, which
             * may never send it): the open requests stay with MPI, the caller abandons c */
            next_cancel_check = now + DATA_CANCEL_EVERY_NS;
            spmd_status st = cancel->cancelled(cancel->arg);
            if (st != SPMD_OK) {
                spmd__calls_wait_end(tracked);
                return st;
            }
        }
        if (now - start > probe_after) {
            if (tracked < 0) { /* the notes say whom this waits for: an open receive's sender */
                int from_rank = -1;
                lock();
                for (int i = 0; from && i < n && from_rank < 0; i++) {
                    int flag = 0;
                    if (reqs[i] != MPI_REQUEST_NULL && from[i] >= 0)
                        MPI_Request_get_status(reqs[i], &flag, MPI_STATUS_IGNORE);
                    if (reqs[i] != MPI_REQUEST_NULL && from[i] >= 0 && !flag)
                        from_rank = from[i];
                }
                unlock();
                spmd__wait w = {.what = what};
                tracked = spmd__comm_track(c, NULL, &w, from_rank, NULL, 0);
            }
            spmd__calls_poll_notes(); /* to answer: a verdict does not end it, as the others
                                   agreed to this data and may finish with it */
        }
        spmd__pause_step(&pause, now, 100000); /* a long wait: leave the core to the others */
    }
    spmd__calls_wait_end(tracked);
    /* one by one: a completed request becomes MPI_REQUEST_NULL, so the open ones show */
    lock();
    for (int i = 0; i < n; i++) {
        int flag = 0;
        if (reqs[i] != MPI_REQUEST_NULL)
            MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
    }
    unlock();
    /* Whom to blame: the senders of the receives still open, else the whole group. */
    char who[256];
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, who, sizeof who);
    int named = 0;
    for (int i = 0; from && i < n; i++) {
        int open = reqs[i] != MPI_REQUEST_NULL; /* completed requests were set to NULL */
        if (from[i] >= 0 && open && named++ < 16)
            spmd__strbuf_printf(&sb, "%s%d", named > 1 ? ", " : "", c->processes[from[i]]);
    }
    if (named)
        return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                          "%s did not complete within the collective timeout "
                          "(SPMD_COLLECTIVE_TIMEOUT): no data came from process(es) %s, which "
                          "had agreed to it (killed or stuck?)",
                          what, who);
    for (int r = 0; r < c->size && r < 16; r++)
        spmd__strbuf_printf(&sb, "%s%d", r ? ", " : "", c->processes[r]);
    return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                      "%s did not complete within the collective timeout "
                      "(SPMD_COLLECTIVE_TIMEOUT) although processes %s%s had all begun it: one "
                      "of them stopped in the middle (killed or stuck?)",
                      what, who, c->size > 16 ? ", ..." : "");
}

/* Starts one nonblocking MPI call (its request: req_) under the MPI lock and sets st to the
 * outcome of waiting for it as spmd__comm_wait_data does. */
#define MPI_DATA(st, c, call, what)                                                                \
    do {                                                                                           \
        MPI_Request req_ = MPI_REQUEST_NULL;                                                       \
        lock();                                                                                    \
        int started_ = (call);                                                                     \
        unlock();                                                                                  \
        (st) = started_ != MPI_SUCCESS ? spmd__mpi_failure(started_, (what))                       \
                                       : spmd__comm_wait_data((c), 1, &req_, NULL, (what));        \
    } while (0)

/* ---- data movement, once every rank agreed to it ---- */

/* int counts and displacements for the v-collectives; SPMD_ERR_UNSUPPORTED past 2 GiB. */
static spmd_status int_counts(const spmd__comm *c, const size_t *counts, int *icounts, int *displs,
                              const char *what)
{
    size_t offset = 0;
    for (int r = 0; r < c->size; r++) {
        SPMD_REQUIRE(counts[r] <= INT_MAX && offset <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                     "%s: more than 2 GiB per process in one cross-process collective exceeds "
                     "MPI's int counts; split the array into smaller pieces",
                     what);
        icounts[r] = (int)counts[r];
        displs[r] = (int)offset;
        offset += counts[r];
    }
    return SPMD_OK;
}

spmd_status spmd__comm_allgatherv(spmd__comm *c, const void *send, void *recv, const size_t *counts)
{
    MPI_Comm whole;
    SPMD_CHECK(spmd__comm_whole(c, &whole));
    int *icounts = malloc(2 * (size_t)c->size * sizeof(int));
    SPMD_REQUIRE(icounts != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    int *displs = icounts + c->size;
    spmd_status st = int_counts(c, counts, icounts, displs, "all_gather");
    if (st == SPMD_OK)
        MPI_DATA(st, c,
                 MPI_Iallgatherv(send ? send : MPI_IN_PLACE, icounts[c->rank], MPI_BYTE, recv,
                                 icounts, displs, MPI_BYTE, whole, &req_),
                 "MPI_Iallgatherv");
    free(icounts);
    return st;
}

spmd_status spmd__comm_allgather_placed_agreed(spmd__comm *c, void *recv,
                                               const spmd__block_layout *layout,
                                               const size_t *counts, const size_t *displs)
{
    MPI_Comm whole;
    SPMD_CHECK(spmd__comm_whole(c, &whole));
    int contiguous = layout->outer == 1; /* then counted in bytes, as MPI's own tests do */
    size_t unit = contiguous ? layout->run : 1;
    SPMD_REQUIRE(layout->run <= INT_MAX && layout->outer <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                 "all_gather: a block of %zu runs of %zu bytes exceeds MPI's int counts; split "
                 "the array into smaller pieces",
                 layout->outer, layout->run);
    int *icounts = malloc(2 * (size_t)c->size * sizeof(int));
    SPMD_REQUIRE(icounts != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    int *idispls = icounts + c->size;
    spmd_status st = SPMD_OK;
    for (int r = 0; r < c->size && st == SPMD_OK; r++) {
        if ((counts[r] + displs[r]) * unit > INT_MAX)
            st = SPMD_ERROR(SPMD_ERR_UNSUPPORTED,
                            "all_gather: more than 2 GiB in one cross-process collective exceeds "
                            "MPI's int counts; split the array into smaller pieces");
        icounts[r] = (int)(counts[r] * unit);
        idispls[r] = (int)(displs[r] * unit);
    }
    MPI_Datatype block = MPI_BYTE;
    if (st == SPMD_OK && !contiguous) {
        /* one block's runs, resized so that block b starts b runs in */
        MPI_Datatype runs;
        lock();
        MPI_Type_create_hvector((int)layout->outer, (int)layout->run, (MPI_Aint)layout->stride,
                                MPI_BYTE, &runs);
        MPI_Type_create_resized(runs, 0, (MPI_Aint)layout->run, &block);
        MPI_Type_commit(&block);
        MPI_Type_free(&runs);
        unlock();
    }
    if (st == SPMD_OK)
        MPI_DATA(st, c,
                 MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, icounts, idispls, block,
                                 whole, &req_),
                 "MPI_Iallgatherv");
    if (block != MPI_BYTE) {
        lock();
        MPI_Type_free(&block); /* MPI keeps it while a request still uses it */
        unlock();
    }
    free(icounts);
    return st;
}

spmd_status spmd__comm_gatherv(spmd__comm *c, int root, const void *send, void *recv,
                               const size_t *counts)
{
    int *icounts = malloc(2 * (size_t)c->size * sizeof(int));
    SPMD_REQUIRE(icounts != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    int *displs = icounts + c->size;
    spmd_status st = int_counts(c, counts, icounts, displs, "gather");
    if (st == SPMD_OK) {
        int in_place = c->rank == root && send == NULL;
        MPI_DATA(st, c,
                 MPI_Igatherv(in_place ? MPI_IN_PLACE : send, icounts[c->rank], MPI_BYTE, recv,
                              icounts, displs, MPI_BYTE, root, c->whole, &req_),
                 "MPI_Igatherv");
    }
    free(icounts);
    return st;
}

spmd_status spmd__comm_bcast(spmd__comm *c, int root, void *data, size_t bytes)
{
    /* in pieces below INT_MAX: MPI counts are int */
    const size_t piece = (size_t)1 << 30;
    for (size_t offset = 0; offset < bytes; offset += piece) {
        size_t n = bytes - offset < piece ? bytes - offset : piece;
        spmd_status st;
        MPI_DATA(st, c, MPI_Ibcast((char *)data + offset, (int)n, MPI_BYTE, root, c->whole, &req_),
                 "MPI_Ibcast");
        SPMD_CHECK(st);
    }
    return SPMD_OK;
}

spmd_status spmd__comm_post_alltoallv(spmd__comm *c, int tag, const void *send,
                                      const size_t *send_counts, void *recv,
                                      const size_t *recv_counts, MPI_Request *reqs, int *from,
                                      int *n)
{
    size_t soff = 0, roff = 0;
    for (int r = 0; r < c->size; r++) {
        SPMD_REQUIRE(send_counts[r] <= INT_MAX && recv_counts[r] <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                     "all_to_all: more than 2 GiB to one process exceeds MPI's int counts; split "
                     "the array into smaller pieces");
    }
    *n = 0;
    lock();
    for (int r = 0; r < c->size; r++) {
        if (r != c->rank && recv_counts[r]) {
            from[*n] = r;
            MPI_Irecv((char *)recv + roff, (int)recv_counts[r], MPI_BYTE, c->peer[r], tag, c->comm,
                      &reqs[(*n)++]);
        }
        roff += recv_counts[r];
    }
    for (int r = 0; r < c->size; r++) {
        if (r != c->rank && send_counts[r]) {
            from[*n] = -1;
            MPI_Isend((const char *)send + soff, (int)send_counts[r], MPI_BYTE, c->peer[r], tag,
                      c->comm, &reqs[(*n)++]);
        }
        soff += send_counts[r];
    }
    unlock();
    return SPMD_OK;
}

spmd_status spmd__comm_post_messages(spmd__comm *c, int tag, int nsend, const spmd__message *sends,
                                     int nrecv, const spmd__message *recvs, MPI_Request *reqs,
                                     int *from)
{
    for (int i = 0; i < nsend + nrecv; i++) {
        const spmd__message *m = i < nrecv ? &recvs[i] : &sends[i - nrecv];
        SPMD_REQUIRE(m->bytes <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                     "ppermute: a block of more than 2 GiB exceeds MPI's int counts");
    }
    lock();
    for (int i = 0; i < nrecv; i++) {
        from[i] = recvs[i].peer;
        MPI_Irecv(recvs[i].data, (int)recvs[i].bytes, MPI_BYTE, c->peer[recvs[i].peer], tag,
                  c->comm, &reqs[i]);
    }
    for (int i = 0; i < nsend; i++) {
        from[nrecv + i] = -1;
        MPI_Isend(sends[i].data, (int)sends[i].bytes, MPI_BYTE, c->peer[sends[i].peer], tag,
                  c->comm, &reqs[nrecv + i]);
    }
    unlock();
    return SPMD_OK;
}

/* One datatype for a whole message: a struct of subarrays at absolute addresses (MPI_BOTTOM),
 * so MPI copies straight between the boxes and its transport. */
static spmd_status piece_message_type(const spmd__piece_message *m, MPI_Datatype *out)
{
    int n = m->npieces;
    MPI_Datatype *types = malloc((size_t)n * sizeof *types);
    MPI_Aint *at = malloc((size_t)n * sizeof *at);
    int *ones = malloc((size_t)n * sizeof *ones), made = 0;
    spmd_status st =
        types && at && ones ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    for (; st == SPMD_OK && made < n; made++) {
        const spmd__piece *p = &m->pieces[made];
        int nd = p->ndim ? p->ndim : 1, sizes[SPMD_MAX_RANK], sub[SPMD_MAX_RANK],
            starts[SPMD_MAX_RANK];
        for (int d = 0; d < nd; d++) {
            int64_t size = p->ndim ? p->shape[d] : 1;
            if (size > INT_MAX) {
                st = SPMD_ERROR(SPMD_ERR_UNSUPPORTED,
                                "resharding: a shard dimension of %lld elements exceeds MPI's int "
                                "counts (2^31 - 1)",
                                (long long)size);
                break;
            }
            sizes[d] = (int)size;
            sub[d] = p->ndim ? (int)p->extent[d] : 1;
            starts[d] = p->ndim ? (int)p->start[d] : 0;
        }
        if (st != SPMD_OK)
            break;
        MPI_Datatype elem;
        MPI_Type_contiguous((int)p->elem, MPI_BYTE, &elem);
        MPI_Type_create_subarray(nd, sizes, sub, starts, MPI_ORDER_C, elem, &types[made]);
        MPI_Type_free(&elem);
        MPI_Get_address(p->base, &at[made]);
        ones[made] = 1;
    }
    if (st == SPMD_OK) {
        MPI_Type_create_struct(n, ones, at, types, out);
        MPI_Type_commit(out);
    }
    for (int i = 0; i < made; i++)
        MPI_Type_free(&types[i]);
    free(types);
    free(at);
    free(ones);
    return st;
}

/* 1 when box p is one run of its buffer (dimensions before some k of extent 1, those after
 * it whole), with its byte offset and length. */
static int contiguous_box(const spmd__piece *p, size_t *offset, size_t *bytes)
{
    int k = 0;
    while (k < p->ndim - 1 && p->extent[k] == 1)
        k++;
    for (int d = k + 1; d < p->ndim; d++)
        if (p->extent[d] != p->shape[d])
            return 0;
    size_t at = 0, n = 1;
    for (int d = 0; d < p->ndim; d++) {
        at = at * (size_t)p->shape[d] + (size_t)p->start[d];
        n *= (size_t)p->extent[d];
    }
    *offset = at * p->elem;
    *bytes = n * p->elem;
    return *bytes <= INT_MAX;
}

spmd_status spmd__comm_post_pieces(spmd__comm *c, int tag, int nsend,
                                   const spmd__piece_message *sends, int nrecv,
                                   const spmd__piece_message *recvs, MPI_Request *reqs, int *from)
{
    /* One MPI message per message, whatever its boxes, so that both sides post as many (a
     * sender's boxes and its receiver's differ in shape): plain bytes for one contiguous box,
     * which MPI moves fastest, else a datatype of all its boxes. Every datatype is made before
     * anything is posted: a failure leaves nothing in flight. */
    int n = nsend + nrecv;
    MPI_Datatype *types = malloc((size_t)(n ? n : 1) * sizeof *types);
    SPMD_REQUIRE(types != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    spmd_status st = SPMD_OK;
    int built = 0;
    lock();
    for (; built < n && st == SPMD_OK; built++) {
        const spmd__piece_message *m = built < nrecv ? &recvs[built] : &sends[built - nrecv];
        size_t offset = 0, bytes = 0;
        types[built] = MPI_DATATYPE_NULL;
        if (!(m->npieces == 1 && contiguous_box(&m->pieces[0], &offset, &bytes)))
            st = piece_message_type(m, &types[built]);
    }
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        const spmd__piece_message *m = i < nrecv ? &recvs[i] : &sends[i - nrecv];
        void *at = MPI_BOTTOM;
        int count = 1;
        MPI_Datatype type = types[i];
        if (type == MPI_DATATYPE_NULL) {
            size_t offset = 0, bytes = 0;
            (void)contiguous_box(&m->pieces[0], &offset, &bytes);
            at = (char *)m->pieces[0].base + offset;
            count = (int)bytes;
            type = MPI_BYTE;
        }
        from[i] = i < nrecv ? m->peer : -1;
        if (i < nrecv)
            MPI_Irecv(at, count, type, c->peer[m->peer], tag, c->comm, &reqs[i]);
        else
            MPI_Isend(at, count, type, c->peer[m->peer], tag, c->comm, &reqs[i]);
    }
    for (int i = 0; i < built; i++)
        if (types[i] != MPI_DATATYPE_NULL)
            MPI_Type_free(&types[i]); /* a type stays alive while a request still uses it */
    unlock();
    free(types);
    return st;
}

/* ---- abort records ----
 *
 * A record travels a binomial tree rooted at the rank that posted it: each rank sends it on to
 * its children when it first takes it in (at most ceil(log2 size) sends on any rank, never one
 * to every rank). A message is the record followed by its root's rank. A rank that is gone cuts
 * its subtree off: those ranks end the call by their own waits' timeouts, as they would without
 * the record. */

typedef int32_t abort_root;

/* Sends `message` (a record and its root) to the children of this rank in the tree of `root`;
 * called locked, with kept_lock held (the copy sent is kept with c until c goes). */
static void send_to_children(spmd__comm *c, const void *message, size_t bytes, int root)
{
    int relative = (c->rank - root + c->size) % c->size;
    int mask = 1;
    while (mask <= relative) /* past this rank's own bit: its children */
        mask <<= 1;
    void *copy = NULL;
    for (; relative + mask < c->size; mask <<= 1) {
        if (!copy) {
            copy = malloc(bytes);
            if (!copy)
                return; /* best effort: the subtree times out instead */
            memcpy(copy, message, bytes);
            keep_locked(c, copy);
        }
        MPI_Request req;
        int child = (relative + mask + root) % c->size;
        if (MPI_Isend(copy, (int)bytes, MPI_BYTE, c->peer[child], abort_tag(), c->comm, &req) ==
            MPI_SUCCESS)
            MPI_Request_free(&req);
    }
}

/* The call number a record begins with. */
static unsigned long leading_epoch(const void *message, size_t bytes)
{
    unsigned long epoch = 0;
    if (bytes >= sizeof epoch)
        memcpy(&epoch, message, sizeof epoch);
    return epoch;
}

/* Keeps a record of a later call for spmd__comm_poll_abort (takes `record`); called locked. */
static void keep_later_record(spmd__comm *c, void *record, size_t bytes)
{
    void **records = realloc(c->later_records, (size_t)(c->num_later + 1) * sizeof *records);
    if (records)
        c->later_records = records;
    size_t *sizes =
        records ? realloc(c->later_bytes, (size_t)(c->num_later + 1) * sizeof *sizes) : NULL;
    if (sizes)
        c->later_bytes = sizes;
    if (!records || !sizes) {
        free(record); /* the call it belongs to will time out instead */
        return;
    }
    c->later_records[c->num_later] = record;
    c->later_bytes[c->num_later++] = bytes;
}

/* Receives one abort record that has arrived (called locked); NULL when none. A matched probe:
 * device threads poll at the same time, and a plain probe could see a message that another
 * thread then receives. */
static char *next_record(spmd__comm *c, size_t *bytes)
{
    int flag = 0, count = 0;
    MPI_Message message;
    MPI_Status status;
    MPI_Improbe(MPI_ANY_SOURCE, abort_tag(), c->comm, &flag, &message, &status);
    if (!flag)
        return NULL;
    MPI_Get_count(&status, MPI_BYTE, &count);
    char *buf = malloc(count > 0 ? (size_t)count : 1);
    char byte;
    MPI_Mrecv(buf ? buf : &byte, buf ? count : 0, MPI_BYTE, &message, MPI_STATUS_IGNORE);
    if (!buf || (size_t)count < sizeof(abort_root)) {
        free(buf);
        return next_record(c, bytes);
    }
    abort_root root;
    memcpy(&root, buf + count - sizeof root, sizeof root);
    if (root >= 0 && root < c->size)
        send_to_children(c, buf, (size_t)count, root);
    *bytes = (size_t)count - sizeof root;
    return buf;
}

void spmd__comm_drain(spmd__comm *c, unsigned long epoch)
{
    pthread_mutex_lock(&c->kept_lock); /* the records kept for later: one thread at a time */
    lock();
    size_t bytes = 0;
    for (char *buf; (buf = next_record(c, &bytes)) != NULL;) {
        if (leading_epoch(buf, bytes) > epoch)
            keep_later_record(c, buf, bytes);
        else
            free(buf);
    }
    unlock();
    pthread_mutex_unlock(&c->kept_lock);
}

void spmd__comm_post_abort(spmd__comm *c, const void *record, size_t bytes)
{
    abort_root root = c->rank;
    char *message = malloc(bytes + sizeof root);
    if (!message)
        return; /* best effort: the others will time out instead */
    memcpy(message, record, bytes);
    memcpy(message + bytes, &root, sizeof root);
    pthread_mutex_lock(&c->kept_lock);
    lock();
    send_to_children(c, message, bytes + sizeof root, c->rank);
    unlock();
    pthread_mutex_unlock(&c->kept_lock);
    free(message);
}

void spmd__comm_pass_on_aborts(spmd__comm *c)
{
    pthread_mutex_lock(&c->kept_lock);
    lock();
    size_t bytes = 0;
    for (char *buf; (buf = next_record(c, &bytes)) != NULL;)
        keep_later_record(c, buf, bytes); /* passed on as it came in */
    unlock();
    pthread_mutex_unlock(&c->kept_lock);
}

int spmd__comm_poll_abort(spmd__comm *c, unsigned long epoch, void *record, size_t bytes)
{
    int found = 0;
    pthread_mutex_lock(&c->kept_lock); /* the records kept for later: one thread at a time */
    lock();
    for (int i = 0; i < c->num_later && !found; i++) {
        unsigned long of = leading_epoch(c->later_records[i], c->later_bytes[i]);
        if (of > epoch)
            continue;
        if (of == epoch) {
            memcpy(record, c->later_records[i],
                   bytes < c->later_bytes[i] ? bytes : c->later_bytes[i]);
            found = 1;
        }
        free(c->later_records[i]);
        c->later_records[i] = c->later_records[--c->num_later];
        c->later_bytes[i] = c->later_bytes[c->num_later];
        i--;
    }
    size_t got = 0;
    for (char *buf; !found && (buf = next_record(c, &got)) != NULL;) {
        unsigned long of = leading_epoch(buf, got);
        if (of == epoch) {
            memcpy(record, buf, bytes < got ? bytes : got);
            found = 1;
        } else if (of > epoch) {
            keep_later_record(c, buf, got);
            continue;
        }
        free(buf);
    }
    unlock();
    pthread_mutex_unlock(&c->kept_lock);
    return found;
}
