/* The order of calls in a process, and what each process is doing (calls.h). */
#include "runtime/calls/calls.h"
#include "runtime/calls/trace.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd/runtime.h>

#include "runtime/base/check.h"
#include "runtime/devices/event.h"
#include "runtime/base/log.h"
#include "runtime/devices/worker.h"

/* ---- the transport of the notes ---- */

static const spmd__notes_transport *_Atomic transport;

void spmd__calls_set_transport(const spmd__notes_transport *t) { atomic_store(&transport, t); }

void spmd__calls_poll_notes(void)
{
    const spmd__notes_transport *t = atomic_load_explicit(&transport, memory_order_acquire);
    if (t)
        t->poll();
}

/* ---- the call lock: a ticket lock, first come first served ---- */

static pthread_mutex_t lock_state = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lock_turn = PTHREAD_COND_INITIALIZER;
static unsigned long next_ticket, serving;
static int owner_thread; /* thread number of the holder; 0: free */
static int owner_depth;
static unsigned long calls_made;
static atomic_ulong current_number;
static atomic_int guard_thread; /* thread number holding the thread guard; 0: none */
static char owner_text[64];     /* the holder's thread, for notes (under state) */

/* What the current call is, its waits and its verdict (state). */
static pthread_mutex_t state = PTHREAD_MUTEX_INITIALIZER;

static spmd_status spmd_thread_guard_checked(int enable)
{
    int me = spmd__thread_number(), held = atomic_load(&guard_thread);
    if (enable) {
        SPMD_REQUIRE(held == 0 || held == me, SPMD_ERR_INVALID_ARGUMENT,
                     "spmd_thread_guard: thread %d already holds the thread guard; release it "
                     "there (spmd_thread_guard(0)) first",
                     held);
        atomic_store(&guard_thread, me);
        return SPMD_OK;
    }
    SPMD_REQUIRE(held == me || held == 0, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_thread_guard: thread %d holds the thread guard, not this thread (%d); "
                 "release it from the thread that set it",
                 held, me);
    atomic_store(&guard_thread, 0);
    return SPMD_OK;
}

spmd_status spmd_thread_guard(int enable) { return spmd_thread_guard_checked(enable); }

static void clear_call_state(void);
static int clear_call_state_unless_pending(void);
static int owner_text_thread; /* owner_text is of this thread, at this names_version */
static unsigned owner_text_version;

static spmd_status enter(const char *fn, spmd__call_entry *e, int numbered)
{
    e->nested = 0;
    e->unnumbered = !numbered;
    SPMD_CHECK(spmd__worker_refuse_nested(fn));
    int me = spmd__thread_number(), guard = atomic_load(&guard_thread);
    if (guard && guard != me) {
        char text[64];
        spmd__thread_text(text, sizeof text);
        return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                          "%s: called from %s while thread %d holds the thread guard "
                          "(spmd_thread_guard): calls from several threads may reach the "
                          "processes in different orders; make the call from thread %d, or "
                          "release the guard there first",
                          fn, text, guard, guard);
    }
    pthread_mutex_lock(&lock_state);
    if (owner_thread == me) {
        owner_depth++;
        e->nested = 1;
        pthread_mutex_unlock(&lock_state);
        /* the trace starts and stops only between calls: its state holds for this one */
        if (numbered && spmd__tracing())
            spmd__trace_call_enter(fn, atomic_load(&current_number), 1);
        return SPMD_OK;
    }
    unsigned long ticket = next_ticket++;
    while (serving != ticket)
        pthread_cond_wait(&lock_turn, &lock_state);
    owner_thread = me;
    owner_depth = 1;
    unsigned long number = numbered ? ++calls_made : 0;
    pthread_mutex_unlock(&lock_state);
    if (!numbered)
        return SPMD_OK;
    SPMD_DEBUG("call #%lu (%s) from thread %d", number, fn, me);
    unsigned names = spmd__thread_names_version();
    if (owner_text_thread != me || owner_text_version != names) { /* else it holds already */
        pthread_mutex_lock(&state);
        spmd__thread_text(owner_text, sizeof owner_text);
        pthread_mutex_unlock(&state);
        owner_text_thread = me;
        owner_text_version = names;
    }
    atomic_store(&current_number, number);
    if (spmd__tracing())
        spmd__trace_call_enter(fn, number, 0);
    return SPMD_OK;
}

spmd_status spmd__calls_enter(const char *fn, spmd__call_entry *e) { return enter(fn, e, 1); }

spmd_status spmd__calls_enter_unnumbered(const char *fn, spmd__call_entry *e)
{
    return enter(fn, e, 0);
}

/* calls that failed in this process (spmd__calls_failures) */
static atomic_ulong failures;

unsigned long spmd__calls_failures(void) { return atomic_load(&failures); }

void spmd__calls_exit(const spmd__call_entry *e, spmd_status st)
{
    if (st != SPMD_OK)
        atomic_fetch_add(&failures, 1);
    if (!e->unnumbered && spmd__tracing())
        spmd__trace_call_exit(st);
    if (e->nested) {
        pthread_mutex_lock(&lock_state);
        owner_depth--;
        pthread_mutex_unlock(&lock_state);
        return;
    }
    /* the outermost call of the holder (owner_depth is 1) */
    if (!clear_call_state_unless_pending()) {
        const spmd__notes_transport *t = atomic_load(&transport);
        if (t)
            t->flush(); /* no wait of this call will poll for it any more */
        clear_call_state();
    }
    atomic_store(&current_number, 0);
    pthread_mutex_lock(&lock_state);
    owner_depth = 0;
    owner_thread = 0;
    serving++;
    pthread_cond_broadcast(&lock_turn);
    pthread_mutex_unlock(&lock_state);
}

unsigned long spmd__calls_number(void) { return atomic_load(&current_number); }

/* ---- a small map of 64-bit keys (identities, counts) ---- */

typedef struct u64map {
    uint64_t *keys; /* 0: empty */
    unsigned long *values;
    size_t cap, count;
} u64map;

static size_t map_slot(const u64map *m, uint64_t key)
{
    size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static unsigned long *map_find(u64map *m, uint64_t key)
{
    if (!m->cap)
        return NULL;
    size_t i = map_slot(m, key | 1);
    return m->keys[i] ? &m->values[i] : NULL;
}

/* The value of `key`, inserted as 0 when new; NULL when out of memory. */
static unsigned long *map_get(u64map *m, uint64_t key)
{
    key |= 1; /* never 0, which marks empty slots */
    if ((m->count + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        u64map grown = {calloc(cap, sizeof(uint64_t)), calloc(cap, sizeof(unsigned long)), cap, 0};
        if (!grown.keys || !grown.values) {
            free(grown.keys);
            free(grown.values);
            return NULL;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) {
                size_t j = map_slot(&grown, m->keys[i]);
                grown.keys[j] = m->keys[i];
                grown.values[j] = m->values[i];
                grown.count++;
            }
        free(m->keys);
        free(m->values);
        *m = grown;
    }
    size_t i = map_slot(m, key);
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->values[i] = 0;
        m->count++;
    }
    return &m->values[i];
}

/* Removes `key` (backward shift, so that probing stays right). */
static void map_remove(u64map *m, uint64_t key)
{
    if (!m->cap)
        return;
    size_t i = map_slot(m, key | 1);
    if (!m->keys[i])
        return;
    m->keys[i] = 0;
    m->count--;
    for (size_t j = (i + 1) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1)) {
        uint64_t k = m->keys[j];
        unsigned long v = m->values[j];
        m->keys[j] = 0;
        size_t at = map_slot(m, k);
        m->keys[at] = k;
        m->values[at] = v;
    }
}

static void map_free(u64map *m)
{
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof *m);
}

/* ---- the state behind notes (under `state`) ---- */

#define WAIT_SLOTS 64
#define PEER_NOTES 32
#define ABANDONED 64

typedef struct tracked {
    int used;
    spmd__wait_info info;
    int64_t since;      /* registered at */
    int64_t next_probe; /* when to ask the peer again */
    int64_t backoff;
    uint64_t first_probe; /* the first probe sent for it: older answers are not about it */
    /* A note said the peer's device went past this wait: this wait's own thread confirms it
     * (spmd__calls_wait_confirm), since the peer's message may be in already, unseen. */
    uint64_t suspicion;
    char suspect_message[SPMD__MESSAGE_CAPACITY];
    /* A note said the peer waits for this process elsewhere, or that its device went past this
     * wait: only an answer to this wait's next probe, a recheck interval later, confirms it,
     * since the peer may not have seen this process's message, or this process not all of the
     * peer's yet (another wait's probe to the peer may go sooner). */
    uint64_t recheck_after; /* nonzero: a recheck is due */
    uint64_t recheck_probe; /* the probe sent for the recheck */
} tracked;

typedef struct peer_note {
    int used;
    int64_t arrived;
    spmd__note note;
} peer_note;

typedef struct abandoned_call {
    uint64_t comm_id;
    unsigned long comm_call;
    char reason[SPMD__NOTE_TEXT];
} abandoned_call;

typedef struct device_slot {
    atomic_uint version; /* odd while written: readers retry */
    atomic_ulong number;
    atomic_int device, state;
    atomic_uint seq;
    atomic_ulong fingerprint;
    atomic_ulong what[2];
} device_slot;

static void (*formatter)(const void *arg, const uint64_t *what, char *text, size_t size);

void spmd__calls_set_formatter(void (*format)(const void *arg, const uint64_t *what, char *text,
                                              size_t size))
{
    pthread_mutex_lock(&state);
    formatter = format;
    pthread_mutex_unlock(&state);
}

static spmd__call_about about;
static unsigned long about_number; /* the call `about` belongs to */
static int64_t about_since;        /* ... which said so then */
static tracked waits[WAIT_SLOTS];
static int waits_high; /* slots below it may be used (each slot is large: a call's end clears
                          only these) */
static peer_note peers[PEER_NOTES];
static abandoned_call abandoned[ABANDONED];
static int abandoned_next, abandoned_count;
static u64map started;  /* communicator identity -> last call started there */
static u64map ordinals; /* identity key -> communicators made over it */
static int me = -1;
static _Atomic int64_t probe_after_ns = 200000000;
static uint64_t probes_sent;
static uint64_t suspicions;
static device_slot *devices;
static int num_devices;
static atomic_int verdict_set; /* for the call verdict_number */
static unsigned long verdict_number;
static spmd_status verdict_status;
static int verdict_settled;
static char verdict_message[SPMD__MESSAGE_CAPACITY];
/* news of abandoned calls, for the transport to send in this order (spmd__calls_pending_
 * abandon): the processes to tell, the call, why, and whether they are all of its processes */
#define PUSHES 8
typedef struct push {
    int *processes;
    int n, told_all;
    uint64_t comm_id;
    unsigned long comm_call;
    char reason[SPMD__NOTE_TEXT];
} push;
static push pushes[PUSHES];
static int push_count;

void spmd__calls_open(int num_local, int process_index, int64_t timeout_ns)
{
    pthread_mutex_lock(&state);
    me = process_index;
    int64_t p = timeout_ns / 50;
    probe_after_ns = p < 20000000 ? 20000000 : p > 200000000 ? 200000000 : p;
    free(devices);
    devices = calloc((size_t)(num_local > 0 ? num_local : 1), sizeof *devices);
    num_devices = devices ? num_local : 0;
    pthread_mutex_unlock(&state);
}

void spmd__calls_close(void)
{
    pthread_mutex_lock(&state);
    free(devices);
    devices = NULL;
    num_devices = 0;
    map_free(&started);
    memset(peers, 0, sizeof peers);
    abandoned_count = abandoned_next = 0;
    for (int i = 0; i < push_count; i++)
        free(pushes[i].processes);
    push_count = 0;
    me = -1;
    pthread_mutex_unlock(&state);
    /* `ordinals` stays: identities count every communicator ever made, across start-ups */
}

int64_t spmd__calls_probe_after_ns(void)
{
    return atomic_load_explicit(&probe_after_ns, memory_order_relaxed);
}

/* Called with `state` held. */
static void clear_call_state_locked(void)
{
    memset(&about, 0, sizeof about);
    about_number = 0;
    atomic_store(&verdict_set, 0);
    verdict_number = 0;
    for (int i = 0; i < waits_high; i++)
        waits[i].used = 0;
    waits_high = 0;
}

static void clear_call_state(void)
{
    pthread_mutex_lock(&state);
    clear_call_state_locked();
    pthread_mutex_unlock(&state);
}

/* Clears the call's state unless news of abandoned calls waits to be sent (0: it waits). */
static int clear_call_state_unless_pending(void)
{
    pthread_mutex_lock(&state);
    int pending = push_count;
    if (!pending)
        clear_call_state_locked();
    pthread_mutex_unlock(&state);
    return !pending;
}

/* Called with `state` held. */
static void set_about(const spmd__call_about *a)
{
    static const spmd__call_about nothing;
    about = a ? *a : nothing;
    about_number = atomic_load(&current_number);
    about_since = spmd__coarse_now_ns();
    if (a && spmd__log_enabled(SPMD__LOG_DEBUG)) {
        char what[SPMD__NOTE_TEXT] = "";
        if (a->describe)
            a->describe(a->arg, what, sizeof what);
        SPMD_DEBUG("call #%lu is %016llx/%lu: %s", about_number, (unsigned long long)a->comm_id,
                   a->comm_call, what);
    }
}

void spmd__calls_about(const spmd__call_about *a)
{
    pthread_mutex_lock(&state);
    set_about(a);
    pthread_mutex_unlock(&state);
}

uint64_t spmd__calls_identity(uint64_t key, int taken)
{
    pthread_mutex_lock(&state);
    unsigned long *n = map_get(&ordinals, key);
    unsigned long k = n ? *n : 0;
    if (n && taken)
        (*n)++;
    pthread_mutex_unlock(&state);
    uint64_t h = spmd__fnv1a(SPMD__FNV1A_SEED, &key, sizeof key);
    return spmd__fnv1a(h, &k, sizeof k) | 1;
}

unsigned long spmd__calls_next_call(uint64_t key)
{
    pthread_mutex_lock(&state);
    unsigned long *n = map_get(&ordinals, key ^ 0xca11ca11ca11ca11ull);
    unsigned long call = n ? ++*n : 0;
    pthread_mutex_unlock(&state);
    return call;
}

void spmd__calls_comm_forget(uint64_t comm_id)
{
    pthread_mutex_lock(&state);
    map_remove(&started, comm_id);
    pthread_mutex_unlock(&state);
}

/* Called with `state` held. */
static int find_abandoned(uint64_t comm_id, unsigned long comm_call, char *reason, size_t size)
{
    for (int i = 0; i < abandoned_count; i++)
        if (abandoned[i].comm_id == comm_id && abandoned[i].comm_call == comm_call) {
            spmd__copy_text(reason, size, abandoned[i].reason);
            return 1;
        }
    return 0;
}

int spmd__calls_start(const spmd__call_about *a, char *reason, size_t size)
{
    pthread_mutex_lock(&state); /* once: a small call's path takes few locks */
    unsigned long *n = map_get(&started, a->comm_id);
    if (n && a->comm_call > *n)
        *n = a->comm_call;
    set_about(a);
    int found = find_abandoned(a->comm_id, a->comm_call, reason, size);
    pthread_mutex_unlock(&state);
    return found;
}

static void remember_abandoned(uint64_t comm_id, unsigned long comm_call, const char *reason)
{
    for (int i = 0; i < abandoned_count; i++)
        if (abandoned[i].comm_id == comm_id && abandoned[i].comm_call == comm_call)
            return;
    abandoned_call *a = &abandoned[abandoned_next];
    abandoned_next = (abandoned_next + 1) % ABANDONED;
    if (abandoned_count < ABANDONED)
        abandoned_count++;
    a->comm_id = comm_id;
    a->comm_call = comm_call;
    spmd__copy_text(a->reason, sizeof a->reason, reason);
}

/* Queues news of an abandoned call for the transport (called under `state`). */
static void queue_push(const int *processes, int n, int told_all, uint64_t comm_id,
                       unsigned long comm_call, const char *reason)
{
    if (push_count == PUSHES || n < 1)
        return; /* the others learn it when they ask */
    push *p = &pushes[push_count];
    p->processes = malloc((size_t)n * sizeof *p->processes);
    if (!p->processes)
        return;
    memcpy(p->processes, processes, (size_t)n * sizeof *p->processes);
    p->n = n;
    p->told_all = told_all;
    p->comm_id = comm_id;
    p->comm_call = comm_call;
    spmd__copy_text(p->reason, sizeof p->reason, reason);
    push_count++;
}

/* Ends the current call with `st` and the message (called under `state`). Settled: the call
 * is abandoned without its final agreement; `tell`: every other process taking part is told
 * (the news goes out with the next poll of the notes, or when the call ends). */
static void set_verdict(spmd_status st, int settled, const char *message, int tell)
{
    unsigned long number = atomic_load(&current_number);
    int had = atomic_load(&verdict_set);
    /* the first verdict stands, but a call abandoned elsewhere is abandoned here too, even if
     * a mismatch was found first (the others will not come to its final agreement) */
    if (!number || about_number != number || (had && !(settled && had == 1)))
        return;
    verdict_number = number;
    verdict_status = st;
    verdict_settled = settled;
    spmd__copy_text(verdict_message, sizeof verdict_message, message);
    atomic_store(&verdict_set, settled ? 2 : 1);
    SPMD_DEBUG("call #%lu verdict (%s): %.300s", number, settled ? "abandon" : "mismatch", message);
    if (settled && tell && about.num_processes > 1)
        queue_push(about.processes, about.num_processes, 1, about.comm_id, about.comm_call,
                   message);
}

int spmd__calls_pending_abandon(int **processes, int *n, uint64_t *comm_id,
                                unsigned long *comm_call, int *told_all, char *reason, size_t size)
{
    pthread_mutex_lock(&state);
    int pending = push_count > 0;
    if (pending) {
        push first = pushes[0];
        memmove(&pushes[0], &pushes[1], (size_t)(push_count - 1) * sizeof pushes[0]);
        push_count--;
        *processes = first.processes;
        *n = first.n;
        *told_all = first.told_all;
        *comm_id = first.comm_id;
        *comm_call = first.comm_call;
        spmd__copy_text(reason, size, first.reason);
    }
    pthread_mutex_unlock(&state);
    return pending;
}

int spmd__calls_has_verdict(void)
{
    return atomic_load_explicit(&verdict_set, memory_order_relaxed);
}

spmd_status spmd__calls_verdict(int *settled)
{
    if (settled)
        *settled = 0;
    if (!atomic_load(&verdict_set))
        return SPMD_OK;
    pthread_mutex_lock(&state);
    spmd_status st = SPMD_OK;
    if (atomic_load(&verdict_set) && verdict_number == atomic_load(&current_number)) {
        st = verdict_status;
        if (settled)
            *settled = verdict_settled;
        spmd__error_set_raw(verdict_message);
    }
    pthread_mutex_unlock(&state);
    return st;
}

/* ---- waits ---- */

int spmd__calls_wait_begin(const spmd__wait_info *info)
{
    int64_t now = spmd__now_ns();
    pthread_mutex_lock(&state);
    int slot = -1;
    for (int i = 0; i < WAIT_SLOTS && slot < 0; i++)
        if (!waits[i].used)
            slot = i;
    if (slot >= 0) {
        tracked *t = &waits[slot];
        waits_high = slot + 1 > waits_high ? slot + 1 : waits_high;
        t->used = 1;
        t->info = *info;
        t->since = now;
        t->next_probe = now;
        t->backoff = probe_after_ns;
        t->first_probe = 0;
        t->suspicion = 0;
        t->recheck_after = 0;
        t->recheck_probe = 0;
    }
    pthread_mutex_unlock(&state);
    return slot;
}

void spmd__calls_wait_end(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&state);
    if (waits[slot].suspicion && atomic_load(&verdict_set) == 0)
        SPMD_DEBUG("a wait for process %d ended well after a note said its device had gone past "
                   "it (its message had come)",
                   waits[slot].info.peer);
    waits[slot].used = 0;
    pthread_mutex_unlock(&state);
}

uint64_t spmd__calls_wait_suspicion(int slot)
{
    if (slot < 0)
        return 0;
    pthread_mutex_lock(&state);
    uint64_t s = waits[slot].used ? waits[slot].suspicion : 0;
    pthread_mutex_unlock(&state);
    return s;
}

void spmd__calls_wait_confirm(int slot, uint64_t suspicion)
{
    if (slot < 0 || !suspicion)
        return;
    pthread_mutex_lock(&state);
    const tracked *t = &waits[slot];
    if (t->used && t->suspicion == suspicion && atomic_load(&verdict_set) != 2)
        set_verdict(SPMD_ERR_COLLECTIVE_MISMATCH, 0, t->suspect_message, 0);
    pthread_mutex_unlock(&state);
}

int spmd__calls_due_probes(int *to, uint64_t *ids, int cap)
{
    int64_t now = spmd__now_ns();
    int n = 0;
    pthread_mutex_lock(&state);
    for (int i = 0; i < WAIT_SLOTS && n < cap; i++) {
        tracked *t = &waits[i];
        if (!t->used || t->info.peer < 0 || t->info.peer == me || now < t->next_probe)
            continue;
        if (n + 1 + t->info.num_ahead > cap)
            break; /* its turn comes at the next poll: those before it are not due then */
        int k = 0;
        while (k < n && to[k] != t->info.peer)
            k++;
        if (k == n) { /* one probe per process asked */
            to[n] = t->info.peer;
            ids[n++] = ++probes_sent;
        }
        if (!t->first_probe)
            t->first_probe = ids[k];
        if (t->recheck_after && !t->recheck_probe)
            t->recheck_probe = ids[k]; /* due now: a recheck interval after the note */
        for (int a = 0; a < t->info.num_ahead; a++) {
            int q = t->info.ahead[a], known = q == me || q < 0;
            for (int j = 0; j < n && !known; j++)
                known = to[j] == q;
            if (!known) {
                to[n] = q;
                ids[n++] = ++probes_sent;
            }
        }
        t->next_probe = now + t->backoff;
        t->backoff = t->backoff * 2 < 1000000000 ? t->backoff * 2 : 1000000000;
    }
    pthread_mutex_unlock(&state);
    return n;
}

/* ---- devices ---- */

void spmd__calls_device(int ordinal, int device, int st, unsigned seq, uint64_t fp,
                        const uint64_t *what)
{
    if (ordinal < 0 || ordinal >= num_devices || !devices)
        return;
    device_slot *d = &devices[ordinal];
    unsigned v = atomic_load_explicit(&d->version, memory_order_relaxed);
    atomic_store_explicit(&d->version, v + 1, memory_order_relaxed);
    /* Release stores keep the odd version before the fields (no fences: TSan). */
    atomic_store_explicit(&d->number, atomic_load(&current_number), memory_order_release);
    atomic_store_explicit(&d->device, device, memory_order_release);
    atomic_store_explicit(&d->state, st, memory_order_release);
    atomic_store_explicit(&d->seq, seq, memory_order_release);
    atomic_store_explicit(&d->fingerprint, fp, memory_order_release);
    for (int k = 0; what && k < 2; k++)
        atomic_store_explicit(&d->what[k], what[k], memory_order_release);
    atomic_store_explicit(&d->version, v + 2, memory_order_release);
}

/* A consistent read of a device slot; 0 when it is not of the current call. */
static int read_device(int ordinal, spmd__note_device *out, uint64_t *what)
{
    device_slot *d = &devices[ordinal];
    for (;;) {
        unsigned v1 = atomic_load_explicit(&d->version, memory_order_acquire);
        if (v1 & 1) {
            sched_yield(); /* its writer was preempted half way */
            continue;
        }
        unsigned long number = atomic_load_explicit(&d->number, memory_order_acquire);
        out->device = atomic_load_explicit(&d->device, memory_order_acquire);
        out->state = atomic_load_explicit(&d->state, memory_order_acquire);
        out->seq = atomic_load_explicit(&d->seq, memory_order_acquire);
        out->fingerprint = atomic_load_explicit(&d->fingerprint, memory_order_acquire);
        for (int k = 0; k < 2; k++)
            what[k] = atomic_load_explicit(&d->what[k], memory_order_acquire);
        out->pad = 0;
        /* acquire loads keep the version check after the fields */
        if (atomic_load_explicit(&d->version, memory_order_relaxed) == v1)
            return number != 0 && number == atomic_load(&current_number) && out->state != 0;
    }
}

static int has_started(uint64_t comm_id, unsigned long comm_call)
{
    unsigned long *n = map_find(&started, comm_id);
    return n && *n >= comm_call;
}

/* ---- notes ---- */

static int is_member(int process)
{
    for (int lo = 0, hi = about.num_processes - 1; lo <= hi;) {
        int mid = (lo + hi) / 2, p = about.processes[mid];
        if (p == process)
            return 1;
        if (p < process)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return 0;
}

/* The current call, for messages: "spmd_reshard of ... (call #12 of process 0, thread 2)". */
static void call_text(char *text, size_t size)
{
    char what[SPMD__NOTE_TEXT] = "a call";
    if (about.describe)
        about.describe(about.arg, what, sizeof what);
    if (strstr(what, "(its call #")) /* the description says it already */
        snprintf(text, size, "%s", what);
    else
        snprintf(text, size, "%s (its call #%lu, %s)", what, atomic_load(&current_number),
                 owner_text);
}

void spmd__calls_fill_note(spmd__note *n, int kind, int recipient, uint64_t probe,
                           const spmd__note *asked)
{
    memset(n, 0, sizeof *n);
    n->magic = SPMD__NOTE_MAGIC;
    n->kind = (uint32_t)kind;
    n->probe = probe;
    pthread_mutex_lock(&state);
    n->started_yours = asked && asked->comm_id && has_started(asked->comm_id, asked->comm_call);
    n->process = me;
    unsigned long number = atomic_load(&current_number);
    if (number && about_number == number) {
        n->number = number;
        n->comm_id = about.comm_id;
        n->comm_call = about.comm_call;
        n->peer_is_member = is_member(recipient);
        call_text(n->call, sizeof n->call);
        for (int i = 0; i < WAIT_SLOTS && n->num_waits < SPMD__NOTE_WAITS; i++) {
            const tracked *t = &waits[i];
            if (!t->used)
                continue;
            spmd__note_wait *w = &n->waits[n->num_waits++];
            w->peer = t->info.peer;
            w->phase = t->info.phase;
            w->device = t->info.device;
            w->peer_device = t->info.peer_device;
            w->fingerprint = t->info.fingerprint;
            if (t->info.describe)
                t->info.describe(t->info.arg, w->what, sizeof w->what);
        }
        for (int k = 0; k < num_devices && n->num_devices < SPMD__NOTE_DEVICES; k++) {
            spmd__note_device *d = &n->devices[n->num_devices];
            uint64_t what[2];
            if (!read_device(k, d, what))
                continue;
            if (formatter && d->seq > 0)
                formatter(about.arg, what, d->what, sizeof d->what);
            n->num_devices++;
        }
    }
    pthread_mutex_unlock(&state);
}

static peer_note *peer_slot(int process)
{
    peer_note *oldest = &peers[0];
    for (int i = 0; i < PEER_NOTES; i++) {
        if (peers[i].used && peers[i].note.process == process)
            return &peers[i];
        if (!peers[i].used || (oldest->used && peers[i].arrived < oldest->arrived))
            oldest = &peers[i];
    }
    return oldest;
}

static const peer_note *latest_of(int process)
{
    for (int i = 0; i < PEER_NOTES; i++)
        if (peers[i].used && peers[i].note.process == process)
            return &peers[i];
    return NULL;
}

static const char *device_state_text(const spmd__note_device *d, unsigned phase, uint64_t fp,
                                     char *buf, size_t size)
{
    char last[128] = "", what[96] = "";
    if (d->what[0]) {
        snprintf(last, sizeof last, " (its collective #%u: %.80s)", d->seq, d->what);
        snprintf(what, sizeof what, ": %.80s", d->what);
    }
    int returned = d->state == SPMD__DEVICE_RETURNED;
    if (returned && d->seq < phase)
        snprintf(buf, size, "returned from fn without calling it%s", last);
    else if (d->seq > phase)
        snprintf(buf, size, "has gone on past it%s", last);
    else if (returned && d->fingerprint == fp) /* its message for this one should have come */
        snprintf(buf, size, "issued it as its #%u and returned from fn", d->seq);
    else
        snprintf(buf, size, "issued another collective as its #%u%s%s", d->seq, what,
                 returned ? ", then returned from fn" : "");
    return buf;
}

/* Whether `d` will never come to collective `phase` of fingerprint `fp`. */
static int device_passed(const spmd__note_device *d, unsigned phase, uint64_t fp)
{
    return d->state == SPMD__DEVICE_RETURNED || d->seq > phase ||
           (d->seq == phase && d->state == SPMD__DEVICE_WAITING && d->fingerprint != fp);
}

/* Conflict: this process is in a call the peer must join, and the peer in one this process
 * must join, which it has not started: neither can end before the other. `mine` is this
 * process's call text. */
static void conflict(const spmd__note *n, const char *mine)
{
    char message[SPMD__MESSAGE_CAPACITY];
    snprintf(message, sizeof message,
             "processes issued their calls in different orders: process %d is in %s and waits "
             "there for process %d, which is in %s and needs process %d there; neither call can "
             "end before the other, so process %d gave up the one it had not started, on every "
             "process that takes part in it. Every process must issue the calls it shares with "
             "others in the same order: calls from several threads of a process run one at a "
             "time, in the order they come (order them, or give each thread a name with "
             "spmd_thread_set_name so that such mix-ups are told apart)",
             me, mine, n->process, n->call, me, me);
    /* Only the peer's call goes, never this one: this process may have sent its part of its
     * own call already, and the others could then finish that call's agreement without it
     * and go on where this one would not. The peer's call cannot end anywhere, since this
     * process never takes part in it (recorded before anything else can start it). The peer
     * tells that call's other processes; when it waits for this one in turn, it gives up this
     * call the same way. */
    remember_abandoned(n->comm_id, n->comm_call, message);
    queue_push(&n->process, 1, 0, n->comm_id, n->comm_call, message);
}

static void mismatch(const char *message)
{
    set_verdict(SPMD_ERR_COLLECTIVE_MISMATCH, 0, message, 0);
}

/* How long after a note that would end a wait the sender is asked again: time for its
 * threads to see the messages that came to it. */
#define RECHECK_AFTER_NS 10000000

/* This process waits for the note's sender: the waits' rules. */
static void weigh_my_waits(const spmd__note *n, const char *mine)
{
    int same = n->comm_id == about.comm_id && n->comm_call == about.comm_call;
    for (int i = 0; i < WAIT_SLOTS && atomic_load(&verdict_set) != 2; i++) {
        tracked *t = &waits[i];
        /* only an answer to a probe of this wait tells where the peer is now */
        if (!t->used || t->info.peer != n->process || !t->first_probe || n->probe < t->first_probe)
            continue;
        if (!same) {
            /* Neither can end its call: the peer's needs this process, which has not started
             * it, and this one needs the peer, which has not started it either. */
            if (n->peer_is_member && !n->started_yours && !has_started(n->comm_id, n->comm_call)) {
                conflict(n, mine);
                return;
            }
            continue;
        }
        char what[SPMD__NOTE_WHAT] = "its collective", why[256], message[SPMD__MESSAGE_CAPACITY];
        if (t->info.describe)
            t->info.describe(t->info.arg, what, sizeof what);
        if (t->info.phase != SPMD__PHASE_END && t->info.peer_device >= 0) {
            for (int k = 0; k < n->num_devices; k++) {
                const spmd__note_device *d = &n->devices[k];
                if (d->device != t->info.peer_device ||
                    !device_passed(d, (unsigned)t->info.phase, t->info.fingerprint))
                    continue;
                snprintf(message, sizeof message,
                         "processes issued different collectives in %s: process %d (device %d) "
                         "waits in %s for process %d, whose device %d %s; every device must "
                         "issue the same collectives, with the same axis_index_groups, in the "
                         "same order",
                         mine, me, t->info.device, what, n->process, d->device,
                         device_state_text(d, (unsigned)t->info.phase, t->info.fingerprint, why,
                                           sizeof why));
                /* A long message may still be coming in, fragment by fragment: only a second
                 * answer, a recheck interval later, makes the wait's thread look. */
                if (t->recheck_probe && n->probe >= t->recheck_probe) {
                    spmd__copy_text(t->suspect_message, sizeof t->suspect_message, message);
                    t->suspicion = ++suspicions;
                } else if (!t->recheck_after) {
                    t->recheck_after = probes_sent;
                    t->next_probe = spmd__now_ns() + RECHECK_AFTER_NS;
                }
                break;
            }
        } else if (t->info.phase == SPMD__PHASE_END) {
            int k = 0;
            for (; k < n->num_waits; k++) {
                const spmd__note_wait *w = &n->waits[k];
                if (w->peer != me || w->phase == SPMD__PHASE_END)
                    continue;
                snprintf(message, sizeof message,
                         "processes issued different collectives in %s: process %d (device %d) "
                         "waits in %s for process %d, whose devices all returned from fn "
                         "without calling it; every device must issue the same collectives, "
                         "with the same axis_index_groups, in the same order",
                         mine, n->process, w->device, w->what, me);
                if (t->recheck_probe && n->probe >= t->recheck_probe) {
                    mismatch(message);
                } else if (!t->recheck_after) { /* ask again a little later */
                    t->recheck_after = probes_sent;
                    t->next_probe = spmd__now_ns() + RECHECK_AFTER_NS;
                }
                break;
            }
            if (k == n->num_waits && t->recheck_probe && n->probe >= t->recheck_probe)
                t->recheck_after = t->recheck_probe = 0; /* the peer had only not seen this
                                                          * process's message */
        }
    }
}

int spmd__calls_take_note(const spmd__note *n)
{
    if (n->magic != SPMD__NOTE_MAGIC || n->num_waits < 0 || n->num_waits > SPMD__NOTE_WAITS ||
        n->num_devices < 0 || n->num_devices > SPMD__NOTE_DEVICES)
        return 0;
    int64_t now = spmd__now_ns();
    pthread_mutex_lock(&state);
    SPMD_DEBUG("note %u from process %d (probe %llu): %016llx/%llu started %d member %d", n->kind,
               n->process, (unsigned long long)n->probe, (unsigned long long)n->comm_id,
               (unsigned long long)n->comm_call, n->started_yours, n->peer_is_member);
    if (n->kind == SPMD__NOTE_ABANDON) {
        remember_abandoned(n->comm_id, n->comm_call, n->call);
        unsigned long number = atomic_load(&current_number);
        if (number && about_number == number && about.comm_id == n->comm_id &&
            about.comm_call == n->comm_call) {
            char message[SPMD__MESSAGE_CAPACITY];
            snprintf(message, sizeof message, "process %d abandoned this call: %s", n->process,
                     n->call);
            /* told only this process (it gave up the call of a peer): tell the rest */
            set_verdict(SPMD_ERR_COLLECTIVE_MISMATCH, 1, message, !n->told_all);
        }
        pthread_mutex_unlock(&state);
        return 0;
    }
    peer_note *slot = peer_slot(n->process);
    slot->used = 1;
    slot->arrived = now;
    slot->note = *n;
    slot->note.call[sizeof slot->note.call - 1] = '\0';
    for (int k = 0; k < slot->note.num_waits; k++)
        slot->note.waits[k].what[SPMD__NOTE_WHAT - 1] = '\0';
    unsigned long number = atomic_load(&current_number);
    if (n->kind == SPMD__NOTE_REPLY && number && about_number == number && about.comm_id &&
        slot->note.comm_id) {
        /* Decided from answers alone: a probe may have waited in MPI while this process did
         * not look, and say where its sender was, not where it is. The sender, waiting for
         * this process, weighs this process's answer. */
        char mine[SPMD__NOTE_TEXT];
        call_text(mine, sizeof mine);
        weigh_my_waits(&slot->note, mine);
    }
    pthread_mutex_unlock(&state);
    return n->kind == SPMD__NOTE_PROBE;
}

/* The latest note of `process` if it came during this call. A process that answered and died
 * since still reads as alive: one that answered and then went where it answers no more (a
 * device in fn) could not be told from it. */
static const peer_note *news_of(int process)
{
    const peer_note *p = latest_of(process);
    return p && p->arrived >= about_since ? p : NULL;
}

void spmd__calls_peer_text(int process, char *text, size_t size)
{
    if (size)
        text[0] = '\0';
    pthread_mutex_lock(&state);
    const peer_note *p = news_of(process);
    unsigned long number = atomic_load(&current_number);
    if (p && p->note.number && number) {
        spmd__strbuf sb;
        spmd__strbuf_init(&sb, text, size);
        spmd__strbuf_printf(&sb, "process %d is alive, in %s", process, p->note.call);
        for (int k = 0; k < p->note.num_waits && k < 2; k++) {
            const spmd__note_wait *w = &p->note.waits[k];
            if (w->peer >= 0)
                spmd__strbuf_printf(&sb, "%s waiting for process %d in %s", k ? ";" : ",", w->peer,
                                    w->what);
        }
        /* where its devices are: the one stuck in fn shows as behind the others */
        for (int k = 0; k < p->note.num_devices && k < 4; k++) {
            const spmd__note_device *d = &p->note.devices[k];
            spmd__strbuf_printf(&sb, k ? ", device %d " : "; its device %d ", d->device);
            if (d->state == SPMD__DEVICE_RETURNED)
                spmd__strbuf_printf(&sb, "had returned from fn after %u collective(s)", d->seq);
            else if (d->seq == 0)
                spmd__strbuf_printf(&sb, "was in fn, before any collective");
            else
                spmd__strbuf_printf(&sb, "had last entered collective #%u (%.80s)", d->seq,
                                    d->what);
        }
        if (p->note.num_devices > 4)
            spmd__strbuf_printf(&sb, ", and %d more", p->note.num_devices - 4);
    }
    pthread_mutex_unlock(&state);
}

int spmd__calls_heard_from(int process)
{
    pthread_mutex_lock(&state);
    const peer_note *p = news_of(process);
    int heard = p && p->note.number;
    pthread_mutex_unlock(&state);
    return heard;
}

int spmd__calls_blocking_process(int missing)
{
    pthread_mutex_lock(&state);
    int blocker = -1;
    const peer_note *p = news_of(missing); /* NULL: it said nothing during this call */
    for (int k = 0; p && k < p->note.num_waits && blocker < 0; k++) {
        int q = p->note.waits[k].peer;
        if (q >= 0 && q != me && q != missing && !news_of(q))
            blocker = q;
    }
    pthread_mutex_unlock(&state);
    return blocker;
}
