/* The transport of notes between processes about their calls (calls.h): one receive kept
 * posted on the private communicator, read by the waits that last; sends that nobody waits
 * for, their buffers kept until they end. */
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <spmd/mpi.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/comm/comm_mpi_impl.h"
#include "runtime/comm/notes.h"
#include "runtime/devices/event.h"
#include "runtime/calls/trace.h"

#define lock spmd__mpi_lock
#define unlock spmd__mpi_unlock

/* How often the notes are read, at most: a wait that lasts polls them this often. */
#define POLL_EVERY_NS 1000000
#define SENDS 64

static pthread_mutex_t transport = PTHREAD_MUTEX_INITIALIZER;
static int open_;
static MPI_Comm comm = MPI_COMM_NULL;
static MPI_Request receive = MPI_REQUEST_NULL;
static spmd__note incoming;
static MPI_Request send_reqs[SENDS];
static spmd__note *send_bufs[SENDS];
static _Atomic int64_t last_poll;

static void post_receive(void)
{
    lock();
    if (MPI_Irecv(&incoming, (int)sizeof incoming, MPI_BYTE, MPI_ANY_SOURCE, spmd__comm_calls_tag(),
                  comm, &receive) != MPI_SUCCESS)
        receive = MPI_REQUEST_NULL;
    unlock();
}

static void poll_notes(void);
static void flush_notes(void);
static const spmd__notes_transport mpi_notes = {poll_notes, flush_notes};

void spmd__notes_open(void)
{
    spmd__calls_set_transport(&mpi_notes); /* the waits poll the notes through calls.c */
    pthread_mutex_lock(&transport);
    comm = spmd_mpi_comm();
    if (comm != MPI_COMM_NULL) {
        int size = 1;
        MPI_Comm_size(comm, &size);
        open_ = size > 1;
        for (int i = 0; i < SENDS; i++)
            send_reqs[i] = MPI_REQUEST_NULL;
        if (open_)
            post_receive();
    }
    pthread_mutex_unlock(&transport);
}

/* Frees the buffers of sends that ended; `all`: gives up on the others (they may never end:
 * their receiver is gone), keeping their buffers alive. */
static void reap(int all)
{
    for (int i = 0; i < SENDS; i++) {
        if (send_reqs[i] == MPI_REQUEST_NULL)
            continue;
        int done = 0;
        lock();
        MPI_Test(&send_reqs[i], &done, MPI_STATUS_IGNORE);
        if (!done && all)
            MPI_Request_free(&send_reqs[i]);
        unlock();
        if (done) {
            free(send_bufs[i]);
            send_bufs[i] = NULL;
        } else if (all) {
            spmd__comm_keep(send_bufs[i]);
            send_bufs[i] = NULL;
            send_reqs[i] = MPI_REQUEST_NULL;
        }
    }
}

void spmd__notes_close(void)
{
    pthread_mutex_lock(&transport);
    if (open_) {
        lock();
        if (receive != MPI_REQUEST_NULL) {
            MPI_Cancel(&receive);
            MPI_Wait(&receive, MPI_STATUS_IGNORE);
        }
        unlock();
        reap(1);
    }
    open_ = 0;
    comm = MPI_COMM_NULL;
    pthread_mutex_unlock(&transport);
}

/* Sends a copy of `n` to `process` without waiting (best effort: a note that cannot go is
 * dropped, and the wait ends at its deadline as it would have). Called with `transport`. */
static void send_note(const spmd__note *n, int process)
{
    int slot = -1;
    for (int i = 0; i < SENDS && slot < 0; i++)
        if (send_reqs[i] == MPI_REQUEST_NULL)
            slot = i;
    if (slot < 0) {
        reap(0);
        for (int i = 0; i < SENDS && slot < 0; i++)
            if (send_reqs[i] == MPI_REQUEST_NULL)
                slot = i;
    }
    if (slot < 0)
        return;
    spmd__note *copy = malloc(sizeof *copy);
    if (!copy)
        return;
    *copy = *n;
    lock();
    int rc = MPI_Isend(copy, (int)sizeof *copy, MPI_BYTE, process, spmd__comm_calls_tag(), comm,
                       &send_reqs[slot]);
    unlock();
    if (rc != MPI_SUCCESS) {
        send_reqs[slot] = MPI_REQUEST_NULL;
        free(copy);
        return;
    }
    send_bufs[slot] = copy;
}

static void send_abandons(void)
{
    int *processes = NULL, n = 0, told_all = 0;
    uint64_t id = 0;
    unsigned long call = 0;
    spmd__note note;
    memset(&note, 0, sizeof note);
    while (spmd__calls_pending_abandon(&processes, &n, &id, &call, &told_all, note.call,
                                       sizeof note.call)) {
        note.magic = SPMD__NOTE_MAGIC;
        note.kind = SPMD__NOTE_ABANDON;
        note.process = spmd_process_index();
        note.comm_id = id;
        note.comm_call = call;
        note.told_all = told_all;
        for (int i = 0; i < n; i++)
            if (processes[i] != note.process)
                send_note(&note, processes[i]);
        free(processes);
    }
}

static void poll_locked(void);

static void poll_notes(void)
{
    int64_t now = spmd__now_ns(), last = atomic_load_explicit(&last_poll, memory_order_relaxed);
    if (now - last < POLL_EVERY_NS || !atomic_compare_exchange_strong(&last_poll, &last, now))
        return;
    spmd__trace_alive(); /* a wait's turn: what a killed process's trace last says */
    if (pthread_mutex_trylock(&transport) != 0)
        return;
    poll_locked();
}

/* Called with `transport`, which it releases. */
static void poll_locked(void)
{
    if (!open_) {
        pthread_mutex_unlock(&transport);
        return;
    }
    for (int guard = 0; guard < 64 && receive != MPI_REQUEST_NULL; guard++) {
        int arrived = 0, count = 0;
        MPI_Status status;
        lock();
        MPI_Test(&receive, &arrived, &status);
        if (arrived)
            MPI_Get_count(&status, MPI_BYTE, &count);
        unlock();
        if (!arrived)
            break;
        spmd__note n;
        int whole = count == (int)sizeof n && status.MPI_SOURCE != MPI_ANY_SOURCE;
        if (whole)
            memcpy(&n, &incoming, sizeof n);
        post_receive();
        if (whole && n.process == status.MPI_SOURCE && spmd__calls_take_note(&n)) {
            spmd__note answer;
            spmd__calls_fill_note(&answer, SPMD__NOTE_REPLY, n.process, n.probe, &n);
            send_note(&answer, n.process);
        }
    }
    /* a lasting wait asks its partner and those of its exchange's later steps */
    int to[2 * SPMD__WAIT_AHEAD];
    uint64_t ids[2 * SPMD__WAIT_AHEAD];
    int due = spmd__calls_due_probes(to, ids, 2 * SPMD__WAIT_AHEAD);
    for (int i = 0; i < due; i++) {
        spmd__note probe;
        spmd__calls_fill_note(&probe, SPMD__NOTE_PROBE, to[i], ids[i], NULL);
        send_note(&probe, to[i]);
    }
    send_abandons();
    reap(0);
    pthread_mutex_unlock(&transport);
}

static void flush_notes(void)
{
    pthread_mutex_lock(&transport);
    if (open_)
        send_abandons();
    pthread_mutex_unlock(&transport);
}
