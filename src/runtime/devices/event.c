#include "runtime/devices/event.h"

#include <errno.h>
#include <sched.h>
#include <time.h>

/* How long a wait spins, then yields, before it blocks. */
typedef struct wait_policy {
    atomic_int spins, yields;
} wait_policy;

static wait_policy caller_policy = {0, 64}; /* every wait but the device threads' rendezvous */
static wait_policy peer_policy = {0, 64};   /* spmd__event_wait_peers_until */

static void set_policy(wait_policy *p, int spins, int yields)
{
    atomic_store_explicit(&p->spins, spins, memory_order_relaxed);
    atomic_store_explicit(&p->yields, yields, memory_order_relaxed);
}

void spmd__event_set_policy(int spins, int yields) { set_policy(&caller_policy, spins, yields); }

void spmd__event_set_peer_policy(int spins, int yields) { set_policy(&peer_policy, spins, yields); }

void spmd__event_init(spmd__event *e)
{
    atomic_init(&e->seq, 0);
    atomic_init(&e->sleepers, 0);
    pthread_mutex_init(&e->mutex, NULL);
    /* Timed waits measure against the monotonic clock, immune to wall-clock changes. */
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cond, &attr);
    pthread_condattr_destroy(&attr);
}

void spmd__event_destroy(spmd__event *e)
{
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->mutex);
}

unsigned spmd__event_seq(spmd__event *e) { return atomic_load(&e->seq); }

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The wait's first part, under policy p: 1 once the event was signalled after `seen`. */
static int spun(spmd__event *e, unsigned seen, const wait_policy *p)
{
    int spins = atomic_load_explicit(&p->spins, memory_order_relaxed);
    int yields = atomic_load_explicit(&p->yields, memory_order_relaxed);
    for (int i = 0; i < spins; i++) {
        if (atomic_load_explicit(&e->seq, memory_order_acquire) != seen)
            return 1;
        cpu_relax();
    }
    for (int i = 0; i < yields; i++) {
        if (atomic_load_explicit(&e->seq, memory_order_acquire) != seen)
            return 1;
        sched_yield();
    }
    return 0;
}

void spmd__event_wait(spmd__event *e, unsigned seen)
{
    if (spun(e, seen, &caller_policy))
        return;
    /* Sequentially consistent sleepers++ then seq load, against the signaller's seq++ then
     * sleepers load: one of the two always sees the other, so no wake-up is lost. */
    pthread_mutex_lock(&e->mutex);
    atomic_fetch_add(&e->sleepers, 1);
    while (atomic_load(&e->seq) == seen)
        pthread_cond_wait(&e->cond, &e->mutex);
    atomic_fetch_sub(&e->sleepers, 1);
    pthread_mutex_unlock(&e->mutex);
}

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Until when this thread's waits nap from their start: a crowd measured by one wait outlasts
 * it, and the next wait would lose a time slice to find it again. */
static _Thread_local int64_t crowded_until_ns;

void spmd__pause_begin(spmd__pause *p, int64_t now_ns)
{
    p->start_ns = now_ns;
    p->cpu_start_ns = -1; /* read at the first pause past the spin: the fast path pays nothing */
    p->crowded = now_ns < crowded_until_ns;
    p->nap_ns = -1; /* the first nap comes a run after the spin */
    p->holds_core = 1;
}

/* A sleep this short still ends in tens of microseconds (the timer's slack); the peer that
 * needed the core had it meanwhile. */
#define PAUSE_NAP_NS 20000
#define PAUSE_WINDOW_NS 200000
#define PAUSE_RUN_NS 200000
#define PAUSE_CROWD_LASTS_NS 100000000

static _Atomic int64_t polling_ns; /* set at start-up, read by every wait */

void spmd__pause_set_polling(int64_t ns)
{
    atomic_store_explicit(&polling_ns, ns > 0 ? ns : 0, memory_order_relaxed);
}

void spmd__pause_step(spmd__pause *p, int64_t now_ns, int64_t spin_ns)
{
    int64_t waited = now_ns - p->start_ns;
    if (waited <= spin_ns || waited <= atomic_load_explicit(&polling_ns, memory_order_relaxed))
        return;
    if (!p->crowded) { /* both clocks read here, precisely, whatever clock the caller reads */
        int64_t cpu = thread_cpu_ns(), wall = spmd__now_ns();
        if (p->cpu_start_ns < 0) {
            p->cpu_start_ns = cpu;
            p->wall_start_ns = wall;
        } else if (cpu >= 0 && wall - p->wall_start_ns > PAUSE_WINDOW_NS &&
                   wall - p->wall_start_ns > 4 * (cpu - p->cpu_start_ns) / 3) {
            p->crowded = 1; /* lost over a quarter of the time to other threads */
            crowded_until_ns = wall + PAUSE_CROWD_LASTS_NS;
        }
    }
    if (p->crowded) {
        if (p->nap_ns < 0)
            p->nap_ns = now_ns;
        if (p->holds_core && now_ns - p->nap_ns < PAUSE_RUN_NS)
            return; /* it holds a core now: MPI's progress runs while it does */
        struct timespec nap = {0, PAUSE_NAP_NS};
        nanosleep(&nap, NULL);
        p->nap_ns = now_ns;
    } else {
        sched_yield();
    }
}

int64_t spmd__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t spmd__coarse_now_ns(void)
{
#ifdef CLOCK_MONOTONIC_COARSE
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return spmd__now_ns();
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
#else
    return spmd__now_ns();
#endif
}

static int wait_until(spmd__event *e, unsigned seen, int64_t deadline_ns, int64_t poll_ns,
                      const wait_policy *p)
{
    if (spun(e, seen, p))
        return 0;
    int64_t now = spmd__now_ns();
    if (now >= deadline_ns)
        return atomic_load(&e->seq) == seen;
    int64_t until = now + poll_ns < deadline_ns ? now + poll_ns : deadline_ns;
    struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
    int timed_out = 0;
    pthread_mutex_lock(&e->mutex);
    atomic_fetch_add(&e->sleepers, 1);
    while (atomic_load(&e->seq) == seen && !timed_out)
        timed_out = pthread_cond_timedwait(&e->cond, &e->mutex, &ts) == ETIMEDOUT;
    atomic_fetch_sub(&e->sleepers, 1);
    pthread_mutex_unlock(&e->mutex);
    return timed_out && until >= deadline_ns && atomic_load(&e->seq) == seen;
}

int spmd__event_wait_until(spmd__event *e, unsigned seen, int64_t deadline_ns, int64_t poll_ns)
{
    return wait_until(e, seen, deadline_ns, poll_ns, &caller_policy);
}

int spmd__event_wait_peers_until(spmd__event *e, unsigned seen, int64_t deadline_ns,
                                 int64_t poll_ns)
{
    return wait_until(e, seen, deadline_ns, poll_ns, &peer_policy);
}

void spmd__event_signal(spmd__event *e)
{
    atomic_fetch_add(&e->seq, 1);
    if (atomic_load(&e->sleepers) > 0) {
        pthread_mutex_lock(&e->mutex);
        pthread_cond_broadcast(&e->cond);
        pthread_mutex_unlock(&e->mutex);
    }
}
