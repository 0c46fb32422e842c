#include "runtime/host_rings.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/check.h"
#include "runtime/event.h"

/* Slots per ring: an exchange has one message in flight per pair and direction, and each of a
 * process's devices may be in one (up to 8 devices per process without falling back to MPI);
 * messages left by exchanges given up take slots too. */
enum { SLOTS = 8 };
enum { SLOT_EMPTY = 0, SLOT_WRITING, SLOT_FULL, SLOT_TAKING };
#define SEGMENT_MAGIC 0x73706d6472696e67ull /* "spmdring" */

typedef struct slot {
    _Alignas(64) _Atomic uint32_t state;
    uint32_t bytes;
    int32_t tag;
    uint32_t stamp; /* the exchange's (check_mpi.c), for a look that takes nothing */
    uint64_t wire;
    uint64_t seq; /* per sender and receiver: the oldest of several matching messages first */
    char data[SPMD__RING_BYTES];
} slot;

/* The last exchanges (their tokens) in which the sender gave up waiting for this process: the
 * shared-memory form of its notes (check_mpi.c), several in case they come faster than looked
 * at. */
enum { GAVE_UP = 8 };

typedef struct ring {
    _Alignas(64) _Atomic uint64_t gave_up[GAVE_UP];
    _Atomic uint32_t gave_up_next;
    slot slots[SLOTS];
} ring;

/* A segment: this head, an attached flag per process of the machine (set by that process once it
 * mapped the segment: it writes here from then on), then one ring per process of the machine. */
typedef struct segment_head {
    uint64_t magic;
    uint64_t job;      /* whose start-up: names alone could meet another job's */
    int32_t owner;     /* the process whose inbound rings these are */
    int32_t processes; /* on the machine: rings */
} segment_head;

static struct {
    int n;                      /* processes on this machine; 0: no rings at all */
    int crowded;                /* more of them than cores: a poll that finds nothing yields */
    int here;                   /* this process's index among them */
    int *local_of;              /* [process count]: index on this machine, -1 for other machines */
    char *own;                  /* this process's segment (its inbound rings), or NULL */
    char **peers;               /* [n]: the others' segments, mapped (NULL: none) */
    size_t segment_bytes;       /* every segment's (they hold n rings each) */
    size_t rings_at;            /* ... and where its rings begin */
    int *writes_here;           /* [n]: that process writes its messages to this one into rings */
    _Atomic uint64_t *next_seq; /* [n]: messages sent into that process's ring */
} R;

static size_t rings_offset(int n)
{
    size_t head = sizeof(segment_head) + (size_t)n * sizeof(_Atomic uint32_t);
    return (head + 63) / 64 * 64;
}

static _Atomic uint32_t *attached_flags(char *segment)
{
    return (_Atomic uint32_t *)(segment + sizeof(segment_head));
}

static ring *ring_in(char *segment, int sender) { return (ring *)(segment + R.rings_at) + sender; }

static void segment_name(char *name, size_t size, uint64_t job, int process)
{
    snprintf(name, size, "/spmd-rings-%016llx-%d", (unsigned long long)job, process);
}

/* Creates and maps this process's segment; NULL when shared memory is not available (the
 * others then send everything to this process through MPI). */
static char *create_own(const char *name, size_t bytes, uint64_t job, int me)
{
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST) { /* a leftover (a crash within spmd_init) */
        shm_unlink(name);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    }
    if (fd < 0)
        return NULL;
    char *p = NULL;
    /* the pages now: tmpfs would allocate them at the first write, and a full /dev/shm would
     * then kill the writer (SIGBUS) mid-collective */
    if (ftruncate(fd, (off_t)bytes) == 0 && posix_fallocate(fd, 0, (off_t)bytes) == 0) {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            p = NULL;
    }
    close(fd);
    if (!p) {
        shm_unlink(name);
        return NULL;
    }
    segment_head head = {SEGMENT_MAGIC, job, me, R.n};
    memcpy(p, &head, sizeof head); /* the rest is zero: every slot empty, nobody attached */
    return p;
}

/* Maps another process's segment; NULL when it has none (or not the expected one). */
static char *open_peer(const char *name, size_t bytes, uint64_t job, int owner)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *p = NULL;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size == bytes) {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            p = NULL;
    }
    close(fd);
    segment_head head;
    if (p) {
        memcpy(&head, p, sizeof head);
        if (head.magic != SEGMENT_MAGIC || head.job != job || head.owner != owner ||
            head.processes != R.n) {
            munmap(p, bytes);
            p = NULL;
        }
    }
    return p;
}

/* Every process of comm arrives here, or the start-up fails after timeout_ns. */
static spmd_status barrier(MPI_Comm comm, int64_t timeout_ns)
{
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = MPI_Ibarrier(comm, &request);
    int64_t deadline = spmd__now_ns() + timeout_ns;
    while (rc == MPI_SUCCESS) {
        int done = 0;
        rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && done)
            return SPMD_OK;
        SPMD_REQUIRE(spmd__now_ns() < deadline, SPMD_ERR_TIMEOUT,
                     "setting up shared memory between the processes did not complete within "
                     "SPMD_INIT_TIMEOUT, although every process had arrived: a process stopped "
                     "during start-up");
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error code %d", rc);
    return SPMD_ERROR(SPMD_ERR_DISTRIBUTED, "MPI_Ibarrier failed during start-up: %s", text);
}

static spmd_status allocate_tables(int count)
{
    R.local_of = malloc((size_t)count * sizeof *R.local_of);
    R.peers = calloc((size_t)R.n, sizeof *R.peers);
    R.writes_here = calloc((size_t)R.n, sizeof *R.writes_here);
    R.next_seq = calloc((size_t)R.n, sizeof *R.next_seq);
    SPMD_REQUIRE(R.local_of && R.peers && R.writes_here && R.next_seq, SPMD_ERR_OUT_OF_MEMORY,
                 "out of memory for the shared-memory rings of %d processes", R.n);
    return SPMD_OK;
}

spmd_status spmd__rings_link(MPI_Comm comm, int me, int count, const uint64_t *hosts, uint64_t job,
                             int want, int64_t timeout_ns)
{
    spmd__rings_unlink();
    int n = 0, here = -1;
    for (int p = 0; p < count; p++)
        if (hosts[p] == hosts[me]) {
            if (p == me)
                here = n;
            n++;
        }
    /* Whether rings are wanted may differ between processes: the barriers are everyone's. */
    int rings = want && n > 1;
    char name[64];
    if (rings) {
        R.n = n;
        R.here = here;
        if (allocate_tables(count) != SPMD_OK) { /* only this process goes without */
            spmd__rings_unlink();
            rings = 0;
        }
    }
    if (rings) {
        for (int p = 0, k = 0; p < count; p++)
            R.local_of[p] = hosts[p] == hosts[me] ? k++ : -1;
        R.rings_at = rings_offset(n);
        R.segment_bytes = R.rings_at + (size_t)n * sizeof(ring);
        /* the machine's cores, not this process's affinity: a launcher binds each process
         * to a core of its own */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        R.crowded = cores > 0 && n > cores;
        segment_name(name, sizeof name, job, me);
        R.own = create_own(name, R.segment_bytes, job, me);
    }
    spmd_status met = barrier(comm, timeout_ns); /* every segment exists now */
    for (int p = 0; met == SPMD_OK && rings && p < count; p++) {
        int j = R.local_of[p];
        if (j < 0 || p == me)
            continue;
        char peer_name[64];
        segment_name(peer_name, sizeof peer_name, job, p);
        R.peers[j] = open_peer(peer_name, R.segment_bytes, job, p);
        if (R.peers[j]) /* from now on this process writes to p through p's rings */
            atomic_store_explicit(&attached_flags(R.peers[j])[here], 1, memory_order_release);
    }
    if (met == SPMD_OK)
        met = barrier(comm, timeout_ns); /* every process that will write here said so */
    if (R.own) {
        shm_unlink(name); /* the mappings live on; nothing is left behind if a process dies */
        for (int j = 0; j < R.n; j++)
            R.writes_here[j] =
                atomic_load_explicit(&attached_flags(R.own)[j], memory_order_acquire) != 0;
    }
    if (met != SPMD_OK)
        spmd__rings_unlink();
    return met;
}

void spmd__rings_unlink(void)
{
    for (int j = 0; R.peers && j < R.n; j++)
        if (R.peers[j])
            munmap(R.peers[j], R.segment_bytes);
    if (R.own)
        munmap(R.own, R.segment_bytes);
    free(R.local_of);
    free(R.peers);
    free(R.writes_here);
    free((void *)R.next_seq);
    memset(&R, 0, sizeof R);
}

int spmd__rings_crowded(void) { return R.crowded; }

int spmd__ring_from(int from)
{
    if (!R.own)
        return 0;
    int j = R.local_of[from];
    return j >= 0 && R.writes_here[j];
}

int spmd__ring_send(int to, uint64_t wire, int tag, uint32_t stamp, const void *data, size_t bytes)
{
    if (!R.n || bytes > SPMD__RING_BYTES)
        return 0;
    int j = R.local_of[to];
    if (j < 0 || !R.peers[j])
        return 0;
    ring *r = ring_in(R.peers[j], R.here);
    for (int k = 0; k < SLOTS; k++) {
        slot *s = &r->slots[k];
        uint32_t empty = SLOT_EMPTY;
        if (!atomic_compare_exchange_strong_explicit(&s->state, &empty, SLOT_WRITING,
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        s->bytes = (uint32_t)bytes;
        s->tag = tag;
        s->stamp = stamp;
        s->wire = wire;
        s->seq = atomic_fetch_add_explicit(&R.next_seq[j], 1, memory_order_relaxed);
        memcpy(s->data, data, bytes);
        atomic_store_explicit(&s->state, SLOT_FULL, memory_order_release);
        return 1;
    }
    return 0;
}

int spmd__ring_ready(int from, uint64_t wire, int tag, uint32_t stamp)
{
    ring *r = ring_in(R.own, R.local_of[from]);
    for (int k = 0; k < SLOTS; k++) { /* a look only: spmd__ring_take claims what it takes */
        slot *s = &r->slots[k];
        if (atomic_load_explicit(&s->state, memory_order_acquire) == SLOT_FULL && s->wire == wire &&
            s->tag == tag && s->stamp == stamp)
            return 1;
    }
    return 0;
}

long spmd__ring_take(int from, uint64_t wire, int tag, void *buf, size_t cap)
{
    ring *r = ring_in(R.own, R.local_of[from]);
    for (;;) {
        slot *best = NULL;
        uint64_t best_seq = 0;
        for (int k = 0; k < SLOTS; k++) {
            slot *s = &r->slots[k];
            if (atomic_load_explicit(&s->state, memory_order_acquire) == SLOT_FULL &&
                s->wire == wire && s->tag == tag && (!best || s->seq < best_seq)) {
                best = s;
                best_seq = s->seq;
            }
        }
        if (!best)
            return -1;
        /* Claimed before it is read: another thread of this process may have taken what this
         * one looked at, and the sender written another message there since. */
        uint32_t full = SLOT_FULL;
        if (!atomic_compare_exchange_strong_explicit(&best->state, &full, SLOT_TAKING,
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        if (best->wire != wire || best->tag != tag || best->seq != best_seq) {
            atomic_store_explicit(&best->state, SLOT_FULL, memory_order_release); /* not ours */
            continue;
        }
        size_t bytes = best->bytes;
        memcpy(buf, best->data, bytes < cap ? bytes : cap);
        atomic_store_explicit(&best->state, SLOT_EMPTY, memory_order_release);
        return bytes > cap ? (long)cap + 1 : (long)bytes;
    }
}

void spmd__ring_forget(uint64_t wire)
{
    for (int j = 0; R.own && j < R.n; j++) {
        ring *r = ring_in(R.own, j);
        for (int k = 0; k < SLOTS; k++) {
            slot *s = &r->slots[k];
            uint32_t full = SLOT_FULL;
            if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_FULL ||
                s->wire != wire ||
                !atomic_compare_exchange_strong_explicit(
                    &s->state, &full, SLOT_TAKING, memory_order_acquire, memory_order_relaxed))
                continue;
            atomic_store_explicit(&s->state, s->wire == wire ? SLOT_EMPTY : SLOT_FULL,
                                  memory_order_release);
        }
    }
}

void spmd__ring_give_up(int to, uint64_t token)
{
    int j = R.n ? R.local_of[to] : -1;
    if (j < 0 || !R.peers[j])
        return;
    ring *r = ring_in(R.peers[j], R.here);
    uint32_t k = atomic_fetch_add_explicit(&r->gave_up_next, 1, memory_order_relaxed);
    atomic_store_explicit(&r->gave_up[k % GAVE_UP], token, memory_order_release);
}

int spmd__ring_gave_up(int from, uint64_t token)
{
    ring *r = ring_in(R.own, R.local_of[from]);
    for (int k = 0; k < GAVE_UP; k++)
        if (atomic_load_explicit(&r->gave_up[k], memory_order_acquire) == token)
            return 1;
    return 0;
}
