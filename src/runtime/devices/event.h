/* Private: a wake-up event that waits by spinning briefly, then yielding, then blocking. */
#ifndef SPMD_RUNTIME_EVENT_H
#define SPMD_RUNTIME_EVENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct spmd__event {
    atomic_uint seq;     /* bumped by every signal */
    atomic_int sleepers; /* threads blocked (or about to block) in the condition variable */
    pthread_mutex_t mutex;
    pthread_cond_t cond;
} spmd__event;

/** Monotonic clock in nanoseconds: every deadline is on it. */
int64_t spmd__now_ns(void);

/** The same clock, up to one kernel tick (a few ms) behind, at a quarter of the cost: where a
 * call sets a deadline seconds away, not for durations. */
int64_t spmd__coarse_now_ns(void);

void spmd__event_init(spmd__event *e);
void spmd__event_destroy(spmd__event *e);
/** The current sequence number: read it, test the condition, then wait on what was read. */
unsigned spmd__event_seq(spmd__event *e);
/** Returns once the event has been signalled after `seen` was read (may return early). */
void spmd__event_wait(spmd__event *e, unsigned seen);
/**
 * As spmd__event_wait, but gives up at `deadline_ns` (CLOCK_MONOTONIC) and wakes at least every
 * `poll_ns` so that the caller can look at other conditions. Returns 1 on timeout, else 0.
 */
int spmd__event_wait_until(spmd__event *e, unsigned seen, int64_t deadline_ns, int64_t poll_ns);
void spmd__event_signal(spmd__event *e);

/**
 * How long waiters spin and yield before blocking. Spinning only pays when every thread has a
 * core: with more threads than cores a spinner steals the time of the thread it waits for.
 */
void spmd__event_set_policy(int spins, int yields);

/**
 * As spmd__event_wait_until, for the waits of device threads for each other (a collective's
 * rendezvous), under their own policy: while they run fn the calling thread sleeps in its join,
 * so they may spin where they alone have a core each, although with the caller they would not.
 */
int spmd__event_wait_peers_until(spmd__event *e, unsigned seen, int64_t deadline_ns,
                                 int64_t poll_ns);
void spmd__event_set_peer_policy(int spins, int yields);

/**
 * A polling wait's pause between two looks at what it waits for (MPI requests, a ring): none
 * for its first `spin_ns` (or the polling stretch, spmd__pause_set_polling); then a yield while the
 * thread keeps its core; a short sleep once its CPU time falls a quarter behind the clock. Then
 * other threads want the core (busy neighbours, more threads than cores), and a yield would hand
 * one of them a whole time slice at every step, while a thread woken from a sleep preempts it at
 * once.
 */
typedef struct spmd__pause {
    int64_t start_ns;                    /* on the caller's clock */
    int64_t wall_start_ns, cpu_start_ns; /* of the crowd's measure (precise, the thread's) */
    int64_t nap_ns;                      /* the last nap's */
    int crowded; /* 1 once a wait of this thread measured, within 100 ms, that it shares its core */
    /* 1 (spmd__pause_begin's choice): what it waits for needs MPI's progress, so a crowded wait
     * keeps its core a while between naps; 0: it waits for shared memory that its peer writes
     * alone, so a crowded wait naps at every step and leaves the core to that peer */
    int holds_core;
} spmd__pause;

void spmd__pause_begin(spmd__pause *p, int64_t now_ns);
/**
 * How long every wait polls before it pauses at all (0: only its own spin). Set at start-up
 * where the job's busy threads on this machine fit its cores: a thread that shares its core
 * then shares it with someone else's work, which a yield or a nap hands a whole time slice
 * while the peer this wait is for runs on another core.
 */
void spmd__pause_set_polling(int64_t ns);
/** The pause at `now_ns` (spmd__now_ns) of a wait that began at spmd__pause_begin. */
void spmd__pause_step(spmd__pause *p, int64_t now_ns, int64_t spin_ns);

#endif /* SPMD_RUNTIME_EVENT_H */
