/* Communicators between processes over MPI. Waits that could hang on a missing process are
 * non-blocking underneath and end at a deadline; data movement that follows a successful
 * agreement is blocking, since every rank is then known to be in the same collective. */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <spmd/mpi.h>

#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/process.h"

/* Tags: abort records and notices use fixed tags, views (mesh set-up) one fixed pair;
 * gather/broadcast pairs of created communicators cycle through the rest. */
#define ABORT_TAG 32000
#define NOTICE_TAG 32001
#define VIEW_TAG 31500
#define CYCLE_TAGS 31000

struct spmd__comm {
    MPI_Comm comm;
    int rank;
    int size;
    int *processes; /* runtime process index of each rank */
    int *peer;      /* rank in `comm` of each rank: itself, or for a view its process */
    int is_view;
    unsigned next_tag;   /* advanced identically on every rank */
    void **abort_copies; /* send buffers of messages not waited for, freed with the comm */
    int num_abort_copies;
    pthread_mutex_t copies_lock; /* several threads may post such messages at once */
    /* Gathers begun on this rank, counted alike everywhere; on the leader (rank 0) taking the
     * lock to begin one and to notify an abort orders the two (see spmd__comm_notify_abort). */
    pthread_mutex_t gather_lock;
    unsigned long gathers;
    /* the latest abort notice from the leader, kept for the later gathers it concerns */
    unsigned long notice_epoch, notice_gathers;
    /* abort records of calls this rank has not reached yet, received while draining */
    void **later_records;
    size_t *later_bytes;
    int num_later;
};

/* What a failed leader tells its members: how many gathers it had begun in that call. */
typedef struct abort_notice {
    unsigned long epoch;
    unsigned long gathers;
} abort_notice;

/* With less than MPI_THREAD_MULTIPLE, device threads take turns in MPI. */
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;

static void lock(void)
{
    if (!spmd__mpi_thread_multiple())
        pthread_mutex_lock(&mpi_lock);
}

static void unlock(void)
{
    if (!spmd__mpi_thread_multiple())
        pthread_mutex_unlock(&mpi_lock);
}

int64_t spmd__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static spmd_status mpi_failure(int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error code %d", rc);
    return SPMD_ERROR(SPMD_ERR_DISTRIBUTED, "%s failed: %s", what, text);
}

#define MPI_CALL(call, what)                                                                       \
    do {                                                                                           \
        lock();                                                                                    \
        int rc_ = (call);                                                                          \
        unlock();                                                                                  \
        if (rc_ != MPI_SUCCESS)                                                                    \
            return mpi_failure(rc_, (what));                                                       \
    } while (0)

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
    pthread_mutex_init(&c->gather_lock, NULL);
    pthread_mutex_init(&c->copies_lock, NULL);
    return c;
}

static void free_wrapper(spmd__comm *c)
{
    for (int i = 0; i < c->num_abort_copies; i++)
        free(c->abort_copies[i]);
    free(c->abort_copies);
    for (int i = 0; i < c->num_later; i++)
        free(c->later_records[i]);
    free(c->later_records);
    free(c->later_bytes);
    free(c->processes);
    pthread_mutex_destroy(&c->gather_lock);
    pthread_mutex_destroy(&c->copies_lock);
    free(c);
}

spmd_status spmd__comm_create(const int *processes, int n, int tag, spmd__comm **out)
{
    *out = NULL;
    spmd__comm *c = new_wrapper(processes, n);
    SPMD_REQUIRE(c != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory for a communicator");
    MPI_Group world_group, group;
    lock();
    MPI_Comm base = spmd_mpi_comm();
    int rc = MPI_Comm_group(base, &world_group);
    if (rc == MPI_SUCCESS)
        rc = MPI_Group_incl(world_group, n, processes, &group);
    /* Collective over the group's members only, unlike MPI_Comm_split. */
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_create_group(base, group, tag, &c->comm);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    unlock();
    if (rc != MPI_SUCCESS) {
        free_wrapper(c);
        return mpi_failure(rc, "MPI_Comm_create_group");
    }
    MPI_Comm_rank(c->comm, &c->rank);
    for (int r = 0; r < n; r++)
        c->peer[r] = r;
    *out = c;
    return SPMD_OK;
}

spmd_status spmd__comm_view(const int *processes, int n, spmd__comm **out)
{
    *out = NULL;
    spmd__comm *c = new_wrapper(processes, n);
    SPMD_REQUIRE(c != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory for a communicator");
    c->comm = spmd_mpi_comm();
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

void spmd__comm_destroy(spmd__comm *c)
{
    if (!c)
        return;
    if (!c->is_view) {
        lock();
        MPI_Comm_free(&c->comm);
        unlock();
    }
    free_wrapper(c);
}

/* Buffers of abandoned communicators and operations: MPI may still use them (their requests
 * are never waited for), so they live until the process ends, reachable from here. */
static pthread_mutex_t graveyard_lock = PTHREAD_MUTEX_INITIALIZER;
static void **graveyard;
static int graveyard_count;

void spmd__comm_abandon(spmd__comm *c)
{
    /* The MPI communicator itself is leaked on purpose: freeing it would wait for the
     * collective that will never complete. */
    if (!c)
        return;
    pthread_mutex_lock(&graveyard_lock);
    void **grown =
        c->num_abort_copies == 0
            ? graveyard
            : realloc(graveyard, (size_t)(graveyard_count + c->num_abort_copies) * sizeof *grown);
    if (grown) {
        graveyard = grown;
        for (int i = 0; i < c->num_abort_copies; i++)
            graveyard[graveyard_count++] = c->abort_copies[i];
        c->num_abort_copies = 0;
    } /* else: they stay with the wrapper below, which is then leaked too */
    pthread_mutex_unlock(&graveyard_lock);
    if (c->num_abort_copies == 0)
        free_wrapper(c);
}

void spmd__comm_keep(void *block)
{
    if (!block)
        return;
    pthread_mutex_lock(&graveyard_lock);
    void **grown = realloc(graveyard, (size_t)(graveyard_count + 1) * sizeof *grown);
    if (grown) {
        graveyard = grown;
        graveyard[graveyard_count++] = block;
    } /* else: leaked unreachable, which is still safe */
    pthread_mutex_unlock(&graveyard_lock);
}

int spmd__comm_rank(const spmd__comm *c) { return c->rank; }
int spmd__comm_size(const spmd__comm *c) { return c->size; }

static unsigned take_tags(spmd__comm *c)
{
    if (c->is_view)
        return VIEW_TAG;
    unsigned t = c->next_tag;
    c->next_tag = (c->next_tag + 2) % CYCLE_TAGS;
    return t;
}

/* 1 when the leader of `c` reported that it failed call w->epoch before beginning gather
 * number `index`, which it therefore never will begin. Older notices are dropped. */
static int leader_gave_up_before(spmd__comm *c, spmd__wait *w, unsigned long index)
{
    for (;;) {
        int flag = 0;
        abort_notice n;
        lock();
        MPI_Iprobe(c->peer[0], NOTICE_TAG, c->comm, &flag, MPI_STATUS_IGNORE);
        if (flag)
            MPI_Recv(&n, (int)sizeof n, MPI_BYTE, c->peer[0], NOTICE_TAG, c->comm,
                     MPI_STATUS_IGNORE);
        unlock();
        if (!flag)
            break;
        c->notice_epoch = n.epoch; /* an earlier gather of the call may read it first */
        c->notice_gathers = n.gathers;
    }
    /* epoch 0 is no call (mesh set-up): calls count from 1 */
    return w->epoch != 0 && c->notice_epoch == w->epoch && c->notice_gathers < index;
}

/* Polls requests until all complete, the deadline passes, (when `cancellable`) the wait is
 * cancelled, or (when notice_index > 0) the leader tells it will never answer. done[i] records
 * which completed. */
static spmd_status poll_requests(spmd__comm *c, int n, MPI_Request *reqs, int *done, spmd__wait *w,
                                 int cancellable, unsigned long notice_index, int64_t deadline,
                                 int *timed_out)
{
    *timed_out = 0;
    for (;;) {
        int all = 1;
        lock();
        for (int i = 0; i < n; i++) {
            if (!done[i]) {
                int flag = 0;
                MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
                done[i] = flag;
                all &= flag;
            }
        }
        unlock();
        if (all)
            return SPMD_OK;
        if (cancellable && w->cancelled) {
            spmd_status st = w->cancelled(w->arg);
            if (st != SPMD_OK)
                return st;
        }
        if (notice_index && leader_gave_up_before(c, w, notice_index) && (w->remote_failure = 1))
            return SPMD_ERROR(SPMD_ERR_DISTRIBUTED,
                              "%s: process %d (the group's first) failed before reaching it",
                              w->what, c->processes[0]);
        if (spmd__now_ns() > deadline) {
            *timed_out = 1;
            return SPMD_OK;
        }
        sched_yield();
    }
}

/* Gives up on unfinished sends: a send cannot be waited for once its receiver is gone. */
static void abandon_sends(int n, MPI_Request *reqs, const int *done)
{
    lock();
    for (int i = 0; i < n; i++)
        if (!done[i] && reqs[i] != MPI_REQUEST_NULL)
            MPI_Request_free(&reqs[i]);
    unlock();
}

/* Cancels unfinished receives and waits for each to settle: a receive that matched a message
 * just before the cancel completes normally, and done[i] then says so. */
static void cancel_receives(int n, MPI_Request *reqs, int *done)
{
    lock();
    for (int i = 0; i < n; i++) {
        if (done[i] || reqs[i] == MPI_REQUEST_NULL)
            continue;
        MPI_Status status;
        int cancelled = 0;
        MPI_Cancel(&reqs[i]);
        MPI_Wait(&reqs[i], &status);
        MPI_Test_cancelled(&status, &cancelled);
        done[i] = !cancelled;
    }
    unlock();
}

static void list_missing(const spmd__comm *c, const unsigned char *present, char *out, size_t size)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, out, size);
    int shown = 0;
    for (int r = 0; r < c->size; r++)
        if (!present[r] && shown++ < 16)
            spmd__strbuf_printf(&sb, "%s%d", shown > 1 ? ", " : "", c->processes[r]);
}

static spmd_status missing_error(const spmd__comm *c, const unsigned char *present, spmd__wait *w)
{
    char missing[256];
    list_missing(c, present, missing, sizeof missing);
    return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                      "%s: process(es) %s did not arrive within the collective timeout "
                      "(SPMD_COLLECTIVE_TIMEOUT); every process must issue the same collectives "
                      "in the same order",
                      w->what, missing);
}

/*
 * The gather protocol behind every wait that must not hang: rank 0 (the leader) collects each
 * rank's record, then answers every rank that sent one with the table and a verdict. Only the
 * leader may give up early (its call failed); a rank that has sent its record always waits for
 * the verdict (until the deadline), so the leader's decision binds everyone: either all go on
 * to the data phase together, or none does. The verdict follows `present` in one message.
 */
enum { VERDICT_GO = 0, VERDICT_LEADER_GAVE_UP = 1 };

/* Keeps a copy of a message to send without waiting (freed with the communicator). */
static void *keep_copy(spmd__comm *c, const void *data, size_t bytes)
{
    void *copy = malloc(bytes);
    if (!copy)
        return NULL;
    memcpy(copy, data, bytes);
    pthread_mutex_lock(&c->copies_lock);
    void **grown = realloc(c->abort_copies, (size_t)(c->num_abort_copies + 1) * sizeof *grown);
    if (grown) {
        c->abort_copies = grown;
        c->abort_copies[c->num_abort_copies++] = copy;
    }
    pthread_mutex_unlock(&c->copies_lock);
    if (!grown) {
        free(copy);
        return NULL;
    }
    return copy;
}

/* The verdict goes to every rank: those that sent a record are waiting for it; one that comes
 * late finds it waiting and learns at once that it was missed (its message, sent from a kept
 * copy, is never waited for, since that rank may never come). */
static spmd_status send_table(spmd__comm *c, unsigned tag, size_t bytes, const void *table,
                              const unsigned char *present, spmd__wait *w)
{
    int n = 2 * (c->size - 1);
    MPI_Request *reqs = malloc((size_t)(n ? n : 1) * sizeof *reqs);
    int *done = calloc((size_t)(n ? n : 1), sizeof *done);
    if (!reqs || !done) {
        free(reqs);
        free(done);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory answering processes");
    }
    size_t table_bytes = bytes * (size_t)c->size;
    for (int r = 1; r < c->size; r++) {
        MPI_Request *pair = &reqs[2 * (r - 1)];
        const void *p = present, *t = table;
        if (!present[r]) {
            p = keep_copy(c, present, (size_t)c->size + 1);
            t = keep_copy(c, table, table_bytes);
            done[2 * (r - 1)] = done[2 * (r - 1) + 1] = 1;
        }
        lock();
        if (p)
            MPI_Isend(p, c->size + 1, MPI_BYTE, c->peer[r], (int)tag + 1, c->comm, &pair[0]);
        if (p && t)
            MPI_Isend(t, (int)table_bytes, MPI_BYTE, c->peer[r], (int)tag + 1, c->comm, &pair[1]);
        if (!present[r]) {
            if (p)
                MPI_Request_free(&pair[0]);
            if (p && t)
                MPI_Request_free(&pair[1]);
            pair[0] = pair[1] = MPI_REQUEST_NULL;
        }
        unlock();
    }
    int timed_out = 0;
    spmd_status st =
        poll_requests(c, n, reqs, done, w, 0, 0, w->deadline_ns + 2000000000LL, &timed_out);
    if (timed_out)
        abandon_sends(n, reqs, done);
    free(reqs);
    free(done);
    return st;
}

static spmd_status gather_leader(spmd__comm *c, unsigned tag, const void *send, size_t bytes,
                                 void *recv, unsigned char *present, spmd__wait *w)
{
    int n = c->size - 1;
    MPI_Request *reqs = malloc((size_t)(n ? n : 1) * sizeof *reqs);
    int *done = calloc((size_t)(n ? n : 1), sizeof *done);
    if (!reqs || !done) {
        free(reqs);
        free(done);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory gathering from processes");
    }
    memcpy(recv, send, bytes);
    lock();
    for (int r = 1; r <= n; r++)
        MPI_Irecv((char *)recv + (size_t)r * bytes, (int)bytes, MPI_BYTE, c->peer[r], (int)tag,
                  c->comm, &reqs[r - 1]);
    unlock();
    int timed_out = 0;
    spmd_status st = poll_requests(c, n, reqs, done, w, 1, 0, w->deadline_ns, &timed_out);
    if (st != SPMD_OK || timed_out)
        cancel_receives(n, reqs, done); /* after this, done[] says exactly who sent a record */
    present[0] = 1;
    for (int r = 1; r <= n; r++)
        present[r] = (unsigned char)done[r - 1];
    /* everyone turned up after all: the gather is complete whatever stopped the wait */
    int all = 1;
    for (int r = 1; r <= n; r++)
        all &= done[r - 1];
    if (all && timed_out)
        timed_out = 0;
    present[c->size] = st == SPMD_OK ? VERDICT_GO : VERDICT_LEADER_GAVE_UP;
    free(reqs);
    free(done);
    /* Everyone who sent a record waits for this answer, whatever happened here. */
    char message[SPMD__MESSAGE_CAPACITY];
    spmd__copy_text(message, sizeof message, spmd_last_error());
    spmd_status sent = send_table(c, tag, bytes, recv, present, w);
    if (st != SPMD_OK) {
        spmd__error_set_raw(message);
        return st;
    }
    if (sent != SPMD_OK)
        return sent;
    return timed_out ? missing_error(c, present, w) : SPMD_OK;
}

static spmd_status gather_member(spmd__comm *c, unsigned tag, const void *send, size_t bytes,
                                 void *recv, unsigned char *present, spmd__wait *w,
                                 unsigned long index)
{
    MPI_Request reqs[3];
    int done[3] = {0, 0, 0};
    lock();
    int leader = c->peer[0];
    MPI_Isend(send, (int)bytes, MPI_BYTE, leader, (int)tag, c->comm, &reqs[0]);
    MPI_Irecv(present, c->size + 1, MPI_BYTE, leader, (int)tag + 1, c->comm, &reqs[1]);
    MPI_Irecv(recv, (int)(bytes * (size_t)c->size), MPI_BYTE, leader, (int)tag + 1, c->comm,
              &reqs[2]);
    unlock();
    /* Not cancellable (see above) unless the leader says it never began this gather, and a
     * little longer than the leader's own deadline so that its precise verdict arrives first. */
    int timed_out = 0;
    spmd_status st =
        poll_requests(c, 3, reqs, done, w, 0, index, w->deadline_ns + 2000000000LL, &timed_out);
    if (st != SPMD_OK || timed_out) {
        cancel_receives(2, reqs + 1, done + 1);
        abandon_sends(1, reqs, done);
    }
    if (st == SPMD_OK && timed_out && !(done[1] && done[2])) {
        return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                          "%s: process %d (the group's first) did not answer within the "
                          "collective timeout (SPMD_COLLECTIVE_TIMEOUT); every process must "
                          "issue the same collectives in the same order",
                          w->what, c->processes[0]);
    }
    if (st == SPMD_OK && present[c->size] == VERDICT_LEADER_GAVE_UP && (w->remote_failure = 1))
        st = SPMD_ERROR(SPMD_ERR_DISTRIBUTED,
                        "%s: process %d (the group's first) abandoned it because its own call "
                        "failed",
                        w->what, c->processes[0]);
    return st;
}

spmd_status spmd__comm_allgather_wait(spmd__comm *c, const void *send, size_t bytes, void *recv,
                                      spmd__wait *w)
{
    SPMD_REQUIRE(bytes * (size_t)c->size <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                 "%s: %zu bytes per process is beyond MPI's int counts", w->what, bytes);
    unsigned char *present = calloc((size_t)c->size + 1, 1);
    SPMD_REQUIRE(present != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    unsigned tag = take_tags(c);
    spmd_status st = SPMD_OK;
    if (c->rank == 0) {
        /* A leader whose call already failed begins no new gather. Looking at the flag and
         * counting the gather are atomic with respect to spmd__comm_notify_abort, which runs
         * after the flag is set; the cancellation check (which may record another process's
         * abort, and so notify) runs outside the lock. */
        if (w->cancelled)
            st = w->cancelled(w->arg);
        if (st == SPMD_OK) {
            pthread_mutex_lock(&c->gather_lock);
            int stop = w->aborted && atomic_load(w->aborted);
            if (!stop)
                c->gathers++;
            pthread_mutex_unlock(&c->gather_lock);
            if (stop)
                st = w->cancelled
                         ? w->cancelled(w->arg)
                         : SPMD_ERROR(SPMD_ERR_DISTRIBUTED, "%s: the call failed", w->what);
        }
        if (st == SPMD_OK)
            st = gather_leader(c, tag, send, bytes, recv, present, w);
    } else {
        st = gather_member(c, tag, send, bytes, recv, present, w, ++c->gathers);
    }
    if (st == SPMD_OK)
        for (int r = 0; r < c->size && st == SPMD_OK; r++)
            if (!present[r])
                st = missing_error(c, present, w);
    free(present);
    return st;
}

typedef struct agree_record {
    uint64_t fingerprint;
    char description[120];
} agree_record;

spmd_status spmd__comm_agree(spmd__comm *c, uint64_t fingerprint, const char *description,
                             spmd__wait *w)
{
    agree_record mine;
    memset(&mine, 0, sizeof mine);
    mine.fingerprint = fingerprint;
    snprintf(mine.description, sizeof mine.description, "%s", description);
    agree_record *all = malloc((size_t)c->size * sizeof *all);
    SPMD_REQUIRE(all != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    spmd_status st = spmd__comm_allgather_wait(c, &mine, sizeof mine, all, w);
    /* Against this rank's own record: a table left over from an earlier, abandoned collective
     * would agree with itself but not with it. */
    for (int r = 0; st == SPMD_OK && r < c->size; r++)
        if (all[r].fingerprint != fingerprint)
            st =
                SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH,
                           "processes issued different collectives: process %d called %s, "
                           "process %d called %s; every process must issue the same collectives "
                           "with the same shapes in the same order",
                           c->processes[c->rank], description, c->processes[r], all[r].description);
    free(all);
    return st;
}

static MPI_Datatype mpi_type(spmd_dtype dtype)
{
    switch (dtype) {
    case SPMD_DTYPE_F32:
        return MPI_FLOAT;
    case SPMD_DTYPE_F64:
        return MPI_DOUBLE;
    case SPMD_DTYPE_I32:
        return MPI_INT32_T;
    case SPMD_DTYPE_I64:
        return MPI_INT64_T;
    case SPMD_DTYPE_U8:
    case SPMD_DTYPE_BOOL:
        return MPI_UINT8_T;
    default:
        return MPI_DATATYPE_NULL;
    }
}

/* ---- data movement, once every rank agreed to it ---- */

/* How long it may take: the collective timeout ($SPMD_COLLECTIVE_TIMEOUT). */
static _Atomic int64_t data_timeout_ns = (int64_t)300 * 1000000000;

void spmd__comm_set_timeout(int64_t timeout_ns) { atomic_store(&data_timeout_ns, timeout_ns); }

/*
 * Waits for the requests of a data movement, polling against the timeout, so that a process
 * that stops in the middle of it (killed, stuck) ends the wait with SPMD_ERR_TIMEOUT instead of
 * a hang. Unfinished requests stay with MPI (a collective cannot be cancelled): the caller
 * abandons the communicator, and the buffers must outlive the process.
 */
static spmd_status wait_data(spmd__comm *c, int n, MPI_Request *reqs, const int *from,
                             const char *what)
{
    int64_t deadline = spmd__now_ns() + atomic_load(&data_timeout_ns);
    for (;;) {
        int all = 1, rc = MPI_SUCCESS;
        lock();
        /* one by one: a completed request becomes MPI_REQUEST_NULL, so the open ones show */
        for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
            int flag = 1;
            if (reqs[i] != MPI_REQUEST_NULL)
                rc = MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
            all &= flag;
        }
        unlock();
        if (rc != MPI_SUCCESS)
            return mpi_failure(rc, what);
        if (all)
            return SPMD_OK;
        if (spmd__now_ns() > deadline)
            break;
        sched_yield();
    }
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
 * outcome of waiting for it as wait_data does. */
#define MPI_DATA(st, c, call, what)                                                                \
    do {                                                                                           \
        MPI_Request req_ = MPI_REQUEST_NULL;                                                       \
        lock();                                                                                    \
        int started_ = (call);                                                                     \
        unlock();                                                                                  \
        (st) = started_ != MPI_SUCCESS ? mpi_failure(started_, (what))                             \
                                       : wait_data((c), 1, &req_, NULL, (what));                   \
    } while (0)

static MPI_Op mpi_op(spmd__reduce_op op)
{
    return op == SPMD__OP_SUM ? MPI_SUM : op == SPMD__OP_MAX ? MPI_MAX : MPI_MIN;
}

spmd_status spmd__comm_allreduce(spmd__comm *c, const void *send, void *recv, size_t count,
                                 spmd_dtype dtype, spmd__reduce_op op)
{
    MPI_Datatype t = mpi_type(dtype);
    SPMD_REQUIRE(t != MPI_DATATYPE_NULL, SPMD_ERR_INTERNAL, "no MPI type for %s",
                 spmd_dtype_name(dtype));
    size_t elem = spmd_dtype_size(dtype);
    /* MPI counts are ints: reduce very large buffers in pieces. */
    for (size_t done = 0; done < count;) {
        size_t n = count - done < (size_t)INT_MAX ? count - done : (size_t)INT_MAX;
        const void *from = send == recv ? MPI_IN_PLACE : (const char *)send + done * elem;
        spmd_status st;
        MPI_DATA(
            st, c,
            MPI_Iallreduce(from, (char *)recv + done * elem, (int)n, t, mpi_op(op), c->comm, &req_),
            "MPI_Iallreduce");
        SPMD_CHECK(st);
        done += n;
    }
    return SPMD_OK;
}

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
    int *icounts = malloc(2 * (size_t)c->size * sizeof(int));
    SPMD_REQUIRE(icounts != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    int *displs = icounts + c->size;
    spmd_status st = int_counts(c, counts, icounts, displs, "all_gather");
    if (st == SPMD_OK)
        MPI_DATA(st, c,
                 MPI_Iallgatherv(send ? send : MPI_IN_PLACE, icounts[c->rank], MPI_BYTE, recv,
                                 icounts, displs, MPI_BYTE, c->comm, &req_),
                 "MPI_Iallgatherv");
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
                              icounts, displs, MPI_BYTE, root, c->comm, &req_),
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
        MPI_DATA(st, c, MPI_Ibcast((char *)data + offset, (int)n, MPI_BYTE, root, c->comm, &req_),
                 "MPI_Ibcast");
        SPMD_CHECK(st);
    }
    return SPMD_OK;
}

spmd_status spmd__comm_reduce_scatter(spmd__comm *c, const void *send, void *recv,
                                      const size_t *counts, spmd_dtype dtype, spmd__reduce_op op)
{
    MPI_Datatype t = mpi_type(dtype);
    SPMD_REQUIRE(t != MPI_DATATYPE_NULL, SPMD_ERR_INTERNAL, "no MPI type for %s",
                 spmd_dtype_name(dtype));
    int *icounts = malloc(2 * (size_t)c->size * sizeof(int));
    SPMD_REQUIRE(icounts != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    spmd_status st = int_counts(c, counts, icounts, icounts + c->size, "psum_scatter");
    if (st == SPMD_OK)
        MPI_DATA(st, c, MPI_Ireduce_scatter(send, recv, icounts, t, mpi_op(op), c->comm, &req_),
                 "MPI_Ireduce_scatter");
    free(icounts);
    return st;
}

spmd_status spmd__comm_alltoallv(spmd__comm *c, const void *send, const size_t *send_counts,
                                 void *recv, const size_t *recv_counts)
{
    int *ints = malloc(4 * (size_t)c->size * sizeof(int));
    SPMD_REQUIRE(ints != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    int *sc = ints, *sd = ints + c->size, *rc_ = ints + 2 * c->size, *rd = ints + 3 * c->size;
    spmd_status st = int_counts(c, send_counts, sc, sd, "all_to_all");
    if (st == SPMD_OK)
        st = int_counts(c, recv_counts, rc_, rd, "all_to_all");
    if (st == SPMD_OK)
        MPI_DATA(st, c,
                 MPI_Ialltoallv(send, sc, sd, MPI_BYTE, recv, rc_, rd, MPI_BYTE, c->comm, &req_),
                 "MPI_Ialltoallv");
    free(ints);
    return st;
}

spmd_status spmd__comm_exchange(spmd__comm *c, int nsend, const spmd__message *sends, int nrecv,
                                const spmd__message *recvs)
{
    int n = nsend + nrecv;
    MPI_Request *reqs = malloc((size_t)(n ? n : 1) * sizeof *reqs);
    SPMD_REQUIRE(reqs != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < n; i++) {
        const spmd__message *m = i < nrecv ? &recvs[i] : &sends[i - nrecv];
        if (m->bytes > INT_MAX) {
            free(reqs);
            return SPMD_ERROR(SPMD_ERR_UNSUPPORTED,
                              "ppermute: a block of more than 2 GiB exceeds MPI's int counts");
        }
    }
    lock();
    for (int i = 0; i < nrecv; i++)
        MPI_Irecv(recvs[i].data, (int)recvs[i].bytes, MPI_BYTE, recvs[i].peer, recvs[i].tag,
                  c->comm, &reqs[i]);
    for (int i = 0; i < nsend; i++)
        MPI_Isend(sends[i].data, (int)sends[i].bytes, MPI_BYTE, sends[i].peer, sends[i].tag,
                  c->comm, &reqs[nrecv + i]);
    unlock();
    int *from = malloc((size_t)(n ? n : 1) * sizeof *from);
    for (int i = 0; from && i < n; i++)
        from[i] = i < nrecv ? recvs[i].peer : -1;
    spmd_status st = wait_data(c, n, reqs, from, "the ppermute exchange");
    free(from);
    if (st == SPMD_OK)
        free(reqs); /* else MPI still holds them */
    return st;
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

spmd_status spmd__comm_exchange_pieces(spmd__comm *c, int nsend, const spmd__piece_message *sends,
                                       int nrecv, const spmd__piece_message *recvs,
                                       int (*work)(void *), void *work_arg)
{
    int n = nsend + nrecv, built = 0;
    MPI_Request *reqs = malloc((size_t)(n ? n : 1) * sizeof *reqs);
    MPI_Datatype *types = malloc((size_t)(n ? n : 1) * sizeof *types);
    spmd_status st = reqs && types ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    lock();
    while (st == SPMD_OK && built < n) {
        st = piece_message_type(built < nrecv ? &recvs[built] : &sends[built - nrecv],
                                &types[built]);
        built += st == SPMD_OK;
    }
    if (st == SPMD_OK) {
        for (int i = 0; i < nrecv; i++)
            MPI_Irecv(MPI_BOTTOM, 1, types[i], recvs[i].peer, 0, c->comm, &reqs[i]);
        for (int i = 0; i < nsend; i++)
            MPI_Isend(MPI_BOTTOM, 1, types[nrecv + i], sends[i].peer, 0, c->comm, &reqs[nrecv + i]);
        int more = work != NULL, flag = 0;
        while (more) {
            unlock();
            more = work(work_arg);
            lock();
            MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE); /* progress */
        }
        unlock();
        int *from = malloc((size_t)(n ? n : 1) * sizeof *from);
        for (int i = 0; from && i < n; i++)
            from[i] = i < nrecv ? recvs[i].peer : -1;
        st = wait_data(c, n, reqs, from, "the exchange of resharded data");
        free(from);
        lock();
        if (st != SPMD_OK)
            reqs = NULL; /* MPI still holds them */
    }
    for (int i = 0; i < built; i++)
        MPI_Type_free(&types[i]); /* a type stays alive while a request still uses it */
    unlock();
    free(reqs);
    free(types);
    return st;
}

void spmd__comm_notify_abort(spmd__comm *c, unsigned long epoch)
{
    if (c->rank != 0)
        return;
    abort_notice n = {epoch, 0};
    pthread_mutex_lock(&c->gather_lock);
    n.gathers = c->gathers;
    pthread_mutex_unlock(&c->gather_lock);
    void *copy = keep_copy(c, &n, sizeof n);
    if (!copy)
        return; /* the members will time out instead */
    lock();
    for (int r = 1; r < c->size; r++) {
        MPI_Request req;
        if (MPI_Isend(copy, (int)sizeof n, MPI_BYTE, c->peer[r], NOTICE_TAG, c->comm, &req) ==
            MPI_SUCCESS)
            MPI_Request_free(&req);
    }
    unlock();
}

/* The call number a notice or record begins with. */
static unsigned long leading_epoch(const void *message, int bytes)
{
    unsigned long epoch = 0;
    if (bytes >= (int)sizeof epoch)
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

void spmd__comm_drain(spmd__comm *c, unsigned long epoch)
{
    static const int tags[2] = {ABORT_TAG, NOTICE_TAG};
    lock();
    for (int t = 0; t < 2; t++) {
        for (;;) {
            int flag = 0, count = 0;
            MPI_Status status;
            MPI_Iprobe(MPI_ANY_SOURCE, tags[t], c->comm, &flag, &status);
            if (!flag)
                break;
            MPI_Get_count(&status, MPI_BYTE, &count);
            char *buf = malloc(count > 0 ? (size_t)count : 1);
            char byte;
            MPI_Recv(buf ? buf : &byte, buf ? count : 0, MPI_BYTE, status.MPI_SOURCE, tags[t],
                     c->comm, MPI_STATUS_IGNORE);
            unsigned long of = buf ? leading_epoch(buf, count) : 0;
            if (of > epoch && tags[t] == ABORT_TAG) {
                keep_later_record(c, buf, (size_t)count);
                continue;
            }
            if (of > epoch && count >= (int)sizeof(abort_notice)) {
                abort_notice n;
                memcpy(&n, buf, sizeof n);
                c->notice_epoch = n.epoch;
                c->notice_gathers = n.gathers;
            }
            free(buf);
        }
    }
    unlock();
}

void spmd__comm_post_abort(spmd__comm *c, const void *record, size_t bytes)
{
    void *copy = keep_copy(c, record, bytes);
    if (!copy)
        return; /* best effort: the others will time out instead */
    lock();
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank)
            continue;
        MPI_Request req;
        if (MPI_Isend(copy, (int)bytes, MPI_BYTE, r, ABORT_TAG, c->comm, &req) == MPI_SUCCESS)
            MPI_Request_free(&req);
    }
    unlock();
}

int spmd__comm_poll_abort(spmd__comm *c, unsigned long epoch, void *record, size_t bytes)
{
    int found = 0;
    lock();
    for (int i = 0; i < c->num_later && !found; i++) {
        unsigned long of = leading_epoch(c->later_records[i], (int)c->later_bytes[i]);
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
    while (!found) {
        int flag = 0, count = 0;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, ABORT_TAG, c->comm, &flag, &status);
        if (!flag)
            break;
        MPI_Get_count(&status, MPI_BYTE, &count);
        char *buf = malloc(count > 0 ? (size_t)count : 1);
        char byte;
        MPI_Recv(buf ? buf : &byte, buf ? count : 0, MPI_BYTE, status.MPI_SOURCE, ABORT_TAG,
                 c->comm, MPI_STATUS_IGNORE);
        unsigned long of = buf ? leading_epoch(buf, count) : 0;
        if (of == epoch) {
            memcpy(record, buf, bytes < (size_t)count ? bytes : (size_t)count);
            found = 1;
        } else if (of > epoch) {
            keep_later_record(c, buf, (size_t)count);
            continue;
        }
        free(buf);
    }
    unlock();
    return found;
}
