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

/* Tags: abort records use one fixed tag, views (mesh set-up) one fixed pair; gather/broadcast
 * pairs of created communicators cycle through the rest. */
#define ABORT_TAG 32000
#define VIEW_TAG 31500
#define CYCLE_TAGS 31000

struct spmd__comm {
    MPI_Comm comm;
    int rank;
    int size;
    int *processes;      /* runtime process index of each rank */
    int *peer;           /* rank in `comm` of each rank: itself, or for a view its process */
    int is_view;
    unsigned next_tag;   /* advanced identically on every rank */
    void **abort_copies; /* send buffers of posted abort records, freed with the comm */
    int num_abort_copies;
};

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
    return c;
}

static void free_wrapper(spmd__comm *c)
{
    for (int i = 0; i < c->num_abort_copies; i++)
        free(c->abort_copies[i]);
    free(c->abort_copies);
    free(c->processes);
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

void spmd__comm_abandon(spmd__comm *c)
{
    /* The MPI communicator itself is leaked on purpose: freeing it would wait for the
     * collective that will never complete. */
    if (c)
        free_wrapper(c);
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

/* Polls requests until all complete, the deadline passes or the wait is cancelled. done[i]
 * records which completed. */
static spmd_status poll_requests(int n, MPI_Request *reqs, int *done, const spmd__wait *w,
                                 int64_t deadline, int *timed_out)
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
        if (w->cancelled) {
            spmd_status st = w->cancelled(w->arg);
            if (st != SPMD_OK)
                return st;
        }
        if (spmd__now_ns() > deadline) {
            *timed_out = 1;
            return SPMD_OK;
        }
        sched_yield();
    }
}

static void cancel_pending(int n, MPI_Request *reqs, const int *done)
{
    lock();
    for (int i = 0; i < n; i++)
        if (!done[i] && reqs[i] != MPI_REQUEST_NULL) {
            MPI_Cancel(&reqs[i]);
            MPI_Request_free(&reqs[i]);
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

/* The leader's answer to each present member: who was present, then every record. Members that
 * gave up meanwhile cancelled their receives, hence non-blocking sends with a deadline. */
static spmd_status send_table(spmd__comm *c, unsigned tag, size_t bytes, const void *table,
                              const unsigned char *present, const spmd__wait *w)
{
    int n = 2 * (c->size - 1);
    MPI_Request *reqs = malloc((size_t)(n ? n : 1) * sizeof *reqs);
    int *done = calloc((size_t)(n ? n : 1), sizeof *done);
    if (!reqs || !done) {
        free(reqs);
        free(done);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory answering processes");
    }
    lock();
    for (int r = 1; r < c->size; r++) {
        MPI_Request *pair = &reqs[2 * (r - 1)];
        if (!present[r]) {
            pair[0] = pair[1] = MPI_REQUEST_NULL;
            done[2 * (r - 1)] = done[2 * (r - 1) + 1] = 1;
            continue;
        }
        MPI_Isend(present, c->size, MPI_BYTE, c->peer[r], (int)tag + 1, c->comm, &pair[0]);
        MPI_Isend(table, (int)(bytes * (size_t)c->size), MPI_BYTE, c->peer[r], (int)tag + 1,
                  c->comm, &pair[1]);
    }
    unlock();
    int timed_out = 0;
    spmd_status st = poll_requests(n, reqs, done, w, w->deadline_ns + 2000000000LL, &timed_out);
    if (st != SPMD_OK || timed_out)
        cancel_pending(n, reqs, done);
    free(reqs);
    free(done);
    return st;
}

/* Rank 0 gathers everyone's record, then sends the table (with who was present) back, so that
 * every rank learns exactly which processes are missing when some are. */
static spmd_status gather_leader(spmd__comm *c, unsigned tag, const void *send, size_t bytes,
                                 void *recv, unsigned char *present, const spmd__wait *w)
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
    spmd_status st = poll_requests(n, reqs, done, w, w->deadline_ns, &timed_out);
    present[0] = 1;
    for (int r = 1; r <= n; r++)
        present[r] = (unsigned char)done[r - 1];
    if (st != SPMD_OK || timed_out)
        cancel_pending(n, reqs, done);
    free(reqs);
    free(done);
    if (st == SPMD_OK)
        st = send_table(c, tag, bytes, recv, present, w);
    if (st == SPMD_OK && timed_out) {
        char missing[256];
        list_missing(c, present, missing, sizeof missing);
        st = SPMD_ERROR(SPMD_ERR_TIMEOUT,
                        "%s: process(es) %s did not arrive within the collective timeout "
                        "(SPMD_COLLECTIVE_TIMEOUT); every process must issue the same "
                        "collectives in the same order",
                        w->what, missing);
    }
    return st;
}

static spmd_status gather_member(spmd__comm *c, unsigned tag, const void *send, size_t bytes,
                                 void *recv, unsigned char *present, const spmd__wait *w)
{
    MPI_Request reqs[3];
    int done[3] = {0, 0, 0};
    lock();
    int leader = c->peer[0];
    MPI_Isend(send, (int)bytes, MPI_BYTE, leader, (int)tag, c->comm, &reqs[0]);
    MPI_Irecv(present, c->size, MPI_BYTE, leader, (int)tag + 1, c->comm, &reqs[1]);
    MPI_Irecv(recv, (int)(bytes * (size_t)c->size), MPI_BYTE, leader, (int)tag + 1, c->comm,
              &reqs[2]);
    unlock();
    /* A little longer than the leader, so that its precise verdict arrives first. */
    int timed_out = 0;
    spmd_status st = poll_requests(3, reqs, done, w, w->deadline_ns + 2000000000LL, &timed_out);
    if (st != SPMD_OK || timed_out)
        cancel_pending(3, reqs, done);
    if (st == SPMD_OK && timed_out)
        st = SPMD_ERROR(SPMD_ERR_TIMEOUT,
                        "%s: process %d (the group's first) did not answer within the collective "
                        "timeout (SPMD_COLLECTIVE_TIMEOUT); every process must issue the same "
                        "collectives in the same order",
                        w->what, c->processes[0]);
    return st;
}

spmd_status spmd__comm_allgather_wait(spmd__comm *c, const void *send, size_t bytes, void *recv,
                                      const spmd__wait *w)
{
    SPMD_REQUIRE(bytes * (size_t)c->size <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                 "%s: %zu bytes per process is beyond MPI's int counts", w->what, bytes);
    unsigned char *present = calloc((size_t)c->size, 1);
    SPMD_REQUIRE(present != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    unsigned tag = take_tags(c);
    spmd_status st = c->rank == 0 ? gather_leader(c, tag, send, bytes, recv, present, w)
                                  : gather_member(c, tag, send, bytes, recv, present, w);
    if (st == SPMD_OK) {
        int all = 1;
        for (int r = 0; r < c->size; r++)
            all &= present[r];
        if (!all) {
            char missing[256];
            list_missing(c, present, missing, sizeof missing);
            st = SPMD_ERROR(SPMD_ERR_TIMEOUT,
                            "%s: process(es) %s did not arrive within the collective timeout "
                            "(SPMD_COLLECTIVE_TIMEOUT); every process must issue the same "
                            "collectives in the same order",
                            w->what, missing);
        }
    }
    free(present);
    return st;
}

typedef struct agree_record {
    uint64_t fingerprint;
    char description[120];
} agree_record;

spmd_status spmd__comm_agree(spmd__comm *c, uint64_t fingerprint, const char *description,
                             const spmd__wait *w)
{
    agree_record mine;
    memset(&mine, 0, sizeof mine);
    mine.fingerprint = fingerprint;
    snprintf(mine.description, sizeof mine.description, "%s", description);
    agree_record *all = malloc((size_t)c->size * sizeof *all);
    SPMD_REQUIRE(all != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    spmd_status st = spmd__comm_allgather_wait(c, &mine, sizeof mine, all, w);
    for (int r = 0; st == SPMD_OK && r < c->size; r++)
        if (all[r].fingerprint != all[0].fingerprint)
            st = SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH,
                            "processes issued different collectives: process %d called %s, "
                            "process %d called %s; every process must issue the same collectives "
                            "with the same shapes in the same order",
                            c->processes[0], all[0].description, c->processes[r],
                            all[r].description);
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

static MPI_Op mpi_op(spmd__reduce_op op)
{
    return op == SPMD__OP_SUM ? MPI_SUM : op == SPMD__OP_MAX ? MPI_MAX : MPI_MIN;
}

spmd_status spmd__comm_allreduce(spmd__comm *c, void *buf, size_t count, spmd_dtype dtype,
                                 spmd__reduce_op op)
{
    MPI_Datatype t = mpi_type(dtype);
    SPMD_REQUIRE(t != MPI_DATATYPE_NULL, SPMD_ERR_INTERNAL, "no MPI type for %s",
                 spmd_dtype_name(dtype));
    size_t elem = spmd_dtype_size(dtype);
    /* MPI counts are ints: reduce very large buffers in pieces. */
    for (size_t done = 0; done < count;) {
        size_t n = count - done < (size_t)INT_MAX ? count - done : (size_t)INT_MAX;
        MPI_CALL(MPI_Allreduce(MPI_IN_PLACE, (char *)buf + done * elem, (int)n, t, mpi_op(op),
                               c->comm),
                 "MPI_Allreduce");
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
    if (st == SPMD_OK) {
        lock();
        int rc = MPI_Allgatherv(send, icounts[c->rank], MPI_BYTE, recv, icounts, displs, MPI_BYTE,
                                c->comm);
        unlock();
        if (rc != MPI_SUCCESS)
            st = mpi_failure(rc, "MPI_Allgatherv");
    }
    free(icounts);
    return st;
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
    if (st == SPMD_OK) {
        lock();
        int rc = MPI_Reduce_scatter(send, recv, icounts, t, mpi_op(op), c->comm);
        unlock();
        if (rc != MPI_SUCCESS)
            st = mpi_failure(rc, "MPI_Reduce_scatter");
    }
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
    if (st == SPMD_OK) {
        lock();
        int rc = MPI_Alltoallv(send, sc, sd, MPI_BYTE, recv, rc_, rd, MPI_BYTE, c->comm);
        unlock();
        if (rc != MPI_SUCCESS)
            st = mpi_failure(rc, "MPI_Alltoallv");
    }
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
    int rc = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    unlock();
    free(reqs);
    return rc == MPI_SUCCESS ? SPMD_OK : mpi_failure(rc, "MPI_Waitall (ppermute)");
}

void spmd__comm_post_abort(spmd__comm *c, const void *record, size_t bytes)
{
    void **grown = realloc(c->abort_copies, (size_t)(c->num_abort_copies + 1) * sizeof *grown);
    void *copy = malloc(bytes);
    if (!grown || !copy) {
        free(copy);
        if (grown)
            c->abort_copies = grown;
        return; /* best effort: the others will time out instead */
    }
    c->abort_copies = grown;
    c->abort_copies[c->num_abort_copies++] = copy;
    memcpy(copy, record, bytes);
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

int spmd__comm_poll_abort(spmd__comm *c, void *record, size_t bytes)
{
    int flag = 0;
    MPI_Status status;
    lock();
    MPI_Iprobe(MPI_ANY_SOURCE, ABORT_TAG, c->comm, &flag, &status);
    if (flag)
        MPI_Recv(record, (int)bytes, MPI_BYTE, status.MPI_SOURCE, ABORT_TAG, c->comm,
                 MPI_STATUS_IGNORE);
    unlock();
    return flag;
}
