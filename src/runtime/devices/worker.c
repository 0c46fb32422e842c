#include "runtime/devices/worker.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/check.h"
#include "runtime/devices/event.h"

/* Hot shared words sit 128 bytes apart: the adjacent-line prefetcher couples 64-byte lines in
 * pairs, so 64-byte padding still left the dispatcher and the workers stalling each other. */
#define SPAN 128

/* One fork-join in flight at a time (dispatch_lock), so a single completion event serves all. */
typedef struct batch {
    atomic_int remaining;
    atomic_int failed_ordinal; /* lowest failing ordinal, or INT_MAX-like sentinel */
    pthread_mutex_t error_lock;
    spmd_status status;
    char message[SPMD__MESSAGE_CAPACITY];
} batch;

typedef struct worker {
    _Alignas(SPAN) pthread_t thread; /* apart: the dispatcher writes every `job` */
    int ordinal;
    int hw;
    spmd__device_task task;
    void *arg;
    const char *what;
    batch *_Atomic job;
    const void *_Atomic context; /* the task's context while it runs (spmd__worker_set_context) */
} worker;

static worker *workers;
static int worker_count;
static const spmd__backend *worker_backend;
static int first_device_id; /* global id of local ordinal 0 (ids are process-major) */
static pthread_mutex_t dispatch_lock = PTHREAD_MUTEX_INITIALIZER;
/* One wake-up for all workers: a single signal instead of one contended write per worker. */
static _Alignas(SPAN) spmd__event dispatch_wake;
static _Alignas(SPAN) atomic_int stopping;
static _Alignas(SPAN) spmd__event batch_done;
static _Thread_local int current_ordinal = -1;
static _Thread_local const char *current_what; /* the call whose task this thread runs */
static _Thread_local const char *entry_name;   /* set by an outer public call on this thread */
static _Thread_local const void *current_context;

#define NO_FAILURE 0x7fffffff

int spmd__worker_current(void) { return current_ordinal; }

spmd_status spmd__worker_refuse_nested(const char *fn)
{
    if (current_ordinal < 0)
        return SPMD_OK;
    const char *outer = current_what ? current_what : "another call";
    return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                      "%s: called from inside the fn of %s (on device %d): the devices are busy "
                      "with that call, so what runs on them or between processes cannot be nested "
                      "in it. Call it before or after %s; inside fn use the collectives "
                      "(spmd_psum, spmd_all_gather ...) and the block ops",
                      fn, outer, first_device_id + current_ordinal, outer);
}

const char *spmd__worker_entry(const char *name)
{
    const char *previous = entry_name;
    entry_name = name;
    return previous;
}

const char *spmd__worker_entry_or(const char *fallback)
{
    return entry_name ? entry_name : fallback;
}

void spmd__worker_set_context(const void *context)
{
    current_context = context;
    if (current_ordinal >= 0 && workers)
        atomic_store_explicit(&workers[current_ordinal].context, context, memory_order_release);
}

int spmd__worker_context_is_live(const void *context)
{
    if (!context)
        return 0;
    if (context == current_context)
        return 1;
    /* another thread (one fn started, say): any device's context of the running call */
    for (int i = 0; i < worker_count; i++)
        if (atomic_load_explicit(&workers[i].context, memory_order_acquire) == context)
            return 1;
    return 0;
}

/* Keeps the message of the lowest failing ordinal, so the reported error is deterministic. */
static void record_failure(batch *b, int ordinal, spmd_status st)
{
    pthread_mutex_lock(&b->error_lock);
    if (ordinal < atomic_load(&b->failed_ordinal)) {
        atomic_store(&b->failed_ordinal, ordinal);
        b->status = st;
        snprintf(b->message, sizeof b->message, "device %d: %s", first_device_id + ordinal,
                 spmd_last_error());
    }
    pthread_mutex_unlock(&b->error_lock);
}

static void run_task(batch *b, spmd__device_task task, void *arg, int ordinal)
{
    spmd_status st = task(ordinal, arg);
    if (st != SPMD_OK)
        record_failure(b, ordinal, st);
}

static void *worker_main(void *p)
{
    worker *w = p;
    current_ordinal = w->ordinal;
    for (;;) {
        unsigned seen = spmd__event_seq(&dispatch_wake);
        /* Only the dispatcher sets the slot, and not again before this batch completes. */
        batch *b = atomic_load_explicit(&w->job, memory_order_acquire);
        if (b) {
            atomic_store_explicit(&w->job, NULL, memory_order_relaxed);
            /* task and arg sit beside the job pointer: one line to fetch, not two */
            current_what = w->what;
            run_task(b, w->task, w->arg, w->ordinal);
            /* The batch lives on the caller's stack: this decrement is the last touch. */
            if (atomic_fetch_sub(&b->remaining, 1) == 1)
                spmd__event_signal(&batch_done);
            continue;
        }
        if (atomic_load(&stopping))
            return NULL;
        spmd__event_wait(&dispatch_wake, seen);
    }
}

static spmd_status bind_task(int ordinal, void *arg)
{
    (void)arg;
    return worker_backend->bind_thread(workers[ordinal].hw);
}

spmd_status spmd__workers_start(int count, int first_id, const spmd__backend *backend,
                                const int *hw)
{
    first_device_id = first_id;
    spmd__event_init(&batch_done);
    spmd__event_init(&dispatch_wake);
    atomic_store(&stopping, 0);
    workers = aligned_alloc(_Alignof(worker), (size_t)count * sizeof *workers);
    if (!workers)
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "could not allocate %d device workers", count);
    memset(workers, 0, (size_t)count * sizeof *workers);
    worker_backend = backend;
    for (int i = 0; i < count; i++) {
        worker *w = &workers[i];
        w->ordinal = i;
        w->hw = hw[i];
        atomic_init(&w->job, NULL);
        atomic_init(&w->context, NULL);
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            spmd__workers_stop();
            return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY,
                              "could not start the worker thread of local device %d: %s", i,
                              strerror(rc));
        }
        worker_count = i + 1;
        char name[32];
        snprintf(name, sizeof name, "spmd-dev%d", i);
        name[15] = '\0'; /* the kernel's limit */
        pthread_setname_np(w->thread, name);
    }
    spmd_status st = spmd__run_on_devices("spmd_init", count, NULL, bind_task, NULL);
    if (st != SPMD_OK)
        spmd__workers_stop();
    return st;
}

void spmd__workers_stop(void)
{
    atomic_store(&stopping, 1);
    spmd__event_signal(&dispatch_wake);
    for (int i = 0; i < worker_count; i++)
        pthread_join(workers[i].thread, NULL);
    free(workers);
    workers = NULL;
    worker_count = 0;
    spmd__event_destroy(&batch_done);
    spmd__event_destroy(&dispatch_wake);
}

spmd_status spmd__run_on_devices(const char *what, int count, const int *ordinals,
                                 spmd__device_task task, void *arg)
{
    return spmd__run_on_devices_beside(what, count, ordinals, task, arg, NULL, NULL);
}

spmd_status spmd__run_on_devices_beside(const char *what, int count, const int *ordinals,
                                        spmd__device_task task, void *arg,
                                        spmd_status (*beside)(void *), void *beside_arg)
{
    /* From inside a device's task the other workers may be busy with the outer batch: waiting
     * for them could deadlock, and running here would share the outer call's state. */
    SPMD_CHECK(spmd__worker_refuse_nested(what));
    if (count == 0)
        return beside ? beside(beside_arg) : SPMD_OK;
    spmd_status beside_status = SPMD_OK;
    batch b; /* its message is written before it is read */
    b.status = SPMD_OK;
    atomic_init(&b.remaining, count);
    atomic_init(&b.failed_ordinal, NO_FAILURE);
    pthread_mutex_init(&b.error_lock, NULL);

    if (count == 1 && !beside && worker_backend->platform == SPMD_PLATFORM_CPU) {
        /* One CPU device: its task runs on this thread, as that device's, without the two
         * hand-offs between threads (a CPU device's worker holds no state of its own). */
        pthread_mutex_lock(&dispatch_lock);
        current_ordinal = ordinals ? ordinals[0] : 0;
        current_what = what;
        run_task(&b, task, arg, current_ordinal);
        current_ordinal = -1;
        current_what = NULL;
        pthread_mutex_unlock(&dispatch_lock);
    } else {
        pthread_mutex_lock(&dispatch_lock);
        for (int i = 0; i < count; i++) {
            worker *w = &workers[ordinals ? ordinals[i] : i];
            w->task = task;
            w->arg = arg;
            w->what = what;
            atomic_store_explicit(&w->job, &b, memory_order_release);
        }
        spmd__event_signal(&dispatch_wake);
        if (beside)
            beside_status = beside(beside_arg);
        for (;;) {
            unsigned seen = spmd__event_seq(&batch_done);
            if (atomic_load(&b.remaining) == 0)
                break;
            spmd__event_wait(&batch_done, seen);
        }
        pthread_mutex_unlock(&dispatch_lock);
    }
    pthread_mutex_destroy(&b.error_lock);
    if (atomic_load(&b.failed_ordinal) == NO_FAILURE)
        return beside_status;
    spmd__error_set_raw(b.message);
    return b.status;
}
