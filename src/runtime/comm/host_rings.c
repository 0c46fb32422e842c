#include "runtime/comm/host_rings.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#endif

#include "runtime/base/check.h"
#include "runtime/devices/cores.h"
#include "runtime/devices/event.h"
#include "runtime/base/log.h"
#include "runtime/base/stream_copy.h"
#include "runtime/comm/mpi_failure.h"
#include "runtime/comm/process.h"
#include "runtime/comm/way_choice.h"

/* Slots per ring: an exchange has one message in flight per pair and direction, and each of a
 * process's devices may be in one (up to 8 devices per process without falling back to MPI);
 * messages left by exchanges given up take slots too. */
enum { SLOTS = 8 };
/* Wide slots per ring, for messages longer than a slot (up to SPMD__RING_WIDE_BYTES). A message
 * takes one of the first two (one in flight, the next call's beside it), and goes through MPI
 * when they are taken: its reader may be busy elsewhere for a long while. A stream's chunk takes
 * any, and only while its reader listens for the stream (spmd__ring_listen: in the stream, or
 * finishing the agreement before it), so the last holds nothing whose reader does not take it
 * soon, and streams between the same two processes at once (a shard_map's groups) never wait
 * on each other for good. */
enum { WIDE_SLOTS = 3, WIDE_FOR_MESSAGES = 2 };
/* Streams a process may read from one sender at once: more wait until one ends. */
enum { LISTENERS = 16 };
enum { SLOT_EMPTY = 0, SLOT_WRITING, SLOT_FULL, SLOT_TAKING };
#define SEGMENT_MAGIC 0x73706d6472696e67ull /* "spmdring" */
/* The wide slots of all the segments of a machine stay within this: a machine with many
 * processes gets narrower ones (none below a slot's size), so that /dev/shm is not filled. */
#define WIDE_MACHINE_BYTES ((size_t)48 << 20)

typedef struct slot_head {
    _Alignas(64) _Atomic uint32_t state;
    uint32_t bytes;
    int32_t tag;
    uint32_t stamp; /* the exchange's (check_mpi.c), for a look that takes nothing */
    uint64_t wire;
    uint64_t seq; /* per sender and receiver: the oldest of several matching messages first */
    uint64_t key; /* a stream's chunk: its stream (spmd__ring_listen); 0: a message */
    uint32_t way; /* a timed message (choose_way): WAY_CACHED or WAY_AROUND; else 0 */
} slot_head;

/* How a message went into a wide slot, for what its write and its read cost (choose_way). */
enum { WAY_CACHED = 1, WAY_AROUND = 2 };

/* What the messages of a ring's sender cost lately, by the way they went (ns per KiB, a moving
 * average, 0 until measured): to write, measured by the sender, and to read (from claim to
 * release), by the receiver. Races between threads only blur a choice, never a message. */
typedef struct way_costs {
    _Alignas(64) _Atomic uint32_t write_ns[2];  /* the sender's line ... */
    _Atomic uint32_t messages, turn_way;        /* counted into turns; the way of the current one */
    _Atomic uint32_t contested, contested_turn; /* spmd__ring_pick_direct's: as turn_way */
    _Alignas(64) _Atomic uint32_t read_ns[2];   /* ... and the receiver's */
    _Atomic uint32_t contested_ns[2]; /* contested messages through the slots, read straight */
    _Atomic uint32_t contested_last;  /* the way the last one came (1 + direct; 0: none yet) */
} way_costs;

typedef struct slot {
    slot_head h;
    char data[SPMD__RING_BYTES];
} slot;

/* The last exchanges (their tokens) in which the sender gave up waiting for this process: the
 * shared-memory form of its notes (check_mpi.c), several in case they come faster than looked
 * at. */
enum { GAVE_UP = 8 };

typedef struct ring {
    _Alignas(64) _Atomic uint64_t gave_up[GAVE_UP];
    _Atomic uint32_t gave_up_next;
    _Alignas(64) _Atomic uint64_t listening[LISTENERS]; /* the receiver's streams (their keys) */
    /* the answers of the sender (this ring's) to the notes this segment's owner sent it: a
     * word claimed by the owner, answered by the sender (spmd__ring_word_claim) */
    _Alignas(64) _Atomic uint64_t words[SPMD__RING_WORDS];
    slot slots[SLOTS];
    slot_head wide[WIDE_SLOTS]; /* their data lies in the segment's wide area */
    way_costs costs;
} ring;

/* A segment: this head, an attached flag per process of the machine (set by that process once it
 * mapped the segment: it writes here from then on), then one ring per process of the machine,
 * then the data of their wide slots. */
typedef struct segment_head {
    uint64_t magic;
    uint64_t job;      /* whose start-up: names alone could meet another job's */
    int32_t owner;     /* the process whose inbound rings these are */
    int32_t processes; /* on the machine: rings */
    int64_t pid;       /* the owner's, and where its segment lies in its memory: a peer's */
    uint64_t at;       /* direct read of this head proves it may read the owner's memory */
    /* On a crowded machine, while `dozing` counts threads of its owner that sleep on it (a
     * futex: spmd__ring_pause): bumped after every event they may wait for (a message into its
     * rings, a slot of its freed, a reader listening to it, a peer giving up on it). */
    _Alignas(64) _Atomic uint32_t bell;
    _Atomic uint32_t dozing;
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
    size_t wide_at, wide_bytes; /* ... where the wide slots' data begins, and each one's size */
    int *writes_here;           /* [n]: that process writes its messages to this one into rings */
    int all_linked;             /* every process of the machine made its segment (alike on all) */
    _Atomic uint64_t *next_seq; /* [n]: messages sent into that process's ring */
    int64_t *pid_of;            /* [n]: each one's process id */
    int *reads_from;            /* [n]: this process reads that one's memory straight */
    int *read_by;               /* [n]: that process reads this one's memory straight */
} R;

/* What a peer writes into this process's attached flags: it writes here, and (DIRECT) it reads
 * this process's memory straight. */
enum { ATTACHED = 1, ATTACHED_DIRECT = 2 };

/* The communicators gone last (spmd__ring_forget): a message for one of them that a sender
 * still writes afterwards (a peer that stalled past the timeout, then went on) is emptied by
 * the next look at its ring, instead of holding its slot for good. */
enum { FORGOTTEN = 64 };
static _Atomic uint64_t forgotten[FORGOTTEN]; /* cleared with the rings: wires restart at
                                                 spmd_init */
static _Atomic uint32_t forgotten_next;

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

/* Slot k of a ring: the slots, then the wide slots. */
static slot_head *slot_of(ring *r, int k)
{
    return k < SLOTS ? &r->slots[k].h : &r->wide[k - SLOTS];
}

/* Where the data of slot k of the ring from `sender` in `segment` lies, and how much it holds. */
static char *slot_data(char *segment, int sender, int k, size_t *capacity)
{
    if (k < SLOTS) {
        *capacity = SPMD__RING_BYTES;
        return ring_in(segment, sender)->slots[k].data;
    }
    *capacity = R.wide_bytes;
    return segment + R.wide_at + ((size_t)sender * WIDE_SLOTS + (size_t)(k - SLOTS)) * R.wide_bytes;
}

/* ---- the bell: waits that sleep until the event they wait for, on a crowded machine ---- */

static segment_head *head_of(char *segment) { return (segment_head *)segment; }

/* Tells the owner of `segment` that something it may wait for happened, where one of its threads
 * dozes. Only on a crowded machine: elsewhere its waits poll. */
static void ring_bell(char *segment)
{
#ifdef __linux__
    if (!R.crowded || !segment)
        return;
    segment_head *h = head_of(segment);
    /* the event before the look at `dozing`, against the dozer's count before its last look at
     * the rings (both sequentially consistent): it sees this event, or this sees it dozing */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&h->dozing, memory_order_relaxed)) {
        atomic_fetch_add(&h->bell, 1);
        syscall(SYS_futex, (uint32_t *)&h->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
#else
    (void)segment;
#endif
}

/* The bell of process j of this machine (this one's when j is R.here). */
static char *segment_of(int j) { return j == R.here ? R.own : R.peers[j]; }

/* A thread's doze in two steps: armed (counted in `dozing`, the bell read), then, after one
 * more look at the rings, asleep until the bell moves. */
static _Thread_local int doze_armed;
static _Thread_local uint32_t doze_seen;

void spmd__ring_pause(spmd__pause *p, int64_t now_ns, int64_t spin_ns)
{
#ifdef __linux__
    /* a crowd measured (the pause would nap from now on): sleep until what it waits for rings */
    if (!p->holds_core && p->crowded && R.crowded && R.own) {
        segment_head *h = head_of(R.own);
        if (!doze_armed) {
            atomic_fetch_add(&h->dozing, 1);
            /* the count before the next look at the rings, against the writer's event before
             * its look at the count (ring_bell) */
            atomic_thread_fence(memory_order_seq_cst);
            doze_seen = atomic_load(&h->bell);
            doze_armed = 1;
            return; /* every event from now on rings: the caller looks once more */
        }
        struct timespec ts = {0, SPMD__RING_DOZE_NS};
        syscall(SYS_futex, (uint32_t *)&h->bell, FUTEX_WAIT, doze_seen, &ts, NULL, 0);
        doze_seen = atomic_load(&h->bell); /* still armed: the next pause sleeps at once */
        return;
    }
#endif
    spmd__ring_pause_end();
    spmd__pause_step(p, now_ns, spin_ns);
}

void spmd__ring_pause_end(void)
{
    if (!doze_armed)
        return;
    doze_armed = 0;
    atomic_fetch_sub(&head_of(R.own)->dozing, 1);
}

/* Wide slots a ring has: only where the machine has room for them. */
static int wide_in_ring(void) { return R.wide_bytes ? WIDE_SLOTS : 0; }

/* Slots a ring has, the wide ones after the others (slot_of). */
static int slots_in_ring(void) { return SLOTS + wide_in_ring(); }

/* Each wide slot's size for n processes on a machine: 0 when that is no more than a slot. */
static size_t wide_bytes_for(int n)
{
    size_t fair = WIDE_MACHINE_BYTES / ((size_t)n * (size_t)n * WIDE_SLOTS) / 64 * 64;
    size_t bytes = fair < SPMD__RING_WIDE_BYTES ? fair : SPMD__RING_WIDE_BYTES;
    return bytes > SPMD__RING_BYTES ? bytes : 0;
}

/* A segment's name: "/spmd-rings-<pid>-<token>". The token is 128 random bits, and the name
 * reaches the job's other processes through MPI alone, so no one else can create it before its
 * owner does; the pid tells a later start-up whether the owner is gone (remove_leftovers). */
enum { TOKEN_BYTES = 16, NAME_BYTES = 64 };
/* What each process of a machine tells the others at start-up: its segment's name, then the
 * cores it counts (int32_t), so that all of them judge the machine crowded alike, then its
 * affinity (spmd__core_mask), so that each knows the cores the machine's processes may use. */
enum {
    CORES_AT = NAME_BYTES,
    MASK_AT = CORES_AT + (int)sizeof(int32_t),
    RECORD_BYTES = MASK_AT + SPMD__CORE_MASK_BYTES
};

static void segment_name(char *name, const unsigned char *token)
{
    int at = snprintf(name, NAME_BYTES, "/spmd-rings-%ld-", (long)getpid());
    for (int i = 0; i < TOKEN_BYTES; i++)
        at += snprintf(name + at, (size_t)(NAME_BYTES - at), "%02x", token[i]);
}

static int random_token(unsigned char *token)
{
    FILE *f = fopen("/dev/urandom", "rb");
    int ok = f && fread(token, 1, TOKEN_BYTES, f) == TOKEN_BYTES;
    if (f)
        fclose(f);
    return ok;
}

/* What is wrong with an open segment, or NULL when it is this user's alone and `bytes` long
 * (bytes 0: any size). Nothing that fails this is written to or mapped. */
static const char *segment_fault(int fd, size_t bytes)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return "it cannot be examined (fstat)";
    if (!S_ISREG(st.st_mode))
        return "it is not a regular file";
    if (st.st_uid != geteuid())
        return "another user owns it";
    if ((st.st_mode & 07777) != 0600)
        return "its mode is not 0600";
    if (bytes && (size_t)st.st_size != bytes)
        return "its size is not the expected one";
    return NULL;
}

/* Creates and maps this process's segment, its name into `name`; NULL when shared memory is not
 * available (the others then send everything to this process through MPI). A name that exists
 * is someone else's: never opened, another token tried. */
static char *create_own(char *name, size_t bytes, uint64_t job, int me)
{
    int fd = -1, err = 0;
    unsigned char token[TOKEN_BYTES];
    for (int tries = 0; fd < 0 && tries < 4 && random_token(token); tries++) {
        segment_name(name, token);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        err = fd < 0 ? errno : 0;
        if (fd < 0 && err != EEXIST)
            break;
    }
    if (fd < 0) {
        if (err && err != EEXIST) /* (a name taken four times over is someone else's doing) */
            SPMD_WARN("process %d: could not create its shared-memory segment in /dev/shm (%s): "
                      "its peers on this machine send it everything through MPI; check that "
                      "/dev/shm is mounted and writable, or set SPMD_SHM=0 to go without it",
                      me, strerror(err));
        return NULL;
    }
    char *p = NULL;
    const char *fault = fchmod(fd, 0600) == 0 ? segment_fault(fd, 0) : "fchmod failed";
    /* the pages now: tmpfs would allocate them at the first write, and a full /dev/shm would
     * then kill the writer (SIGBUS) mid-collective */
    int rc = 0;
    if (!fault)
        rc = ftruncate(fd, (off_t)bytes) == 0 ? 0 : errno;
    if (!fault && rc == 0) {
        do /* a signal may break it off: it starts over */
            rc = posix_fallocate(fd, 0, (off_t)bytes);
        while (rc == EINTR);
    }
    int reserved = !fault && rc == 0;
    if (!fault && rc != 0)
        SPMD_WARN("process %d: %s its %zu-byte shared-memory segment (%s): its peers on this "
                  "machine send it everything through MPI; %s",
                  me, rc == ENOSPC ? "no room in /dev/shm for" : "could not reserve in /dev/shm",
                  bytes, strerror(rc),
                  rc == ENOSPC ? "make room in /dev/shm (df /dev/shm) or set SPMD_SHM=0 to go "
                                 "without it"
                               : "set SPMD_SHM=0 to go without it");
    if (reserved && !(fault = segment_fault(fd, bytes))) {
        p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            p = NULL;
    }
    close(fd);
    if (fault)
        SPMD_WARN("the shared-memory segment /dev/shm%s that this process created is not its own "
                  "alone (%s): its peers send it everything through MPI",
                  name, fault);
    if (!p) {
        shm_unlink(name);
        return NULL;
    }
    segment_head head = {SEGMENT_MAGIC,          job, me, R.n, (int64_t)getpid(),
                         (uint64_t)(uintptr_t)p, 0,   0};
    memcpy(p, &head, sizeof head); /* the rest is zero: every slot empty, nobody attached */
    return p;
}

/* Maps another process's segment; NULL, with a warning where something else has its name, when it
 * has none or not the expected one (this process then writes to it through MPI). */
static char *open_peer(const char *name, size_t bytes, uint64_t job, int owner)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0) {
        SPMD_WARN("cannot open the shared-memory segment /dev/shm%s of process %d (%s): this "
                  "process sends it everything through MPI",
                  name, owner, strerror(errno));
        return NULL;
    }
    char *p = NULL;
    const char *fault = segment_fault(fd, bytes);
    if (!fault) {
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
            fault = "its header is not the job's";
        }
    }
    if (fault)
        SPMD_WARN("the shared-memory segment /dev/shm%s of process %d is not the job's (%s): "
                  "never written to, this process sends that process everything through MPI",
                  name, owner, fault);
    return p;
}

/* Removes this user's segments whose processes are gone: those of a start-up killed between
 * creating its segment and unlinking it. A live process's are kept (its pid answers). */
static void remove_leftovers(void)
{
    DIR *dir = opendir("/dev/shm");
    if (!dir)
        return;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        long pid = 0;
        char rest = 0;
        if (sscanf(e->d_name, "spmd-rings-%ld-%c", &pid, &rest) != 2 || pid <= 0)
            continue;
        struct stat st;
        if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            st.st_uid != geteuid() || !S_ISREG(st.st_mode) ||
            (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
            continue;
        char name[1 + sizeof e->d_name];
        snprintf(name, sizeof name, "/%s", e->d_name);
        shm_unlink(name);
    }
    closedir(dir);
}

/* Waits for requests until done, or fails the start-up at deadline (a process that stopped). */
static spmd_status wait_startup(MPI_Request *requests, int count, int64_t deadline,
                                const char *what)
{
    for (;;) {
        int done = 0;
        int rc = MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS)
            return spmd__mpi_failure(rc, what);
        if (done)
            return SPMD_OK;
        SPMD_REQUIRE(spmd__now_ns() < deadline, SPMD_ERR_TIMEOUT,
                     "setting up shared memory between the processes (%s) did not complete "
                     "within SPMD_INIT_TIMEOUT, although every process had arrived: a process "
                     "stopped during start-up",
                     what);
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
}

/* Every process of comm arrives here, or the start-up fails after timeout_ns. */
static spmd_status barrier(MPI_Comm comm, int64_t timeout_ns)
{
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = MPI_Ibarrier(comm, &request);
    if (rc != MPI_SUCCESS)
        return spmd__mpi_failure(rc, "MPI_Ibarrier of the start-up");
    return wait_startup(&request, 1, spmd__now_ns() + timeout_ns, "the start-up's MPI_Ibarrier");
}

/* Each process of the machine sends the others its segment's name ("": none) once the segment
 * exists; every process of the machine takes part, rings wanted or not. */
static spmd_status exchange_names(MPI_Comm comm, int me, int count, const uint64_t *hosts, int tag,
                                  const char *mine, char *theirs, int64_t timeout_ns)
{
    MPI_Request *requests = malloc(2 * (size_t)count * sizeof *requests);
    SPMD_REQUIRE(requests, SPMD_ERR_OUT_OF_MEMORY,
                 "out of memory for the start-up's exchange of shared-memory names");
    int posted = 0, rc = MPI_SUCCESS;
    for (int p = 0; p < count && rc == MPI_SUCCESS; p++) {
        if (p == me || hosts[p] != hosts[me])
            continue;
        rc = MPI_Irecv(theirs + (size_t)p * RECORD_BYTES, RECORD_BYTES, MPI_CHAR, p, tag, comm,
                       &requests[posted]);
        if (rc == MPI_SUCCESS)
            posted++;
        if (rc == MPI_SUCCESS)
            rc = MPI_Isend(mine, RECORD_BYTES, MPI_CHAR, p, tag, comm, &requests[posted]);
        if (rc == MPI_SUCCESS)
            posted++;
    }
    spmd_status st = rc == MPI_SUCCESS
                         ? wait_startup(requests, posted, spmd__now_ns() + timeout_ns,
                                        "the exchange of shared-memory names")
                         : spmd__mpi_failure(rc, "posting the exchange of shared-memory names");
    free(requests); /* a start-up that failed leaves its requests to MPI_Finalize */
    return st;
}

static spmd_status allocate_tables(int count)
{
    R.local_of = malloc((size_t)count * sizeof *R.local_of);
    R.peers = calloc((size_t)R.n, sizeof *R.peers);
    R.writes_here = calloc((size_t)R.n, sizeof *R.writes_here);
    R.next_seq = calloc((size_t)R.n, sizeof *R.next_seq);
    R.pid_of = calloc((size_t)R.n, sizeof *R.pid_of);
    R.reads_from = calloc((size_t)R.n, sizeof *R.reads_from);
    R.read_by = calloc((size_t)R.n, sizeof *R.read_by);
    SPMD_REQUIRE(R.local_of && R.peers && R.writes_here && R.next_seq && R.pid_of && R.reads_from &&
                     R.read_by,
                 SPMD_ERR_OUT_OF_MEMORY,
                 "out of memory for the shared-memory rings of %d processes", R.n);
    return SPMD_OK;
}

/* Reads `bytes` at `src` in process `pid`'s memory into dst: 0, else the errno. */
static int read_from(int64_t pid, void *dst, uint64_t src, size_t bytes)
{
#ifdef __linux__
    for (size_t done = 0; done < bytes;) {
        struct iovec local = {(char *)dst + done, bytes - done},
                     remote = {(void *)(uintptr_t)(src + done), bytes - done};
        ssize_t got = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got < 0 ? errno : EFAULT;
        done += (size_t)got;
    }
    return 0;
#else
    (void)pid;
    (void)dst;
    (void)src;
    (void)bytes;
    return ENOSYS;
#endif
}

/* What of a segment's head never changes: its name and owner. */
enum { HEAD_NAMED = offsetof(segment_head, bell) };

/* The owner's copy of the head of `segment` read from its memory into there[HEAD_NAMED]: 0,
 * else the errno. */
static int read_owner_head(const char *segment, char *there)
{
    const segment_head *h = (const segment_head *)segment;
    return h->pid > 0 ? read_from(h->pid, there, h->at, HEAD_NAMED) : ESRCH;
}

/* 1 when this process may read the memory of the owner of `segment` (a peer of this
 * machine) straight (Linux's cross-memory attach): a read of its segment's head in the owner's
 * memory gives back what this mapping holds. The kernel allows it only to the same user (ptrace
 * rules: not another user's processes, and where Yama forbids it, not at all). */
static int can_read_direct(const char *segment)
{
    char there[HEAD_NAMED];
    return read_owner_head(segment, there) == 0 && memcmp(there, segment, HEAD_NAMED) == 0;
}

int spmd__ring_process_gone(int process)
{
    int j = R.n && R.local_of ? R.local_of[process] : -1;
    if (j < 0 || j == R.here || !R.peers[j] || R.pid_of[j] <= 0)
        return 0;
    /* A read of its head in its memory, which worked at start-up: ESRCH once it has exited (a
     * zombie's memory is gone too); another head under a reused pid. EFAULT is a live process
     * that unmapped its segment (spmd_finalize): not gone. */
    if (R.reads_from[j]) {
        char there[HEAD_NAMED];
        int rc = read_owner_head(R.peers[j], there);
        return rc == ESRCH || (rc == 0 && memcmp(there, R.peers[j], HEAD_NAMED) != 0);
    }
    return kill((pid_t)R.pid_of[j], 0) != 0 && errno == ESRCH;
}

int spmd__ring_direct_to(int to)
{
    int j = R.n ? R.local_of[to] : -1;
    return j >= 0 && R.peers[j] && R.read_by[j];
}

int spmd__ring_direct_from(int from)
{
    int j = R.n ? R.local_of[from] : -1;
    return j >= 0 && R.reads_from[j];
}

/* A word's values for the note with `key`: waiting for its reader, read, or failed. */
static uint64_t word_value(uint64_t key, int state)
{
    uint64_t tag = key << 2 ? key << 2 : 4;
    return tag | (uint64_t)state;
}

int spmd__ring_word_claim(int reader, uint64_t key)
{
    _Atomic uint64_t *words = ring_in(R.own, R.local_of[reader])->words;
    for (int k = 0; k < SPMD__RING_WORDS; k++) {
        uint64_t free_word = 0;
        if (atomic_compare_exchange_strong(&words[k], &free_word,
                                           word_value(key, SPMD__WORD_WAITING)))
            return k;
    }
    return -1;
}

int spmd__ring_word_look(int reader, int word, uint64_t key)
{
    uint64_t v = atomic_load(&ring_in(R.own, R.local_of[reader])->words[word]);
    return v == word_value(key, SPMD__WORD_READ)     ? SPMD__WORD_READ
           : v == word_value(key, SPMD__WORD_FAILED) ? SPMD__WORD_FAILED
                                                     : SPMD__WORD_WAITING;
}

void spmd__ring_word_release(int reader, int word)
{
    /* one atomic exchange: a reader still to answer finds the word gone, and the buffer's
     * reuse comes after it on any processor */
    atomic_exchange(&ring_in(R.own, R.local_of[reader])->words[word], 0);
}

int spmd__ring_word_answer(int sender, int word, uint64_t key, int read)
{
    int j = R.local_of[sender];
    if (word < 0 || word >= SPMD__RING_WORDS || !R.peers[j])
        return 0;
    uint64_t waiting = word_value(key, SPMD__WORD_WAITING);
    int answered =
        atomic_compare_exchange_strong(&ring_in(R.peers[j], R.here)->words[word], &waiting,
                                       word_value(key, read ? SPMD__WORD_READ : SPMD__WORD_FAILED));
    ring_bell(R.peers[j]);
    return answered;
}

int spmd__ring_read_direct(int from, void *dst, uint64_t src, size_t bytes)
{
    return read_from(R.pid_of[R.local_of[from]], dst, src, bytes);
}

spmd_status spmd__rings_link(MPI_Comm comm, int me, int count, const uint64_t *hosts, uint64_t job,
                             int want, int tag, int64_t timeout_ns, int *machine_cores)
{
    spmd__rings_unlink();
    int n = 0, here = -1;
    for (int p = 0; p < count; p++)
        if (hosts[p] == hosts[me]) {
            if (p == me)
                here = n;
            n++;
        }
    /* Whether rings are wanted may differ between processes: the exchanges are everyone's. */
    int rings = (want & 1) && n > 1;
    char name[NAME_BYTES] = "", record[RECORD_BYTES] = "";
    char *theirs = n > 1 ? calloc((size_t)count, RECORD_BYTES) : NULL;
    /* the machine's cores, not this process's affinity (a launcher binds each process to a core
     * of its own); the fewest any process of the machine counts, so that every one of them
     * judges alike (collectives choose their protocol by it: comm.h) */
    int32_t cores = (int32_t)sysconf(_SC_NPROCESSORS_ONLN);
    if (rings && theirs) {
        R.n = n;
        R.here = here;
        if (allocate_tables(count) != SPMD_OK) { /* only this process goes without */
            spmd__rings_unlink();
            rings = 0;
        }
    } else {
        rings = 0;
    }
    if (rings) {
        for (int p = 0, k = 0; p < count; p++)
            R.local_of[p] = hosts[p] == hosts[me] ? k++ : -1;
        R.rings_at = rings_offset(n);
        R.wide_at = R.rings_at + (size_t)n * sizeof(ring);
        R.wide_bytes = wide_bytes_for(n);
        R.segment_bytes = R.wide_at + (size_t)n * WIDE_SLOTS * R.wide_bytes;
        remove_leftovers();
        R.own = create_own(name, R.segment_bytes, job, me);
        if (!R.own)
            name[0] = 0;
    }
    unsigned char cores_used[SPMD__CORE_MASK_BYTES];
    spmd__core_mask(cores_used);
    memcpy(record, name, NAME_BYTES);
    memcpy(record + CORES_AT, &cores, sizeof cores);
    memcpy(record + MASK_AT, cores_used, sizeof cores_used);
    spmd_status met = SPMD_OK;
    if (n > 1) /* every segment of the machine exists now, its name here */
        met = theirs
                  ? exchange_names(comm, me, count, hosts, tag, record, theirs, timeout_ns)
                  : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY,
                               "out of memory for the names of %d processes' shared memory", count);
    /* the fewest cores any process counts, a count that failed (sysconf's -1) left out by all
     * alike: each computes the same minimum over the same records */
    int32_t fewest = cores > 0 ? cores : 0;
    for (int p = 0; met == SPMD_OK && p < count; p++) {
        int32_t theirs_cores = 0;
        if (p == me || hosts[p] != hosts[me])
            continue;
        const unsigned char *record_of_p = (const unsigned char *)theirs + (size_t)p * RECORD_BYTES;
        memcpy(&theirs_cores, record_of_p + CORES_AT, sizeof cores);
        if (theirs_cores > 0 && (fewest == 0 || theirs_cores < fewest))
            fewest = theirs_cores;
        for (int i = 0; i < SPMD__CORE_MASK_BYTES; i++)
            cores_used[i] |= record_of_p[MASK_AT + i];
    }
    *machine_cores = spmd__mask_cores(cores_used);
    R.crowded = rings && fewest > 0 && n > fewest;
    R.all_linked = met == SPMD_OK && rings && R.own;
    for (int p = 0; R.all_linked && p < count; p++)
        R.all_linked = R.local_of[p] < 0 || p == me ||
                       strncmp(theirs + (size_t)p * RECORD_BYTES, "/spmd-rings-", 12) == 0;
    for (int p = 0; met == SPMD_OK && rings && p < count; p++) {
        int j = R.local_of[p];
        char *peer_name = theirs + (size_t)p * RECORD_BYTES;
        peer_name[NAME_BYTES - 1] = 0;
        if (j < 0 || p == me || strncmp(peer_name, "/spmd-rings-", 12) != 0)
            continue;
        R.peers[j] = open_peer(peer_name, R.segment_bytes, job, p);
        if (!R.peers[j])
            continue;
        /* its pid, where this process sees it (one pid namespace): else no pid check */
        int64_t pid = ((const segment_head *)R.peers[j])->pid;
        R.pid_of[j] = pid > 0 && kill((pid_t)pid, 0) == 0 ? pid : 0;
        R.reads_from[j] = (want & SPMD__RINGS_DIRECT) && can_read_direct(R.peers[j]);
        /* from now on this process writes to p through p's rings (and reads p's memory) */
        atomic_store_explicit(&attached_flags(R.peers[j])[here],
                              ATTACHED | (R.reads_from[j] ? ATTACHED_DIRECT : 0),
                              memory_order_release);
    }
    if (met == SPMD_OK)
        met = barrier(comm, timeout_ns); /* every process that will write here said so */
    if (R.own) {
        shm_unlink(name); /* the mappings live on; nothing is left behind if a process dies */
        for (int j = 0; j < R.n; j++) {
            uint32_t flags = atomic_load_explicit(&attached_flags(R.own)[j], memory_order_acquire);
            R.writes_here[j] = flags != 0;
            R.read_by[j] = (flags & ATTACHED_DIRECT) != 0;
        }
    }
    free(theirs);
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
    free(R.pid_of);
    free(R.reads_from);
    free(R.read_by);
    memset(&R, 0, sizeof R);
    for (int k = 0; k < FORGOTTEN; k++)
        atomic_store_explicit(&forgotten[k], 0, memory_order_relaxed);
}

int spmd__rings_crowded(void) { return R.crowded; }

size_t spmd__ring_wide_bytes(void) { return R.wide_bytes; }

int spmd__ring_to(int to)
{
    int j = R.n ? R.local_of[to] : -1;
    return j >= 0 && R.peers[j] != NULL;
}

int spmd__ring_on_linked_machine(int process) { return R.all_linked && R.local_of[process] >= 0; }

int spmd__ring_from(int from)
{
    if (!R.own)
        return 0;
    int j = R.local_of[from];
    return j >= 0 && R.writes_here[j];
}

size_t spmd__ring_capacity(void) { return R.wide_bytes ? R.wide_bytes : SPMD__RING_BYTES; }

/*
 * Whether a message into a wide slot goes around the caches (non-temporal stores). Where the
 * two processes share a cache, its lines pass through that cache; where they do not (cores of
 * other complexes or sockets; a virtual machine whose cores the host moved apart), each line
 * crosses between their caches twice (taken back from the reader's at each write, fetched from
 * the writer's at each read), and a message written around the caches and read from memory
 * costs a fraction of that (on the 2-core VM a cache line's round trip is 55 ns near and
 * 320-360 ns far; far, a ppermute of 64 KiB-1 MiB through the slots runs 2.5-5 times as fast
 * around the caches). Nothing in /sys tells the two apart (the VM says its cores share the
 * cache), so the writer times its writes and the reader its reads (claim to release), both
 * ways, and the writer chooses the way whose sum is less, a turn of BURST messages at a time,
 * going the other way for one turn in every EXPLORE_EVERY (the writer's time alone favours
 * going around, whose cost falls on the reader). A stream's chunks go around from 4 MiB
 * (ring_stream_mpi.c). From TIMED_BYTES on: shorter messages are latency, which the clock would
 * only blur. The ways move the same bytes: only the time differs.
 */
#define TIMED_BYTES 4096
#define EXPLORE_EVERY 64
#define BURST 8

/* The sum of a way's costs to write and to read; 0 until both were measured. */
static uint64_t way_cost(const way_costs *w, int way)
{
    uint64_t write = atomic_load_explicit(&w->write_ns[way - 1], memory_order_relaxed);
    uint64_t read = atomic_load_explicit(&w->read_ns[way - 1], memory_order_relaxed);
    return write && read ? write + read : 0;
}

/* The way of a message of `bytes` into a wide slot of ring r, and whether its cost is
 * measured (*timed): a chunk sent `always_around` around the caches, a short message through them.
 */
static int choose_way(ring *r, size_t bytes, int always_around, int *timed)
{
    *timed = 0;
    if (always_around || bytes < TIMED_BYTES)
        return always_around ? WAY_AROUND : WAY_CACHED;
    way_costs *w = &r->costs;
    uint32_t k = atomic_fetch_add_explicit(&w->messages, 1, memory_order_relaxed);
    /* a turn of BURST messages one way, chosen as it begins: its first ones find the slots as
     * the other way left them (in no cache, or in the reader's), so only its last is timed (the
     * clocks cost too) */
    *timed = k % BURST == BURST - 1;
    if (k % BURST == 0) {
        int way = spmd__pick_way(k / BURST, way_cost(w, WAY_CACHED), way_cost(w, WAY_AROUND), 1,
                                 EXPLORE_EVERY)
                      ? WAY_AROUND
                      : WAY_CACHED;
        atomic_store_explicit(&w->turn_way, (uint32_t)way, memory_order_relaxed);
    }
    return atomic_load_explicit(&w->turn_way, memory_order_relaxed) == WAY_AROUND ? WAY_AROUND
                                                                                  : WAY_CACHED;
}

/* A cost into its moving average (spmd__cost_average). */
static void note_cost(_Atomic uint32_t *avg, int64_t ns, size_t bytes)
{
    uint32_t old = atomic_load_explicit(avg, memory_order_relaxed);
    uint32_t now = spmd__cost_average(old, ns, bytes, 2, 2);
    if (now != old) /* a sample left out writes nothing over another thread's */
        atomic_store_explicit(avg, now, memory_order_relaxed);
}

int spmd__ring_pick_direct(int to)
{
    int j = R.n ? R.local_of[to] : -1;
    if (j < 0 || !R.peers[j] || !R.read_by[j])
        return 0;
    way_costs *w = &ring_in(R.peers[j], R.here)->costs;
    /* a turn of BURST messages one way, as choose_way's: its first finds the data as the other
     * way left it in the caches, and spmd__ring_note_cost leaves it out */
    uint32_t k = atomic_fetch_add_explicit(&w->contested, 1, memory_order_relaxed);
    if (k % BURST == 0) {
        uint32_t slots = atomic_load_explicit(&w->contested_ns[0], memory_order_relaxed);
        uint32_t direct = atomic_load_explicit(&w->contested_ns[1], memory_order_relaxed);
        atomic_store_explicit(&w->contested_turn,
                              (uint32_t)spmd__pick_way(k / BURST, slots, direct, 1, EXPLORE_EVERY),
                              memory_order_relaxed);
    }
    return atomic_load_explicit(&w->contested_turn, memory_order_relaxed) != 0;
}

void spmd__ring_note_cost(int from, int direct, int64_t ns, size_t bytes)
{
    int j = R.n ? R.local_of[from] : -1;
    if (j < 0)
        return;
    way_costs *w = &ring_in(R.own, j)->costs;
    uint32_t way = 1 + (direct != 0);
    if (atomic_exchange_explicit(&w->contested_last, way, memory_order_relaxed) == way)
        note_cost(&w->contested_ns[direct != 0], ns, bytes);
}

/* Writes a message into the ring to process `to`: into a slot where it fits, else into one of
 * the first `wide` wide slots; its bytes are head's and tail's, or what fill writes. A chunk
 * sent `always_around` goes around the caches; others as choose_way finds. */
static int send_into(int to, int wide, uint64_t wire, int tag, uint32_t stamp, uint64_t key,
                     const void *head, size_t head_bytes, const void *tail, size_t tail_bytes,
                     spmd__ring_fill_fn fill, void *fill_arg, int always_around)
{
    size_t bytes = head_bytes + tail_bytes;
    if (!R.n || bytes > spmd__ring_capacity())
        return 0;
    int j = R.local_of[to];
    if (j < 0 || !R.peers[j])
        return 0;
    ring *r = ring_in(R.peers[j], R.here);
    int end = R.wide_bytes ? SLOTS + wide : SLOTS;
    /* a chunk only in a wide slot: the others may hold messages whose readers are elsewhere */
    for (int k = bytes <= SPMD__RING_BYTES && !key ? 0 : SLOTS; k < end; k++) {
        slot_head *s = slot_of(r, k);
        uint32_t empty = SLOT_EMPTY;
        if (!atomic_compare_exchange_strong_explicit(&s->state, &empty, SLOT_WRITING,
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        s->bytes = (uint32_t)bytes;
        s->tag = tag;
        s->stamp = stamp;
        s->wire = wire;
        s->key = key;
        s->seq = atomic_fetch_add_explicit(&R.next_seq[j], 1, memory_order_relaxed);
        size_t capacity;
        char *data = slot_data(R.peers[j], R.here, k, &capacity);
        int timed = 0; /* a narrow slot's message is short: through the caches */
        int way = k >= SLOTS ? choose_way(r, bytes, always_around, &timed) : WAY_CACHED;
        int around = way == WAY_AROUND;
        int64_t start = timed ? spmd__now_ns() : 0;
        if (fill)
            fill(fill_arg, data, head_bytes, around);
        else
            spmd__copy_either(data, head, head_bytes, around);
        if (tail_bytes)
            memcpy(data + head_bytes, tail, tail_bytes);
        if (around) /* the release below does not order non-temporal stores */
            spmd__copy_streaming_fence();
        if (timed)
            note_cost(&r->costs.write_ns[way - 1], spmd__now_ns() - start, bytes);
        s->way = timed ? (uint32_t)way : 0;
        atomic_store_explicit(&s->state, SLOT_FULL, memory_order_release);
        ring_bell(R.peers[j]);
        return 1;
    }
    return 0;
}

int spmd__ring_send_parts(int to, uint64_t wire, int tag, uint32_t stamp, const void *head,
                          size_t head_bytes, const void *tail, size_t tail_bytes)
{
    return send_into(to, WIDE_FOR_MESSAGES, wire, tag, stamp, 0, head, head_bytes, tail, tail_bytes,
                     NULL, NULL, 0);
}

int spmd__ring_send(int to, uint64_t wire, int tag, uint32_t stamp, const void *data, size_t bytes)
{
    return spmd__ring_send_parts(to, wire, tag, stamp, data, bytes, NULL, 0);
}

int spmd__ring_send_chunk(int to, uint64_t wire, int tag, uint64_t key, const void *data,
                          size_t bytes, spmd__ring_fill_fn fill, void *fill_arg, int always_around)
{
    /* looked at before each chunk: a reader that gave up takes no more (one chunk may still
     * slip in between: its reader's next look empties it, see empty_leftovers) */
    return spmd__ring_listened(to, key) && send_into(to, WIDE_SLOTS, wire, tag, 0, key, data, bytes,
                                                     NULL, 0, fill, fill_arg, always_around);
}

int spmd__ring_send_marked(int to, uint64_t wire, int tag, uint64_t key, uint32_t mark,
                           const void *data, size_t bytes)
{
    return spmd__ring_listened(to, key) &&
           send_into(to, WIDE_SLOTS, wire, tag, mark, key, data, bytes, NULL, 0, NULL, NULL, 0);
}

int spmd__ring_listen(int from, uint64_t key)
{
    ring *r = ring_in(R.own, R.local_of[from]);
    for (int k = 0; k < LISTENERS; k++) {
        uint64_t none = 0;
        if (atomic_compare_exchange_strong_explicit(&r->listening[k], &none, key,
                                                    memory_order_release, memory_order_relaxed)) {
            ring_bell(segment_of(R.local_of[from])); /* its chunks may go out now */
            return k;
        }
    }
    return -1;
}

void spmd__ring_unlisten(int from, int listener)
{
    if (listener < 0)
        return;
    atomic_store_explicit(&ring_in(R.own, R.local_of[from])->listening[listener], 0,
                          memory_order_release);
    ring_bell(R.own); /* another thread of this process may wait (dozing) for a free listener */
}

static int listens(ring *r, uint64_t key)
{
    for (int k = 0; k < LISTENERS; k++)
        if (atomic_load_explicit(&r->listening[k], memory_order_acquire) == key)
            return 1;
    return 0;
}

int spmd__ring_listened(int to, uint64_t key)
{
    return listens(ring_in(R.peers[R.local_of[to]], R.here), key);
}

int spmd__ring_ready(int from, uint64_t wire, int tag, uint32_t stamp)
{
    ring *r = ring_in(R.own, R.local_of[from]);
    for (int k = 0; k < slots_in_ring(); k++) { /* a look only: spmd__ring_take claims it */
        slot_head *s = slot_of(r, k);
        if (atomic_load_explicit(&s->state, memory_order_acquire) == SLOT_FULL && s->wire == wire &&
            s->tag == tag && s->stamp == stamp && !s->key)
            return 1;
    }
    return 0;
}

static int is_forgotten(uint64_t wire)
{
    for (int k = 0; wire && k < FORGOTTEN; k++)
        if (atomic_load_explicit(&forgotten[k], memory_order_relaxed) == wire)
            return 1;
    return 0;
}

/* Empties the full slots of ring r (from the process `sender` of this machine) whose messages
 * are for a communicator gone; its writer, which may wait for a slot, hears of it. */
static void empty_forgotten(ring *r, int sender)
{
    int emptied = 0;
    for (int k = 0; k < slots_in_ring(); k++) {
        slot_head *s = slot_of(r, k);
        uint32_t full = SLOT_FULL;
        if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_FULL ||
            !is_forgotten(s->wire) ||
            !atomic_compare_exchange_strong_explicit(&s->state, &full, SLOT_TAKING,
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        int gone = is_forgotten(s->wire);
        atomic_store_explicit(&s->state, gone ? SLOT_EMPTY : SLOT_FULL, memory_order_release);
        emptied |= gone;
    }
    if (emptied)
        ring_bell(segment_of(sender));
}

/* 1 when the message in slot s (read once it is full) has the envelope (wire, tag) and is of
 * stream `key` (0: a message). */
static inline int envelope_is(const slot_head *s, uint64_t wire, int tag, uint64_t key)
{
    return s->wire == wire && s->tag == tag && s->key == key;
}

static inline int is_older(slot_head *s, uint64_t wire, int tag, uint64_t key, uint64_t seq)
{
    return atomic_load_explicit(&s->state, memory_order_acquire) == SLOT_FULL &&
           envelope_is(s, wire, tag, key) && s->seq < seq;
}

/* 1 when a message with the envelope (wire, tag) older than `seq` is in ring r. A look at the
 * slots one after another is no snapshot: a sender that fills a slot already looked at, then
 * another one further on, would have its second message taken first. The first is full once the
 * second is, so this second look, after the claim, finds it. */
static int older_waits(ring *r, uint64_t wire, int tag, uint64_t key, uint64_t seq)
{
    int older = 0, wides = wide_in_ring();
    for (int k = 0; k < SLOTS; k++)
        older |= is_older(&r->slots[k].h, wire, tag, key, seq);
    for (int k = 0; k < wides; k++)
        older |= is_older(&r->wide[k], wire, tag, key, seq);
    return older;
}

/* Empties the wide slots of ring r (from the process `sender` of this machine) that hold a
 * chunk of a stream this process no longer reads (it gave up on it: a sender that looked just
 * before may still have written one); the writer hears of it. */
static void empty_leftovers(ring *r, int sender)
{
    int emptied = 0;
    for (int k = SLOTS; k < slots_in_ring(); k++) {
        slot_head *s = slot_of(r, k);
        uint32_t full = SLOT_FULL;
        if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_FULL || !s->key ||
            listens(r, s->key) ||
            !atomic_compare_exchange_strong_explicit(&s->state, &full, SLOT_TAKING,
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        /* looked at again once claimed: the slot may have been taken and written since */
        int left = s->key && !listens(r, s->key);
        atomic_store_explicit(&s->state, left ? SLOT_EMPTY : SLOT_FULL, memory_order_release);
        emptied |= left;
    }
    if (emptied)
        ring_bell(segment_of(sender));
}

/* What a look at a ring found: its oldest message with the envelope sought, and whether others
 * lie there that may be left over (a gone communicator's, a stream's given up). */
typedef struct found {
    slot_head *best;
    int best_k;
    uint64_t best_seq;
    int stale, stray;
} found;

static inline void look_at(found *f, slot_head *s, int k, uint64_t wire, int tag, uint64_t key)
{
    if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_FULL)
        return;
    if (envelope_is(s, wire, tag, key) && (!f->best || s->seq < f->best_seq)) {
        f->best = s;
        f->best_k = k;
        f->best_seq = s->seq;
    } else if (s->wire != wire) {
        f->stale = 1; /* another communicator's: maybe one gone */
    }
    f->stray |= s->key && s->key != key; /* maybe a stream's given up */
}

/* Claims the oldest message (key 0) or chunk of stream `key` from `from` with (wire, tag). */
static int claim(int from, uint64_t wire, int tag, uint64_t key, spmd__ring_message *out)
{
    int sender = R.local_of[from];
    ring *r = ring_in(R.own, sender);
    int wides = wide_in_ring();
    for (;;) {
        found f = {NULL, -1, 0, 0, 0};
        for (int k = 0; k < SLOTS; k++) /* every poll: two plain walks */
            look_at(&f, &r->slots[k].h, k, wire, tag, key);
        for (int k = 0; k < wides; k++)
            look_at(&f, &r->wide[k], SLOTS + k, wire, tag, key);
        slot_head *best = f.best;
        int best_k = f.best_k;
        uint64_t best_seq = f.best_seq;
        if (!best) {
            if (f.stale) /* the slots a gone communicator's late messages hold */
                empty_forgotten(r, sender);
            if (f.stray)
                empty_leftovers(r, sender);
            return 0;
        }
        /* Claimed before it is read: another thread of this process may have taken what this
         * one looked at, and the sender written another message there since. */
        uint32_t full = SLOT_FULL;
        if (!atomic_compare_exchange_strong_explicit(&best->state, &full, SLOT_TAKING,
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        if (!envelope_is(best, wire, tag, key) || best->seq != best_seq ||
            older_waits(r, wire, tag, key, best_seq)) {
            /* not ours: full again, for this process's thread whose it is (it may doze) */
            atomic_store_explicit(&best->state, SLOT_FULL, memory_order_release);
            ring_bell(R.own);
            continue;
        }
        size_t capacity;
        out->data = slot_data(R.own, sender, best_k, &capacity);
        out->bytes = best->bytes < capacity ? best->bytes : capacity; /* never beyond the slot */
        out->slot = best;
        out->sender = sender;
        out->mark = best->stamp;
        out->way = best->way == WAY_CACHED || best->way == WAY_AROUND ? (int)best->way : 0;
        out->claimed_ns = out->way ? spmd__now_ns() : 0;
        return 1;
    }
}

int spmd__ring_claim(int from, uint64_t wire, int tag, spmd__ring_message *out)
{
    return claim(from, wire, tag, 0, out);
}

int spmd__ring_claim_chunk(int from, uint64_t wire, int tag, uint64_t key, spmd__ring_message *out)
{
    return claim(from, wire, tag, key, out);
}

void spmd__ring_release(spmd__ring_message *m)
{
    if (m->way) /* what reading it cost, for its writer's next choice */
        note_cost(&ring_in(R.own, m->sender)->costs.read_ns[m->way - 1],
                  spmd__now_ns() - m->claimed_ns, m->bytes);
    atomic_store_explicit(&((slot_head *)m->slot)->state, SLOT_EMPTY, memory_order_release);
    m->slot = NULL;
    ring_bell(segment_of(m->sender)); /* its writer may wait for the slot */
}

long spmd__ring_take(int from, uint64_t wire, int tag, void *buf, size_t cap)
{
    spmd__ring_message m;
    if (!spmd__ring_claim(from, wire, tag, &m))
        return -1;
    size_t bytes = m.bytes;
    memcpy(buf, m.data, bytes < cap ? bytes : cap);
    spmd__ring_release(&m);
    return bytes > cap ? (long)cap + 1 : (long)bytes;
}

void spmd__ring_forget(uint64_t wire)
{
    uint32_t k = atomic_fetch_add_explicit(&forgotten_next, 1, memory_order_relaxed);
    atomic_store_explicit(&forgotten[k % FORGOTTEN], wire, memory_order_relaxed);
    for (int j = 0; R.own && j < R.n; j++)
        empty_forgotten(ring_in(R.own, j), j);
}

void spmd__ring_give_up(int to, uint64_t token)
{
    int j = R.n ? R.local_of[to] : -1;
    if (j < 0 || !R.peers[j])
        return;
    ring *r = ring_in(R.peers[j], R.here);
    uint32_t k = atomic_fetch_add_explicit(&r->gave_up_next, 1, memory_order_relaxed);
    atomic_store_explicit(&r->gave_up[k % GAVE_UP], token, memory_order_release);
    ring_bell(R.peers[j]);
}

int spmd__ring_gave_up(int from, uint64_t token)
{
    ring *r = ring_in(R.own, R.local_of[from]);
    for (int k = 0; k < GAVE_UP; k++)
        if (atomic_load_explicit(&r->gave_up[k], memory_order_acquire) == token)
            return 1;
    return 0;
}
