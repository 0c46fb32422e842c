/* The collective trace's writer: a ring of records in a file mapped into memory (trace.h). */
#include "runtime/calls/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "runtime/calls/threads.h"
#include "runtime/base/check.h"
#include "runtime/base/env.h"
#include "runtime/devices/event.h"
#include "runtime/base/session.h"

_Static_assert(sizeof(spmd_trace_record) == 256, "a record is 256 bytes in the file");
_Static_assert(sizeof(spmd_trace_header) <= SPMD_TRACE_HEADER_BYTES, "the header fits its page");

#define MIN_RECORDS 64
#define MAX_RECORDS (1L << 24)
#define CALL_DEPTH 8

atomic_int spmd__trace_flag;

/* The running trace; written only with the call lock held and the flag down. */
static struct {
    spmd_trace_header *head;
    spmd_trace_record *records;
    size_t bytes;
    int64_t start_ns; /* spmd__now_ns at the start: records count from it */
    int digests;
    uint64_t capacity; /* this process's own copy: the file's header is not trusted */
} ring;

/* This thread's open calls (calls nest on one thread: pmap's shard_map). */
static _Thread_local uint64_t open_calls[CALL_DEPTH];
static _Thread_local int call_depth;

/* The header, for the signal handler and the exit hook (NULL when none runs). */
static spmd_trace_header *_Atomic live_head;
static struct sigaction previous[NSIG];
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
                                    SIGTERM, SIGINT, SIGHUP, SIGQUIT};

static int64_t since_start(void) { return spmd__now_ns() - ring.start_ns; }

int spmd__trace_digests(void) { return ring.digests; }

static void copy_text(char *dst, size_t size, const char *src)
{
    size_t n = src ? strnlen(src, size - 1) : 0;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

uint64_t spmd__trace_begin(int kind, unsigned long call, unsigned long mesh_call, int device,
                           unsigned seq, uint64_t fingerprint, uint64_t digest_in, const char *what)
{
    if (!spmd__tracing())
        return 0;
    uint64_t number = __atomic_fetch_add(&ring.head->next, 1, __ATOMIC_RELAXED);
    spmd_trace_record *r = &ring.records[number % ring.capacity];
    __atomic_store_n(&r->stamp, 0, __ATOMIC_RELAXED);
    r->kind = (uint32_t)kind;
    r->status = SPMD_TRACE_OPEN;
    r->call = call;
    r->mesh_call = mesh_call;
    r->start_ns = since_start();
    r->end_ns = 0;
    r->fingerprint = fingerprint;
    r->digest_in = digest_in;
    r->digest_out = 0;
    r->device = device;
    r->seq = seq;
    r->thread = spmd__thread_number();
    r->nested = 0;
    copy_text(r->what, sizeof r->what, what);
    __atomic_store_n(&r->stamp, number + 1, __ATOMIC_RELEASE);
    return number + 1;
}

/* The record of `handle`, unless the ring has gone round since. */
static spmd_trace_record *record_of(uint64_t handle)
{
    if (!handle || !spmd__tracing())
        return NULL;
    spmd_trace_record *r = &ring.records[(handle - 1) % ring.capacity];
    return __atomic_load_n(&r->stamp, __ATOMIC_ACQUIRE) == handle ? r : NULL;
}

void spmd__trace_end(uint64_t handle, spmd_status st, uint64_t digest_out)
{
    spmd_trace_record *r = record_of(handle);
    if (!r)
        return;
    r->digest_out = digest_out;
    r->end_ns = since_start();
    __atomic_store_n(&r->status, (int32_t)st, __ATOMIC_RELEASE);
}

void spmd__trace_call_enter(const char *fn, unsigned long number, int nested)
{
    uint64_t handle = spmd__trace_begin(SPMD_TRACE_CALL, number, 0, -1, 0, 0, 0, fn);
    spmd_trace_record *r = record_of(handle);
    if (r)
        r->nested = nested;
    if (call_depth < CALL_DEPTH)
        open_calls[call_depth] = handle;
    call_depth++;
}

void spmd__trace_call_describe(unsigned long mesh_call, uint64_t fingerprint, const char *what)
{
    if (call_depth < 1 || call_depth > CALL_DEPTH)
        return;
    spmd_trace_record *r = record_of(open_calls[call_depth - 1]);
    if (!r)
        return;
    r->mesh_call = mesh_call;
    r->fingerprint = fingerprint;
    copy_text(r->what, sizeof r->what, what);
}

void spmd__trace_call_exit(spmd_status st)
{
    if (call_depth < 1)
        return;
    call_depth--;
    if (call_depth >= CALL_DEPTH)
        return;
    uint64_t handle = open_calls[call_depth];
    if (st != SPMD_OK && record_of(handle))
        copy_text(ring.head->last_error, sizeof ring.head->last_error, spmd_last_error());
    spmd__trace_end(handle, st, 0);
}

void spmd__trace_alive(void)
{
    if (spmd__tracing())
        __atomic_store_n(&ring.head->alive_ns, since_start(), __ATOMIC_RELAXED);
}

/* ---- how the trace ends ---- */

static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* async-signal-safe: stores only */
static void mark_end(spmd_trace_header *h, int state, int sig)
{
    if (!h || __atomic_load_n(&h->state, __ATOMIC_RELAXED) != SPMD_TRACE_RUNNING)
        return;
    h->signal = sig;
    h->end_ns = realtime_ns() - h->start_realtime_ns;
    __atomic_store_n(&h->state, state, __ATOMIC_RELEASE);
}

/* A fatal signal: the header says so (the records are in the file already), then the signal
 * does what it did before. When a handler of the program's own returns from a request to stop
 * (SIGTERM, SIGINT, ...), the program goes on: the mark is taken back. */
static void on_signal(int sig, siginfo_t *info, void *context)
{
    const struct sigaction *old = &previous[sig];
    spmd_trace_header *h = atomic_load(&live_head);
    if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler == SIG_IGN)
        return;
    mark_end(h, SPMD_TRACE_SIGNALLED, sig);
    if (old->sa_flags & SA_SIGINFO ? old->sa_sigaction != NULL : old->sa_handler != SIG_DFL) {
        if (old->sa_flags & SA_SIGINFO)
            old->sa_sigaction(sig, info, context);
        else
            old->sa_handler(sig);
        /* a fault or abort() dies after the handler returns; a request to stop may not */
        int faults =
            sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT;
        if (h && h->signal == sig && !faults)
            __atomic_store_n(&h->state, SPMD_TRACE_RUNNING, __ATOMIC_RELEASE);
        return;
    }
    sigaction(sig, old, NULL);
    raise(sig);
}

static void on_exit_hook(void) { mark_end(atomic_load(&live_head), SPMD_TRACE_EXITED, 0); }

/* A forked child is not the traced process: it neither writes the ring nor marks its end. */
static void in_child(void)
{
    atomic_store(&spmd__trace_flag, 0);
    atomic_store(&live_head, NULL);
}

static void install_hooks(void)
{
    atexit(on_exit_hook);
    pthread_atfork(NULL, NULL, in_child);
    for (size_t k = 0; k < sizeof fatal_signals / sizeof fatal_signals[0]; k++) {
        int sig = fatal_signals[k];
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sig, NULL, &previous[sig]) == 0 && previous[sig].sa_handler != SIG_IGN)
            sigaction(sig, &sa, NULL);
    }
}

/* ---- start and stop ---- */

static spmd_status options_of(const spmd_trace_options *options, long *records, int *digests)
{
    const char *f = "spmd_trace_start";
    spmd_trace_options o = SPMD_TRACE_OPTIONS_INIT;
    if (options) {
        SPMD_REQUIRE(options->version == SPMD_TRACE_OPTIONS_VERSION, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: options.version is %u; initialize options with "
                     "SPMD_TRACE_OPTIONS_INIT",
                     f, options->version);
        o = *options;
    }
    *records = SPMD_TRACE_DEFAULT_RECORDS;
    int set = 0;
    if (o.records == 0)
        SPMD_CHECK(spmd__env_int("SPMD_TRACE_RECORDS", MIN_RECORDS, MAX_RECORDS, records, &set));
    else {
        SPMD_REQUIRE(o.records >= MIN_RECORDS && o.records <= MAX_RECORDS,
                     SPMD_ERR_INVALID_ARGUMENT,
                     "%s: options.records is %ld; the ring holds %d..%ld records (0: "
                     "$SPMD_TRACE_RECORDS, else %d)",
                     f, o.records, MIN_RECORDS, MAX_RECORDS, SPMD_TRACE_DEFAULT_RECORDS);
        *records = o.records;
    }
    long d = 0;
    if (o.digests == SPMD_AUTO)
        SPMD_CHECK(spmd__env_int("SPMD_TRACE_DIGESTS", 0, 1, &d, &set));
    else {
        SPMD_REQUIRE(o.digests == 0 || o.digests == 1, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: options.digests is %d; use 1 (digests of the blocks), 0 (none) or "
                     "SPMD_AUTO ($SPMD_TRACE_DIGESTS)",
                     f, o.digests);
        d = o.digests;
    }
    *digests = (int)d;
    return SPMD_OK;
}

/* Opens DIR/trace.<process>.spmd at its full size, mapped. */
static spmd_status open_file(const char *dir, const spmd__runtime *rt, long records)
{
    const char *f = "spmd_trace_start";
    SPMD_REQUIRE(mkdir(dir, 0777) == 0 || errno == EEXIST, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: cannot make the trace directory '%s' (%s); name a directory whose parent "
                 "exists and is writable",
                 f, dir, strerror(errno));
    struct stat st;
    SPMD_REQUIRE(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: '%s' is not a directory; SPMD_TRACE names the directory that receives "
                 "one file per process",
                 f, dir);
    char path[PATH_MAX];
    SPMD_REQUIRE(
        snprintf(path, sizeof path, "%s/trace.%d.spmd", dir, rt->process_index) < (int)sizeof path,
        SPMD_ERR_INVALID_ARGUMENT, "%s: the directory name '%.64s...' is too long", f, dir);
    size_t bytes = SPMD_TRACE_HEADER_BYTES + (size_t)records * sizeof(spmd_trace_record);
    /* a new file, never the old one cut short: a process still writing that one (a rerun
     * while the last job hangs) keeps its own */
    unlink(path);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    SPMD_REQUIRE(fd >= 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: cannot write the trace file '%s' (%s); check the directory's permissions", f,
                 path, strerror(errno));
    int err = posix_fallocate(fd, 0, (off_t)bytes); /* no SIGBUS on a full disk later */
    void *map = err ? MAP_FAILED : mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!err && map == MAP_FAILED)
        err = errno;
    close(fd);
    if (err) {
        unlink(path);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY,
                          "%s: cannot make the trace file '%s' of %zu bytes (%s); free space "
                          "there, or trace fewer records (SPMD_TRACE_RECORDS)",
                          f, path, bytes, strerror(err));
    }
    ring.head = map;
    ring.records = (spmd_trace_record *)((char *)map + SPMD_TRACE_HEADER_BYTES);
    ring.bytes = bytes;
    return SPMD_OK;
}

static void fill_header(spmd_trace_header *h, const spmd__runtime *rt, long records, int digests)
{
    memcpy(h->magic, SPMD_TRACE_MAGIC, sizeof h->magic);
    h->format_version = SPMD_TRACE_FORMAT_VERSION;
    h->header_bytes = SPMD_TRACE_HEADER_BYTES;
    h->record_bytes = sizeof(spmd_trace_record);
    h->capacity = (uint32_t)records;
    h->process = rt->process_index;
    h->num_processes = rt->process_count;
    h->num_local_devices = rt->num_local;
    h->first_local_device = rt->first_local;
    h->pid = (int32_t)getpid();
    h->digests = digests;
    h->state = SPMD_TRACE_RUNNING;
    h->start_realtime_ns = realtime_ns();
    if (gethostname(h->host, sizeof h->host) != 0)
        h->host[0] = '\0';
    h->host[sizeof h->host - 1] = '\0';
    copy_text(h->program, sizeof h->program, program_invocation_name);
}

void spmd__trace_close(int state)
{
    atomic_store(&spmd__trace_flag, 0);
    spmd_trace_header *h = atomic_exchange(&live_head, NULL);
    mark_end(h, state, 0);
    msync(ring.head, ring.bytes, MS_SYNC);
    munmap(ring.head, ring.bytes);
    memset(&ring, 0, sizeof ring);
}

spmd_status spmd__trace_start_locked(const char *dir, const spmd_trace_options *options)
{
    const char *f = "spmd_trace_start";
    SPMD_REQUIRE_NOT_NULL(dir, f);
    SPMD_REQUIRE(dir[0] != '\0', SPMD_ERR_INVALID_ARGUMENT,
                 "%s: the directory name is empty; name the directory for the trace files", f);
    SPMD_REQUIRE(!spmd__tracing(), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: a trace is already running; call spmd_trace_stop first", f);
    const spmd__runtime *rt = spmd__runtime_get(f);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    long records = 0;
    int digests = 0;
    SPMD_CHECK(options_of(options, &records, &digests));
    /* every device's open record outlives the others' turns of the ring */
    long least = 4L * (rt->num_local + 1);
    records = records < least ? least : records;
    SPMD_CHECK(open_file(dir, rt, records));
    fill_header(ring.head, rt, records, digests);
    ring.start_ns = spmd__now_ns();
    ring.digests = digests;
    ring.capacity = (uint64_t)records;
    pthread_once(&hooks_once, install_hooks);
    atomic_store(&live_head, ring.head);
    atomic_store(&spmd__trace_flag, 1);
    return SPMD_OK;
}

void spmd__trace_finalize(void)
{
    if (!spmd__tracing())
        return;
    /* spmd_finalize, and any call around it, end well before the file closes */
    for (int k = 0; k < call_depth && k < CALL_DEPTH; k++)
        spmd__trace_end(open_calls[k], SPMD_OK, 0);
    call_depth = 0; /* its exit finds the trace off and pops nothing */
    spmd__trace_close(SPMD_TRACE_STOPPED);
}

int spmd_trace_active(void) { return spmd__tracing(); }
