/*
 * bench_wakeup: the machine's cost of handing work between two threads, which every in-process
 * collective pays at each rendezvous of its device threads, without libspmd: two plain threads
 * pass a token back and forth through a mutex and condition variable, each waiting for its
 * turn (a) as libspmd's waits do by default (64 yields, then blocking) and (b) blocking at once.
 * Per round trip: the median, the 99th percentile, the worst, and how many took over 50 us and
 * over 1 ms. Where blocked threads wake slowly (a virtual machine whose idle cores halt), (b)
 * shows it, and (a)'s tail shows how often a collective meets it: the swings of the in-process
 * rows that are the machine's, not libspmd's.
 *
 *   bench_wakeup [--trips N]
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"

typedef struct baton {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    atomic_int turn;
    int yields; /* before a wait blocks */
    int trips;
} baton;

static void wait_turn(baton *b, int me)
{
    for (int i = 0; i < b->yields; i++) {
        if (atomic_load(&b->turn) == me)
            return;
        sched_yield();
    }
    pthread_mutex_lock(&b->mutex);
    while (atomic_load(&b->turn) != me)
        pthread_cond_wait(&b->cond, &b->mutex);
    pthread_mutex_unlock(&b->mutex);
}

static void pass_to(baton *b, int other)
{
    pthread_mutex_lock(&b->mutex);
    atomic_store(&b->turn, other);
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->mutex);
}

static void *partner(void *arg)
{
    baton *b = arg;
    for (int i = 0; i < b->trips; i++) {
        wait_turn(b, 1);
        pass_to(b, 0);
    }
    return NULL;
}

static void measure(int yields, int trips)
{
    baton b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, yields, trips};
    double *us = malloc((size_t)trips * sizeof *us);
    pthread_t t;
    if (!us || pthread_create(&t, NULL, partner, &b) != 0) {
        fprintf(stderr, "bench_wakeup: out of memory or threads\n");
        exit(1);
    }
    int over_50us = 0, over_1ms = 0;
    for (int i = 0; i < trips; i++) {
        double t0 = bench_now_s();
        pass_to(&b, 1);
        wait_turn(&b, 0);
        us[i] = (bench_now_s() - t0) * 1e6;
        over_50us += us[i] > 50;
        over_1ms += us[i] > 1000;
    }
    pthread_join(t, NULL);
    double worst = bench_quantile(us, trips, 1.0), p99 = bench_quantile(us, trips, 0.99);
    printf("  %-22s %10.2f %10.2f %10.0f %10d %10d\n",
           yields ? "64 yields, then block" : "block at once", bench_quantile(us, trips, 0.5), p99,
           worst, over_50us, over_1ms);
    free(us);
}

int main(int argc, char **argv)
{
    int trips = 20000;
    static const struct option opts[] = {{"trips", required_argument, NULL, 't'}, {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c != 't' || (trips = atoi(optarg)) < 1) {
            fprintf(stderr, "usage: bench_wakeup [--trips N]\n");
            return 2;
        }
    }
    printf("# bench_wakeup: a token between two threads, %d round trips (us)\n", trips);
    printf("# %-22s %10s %10s %10s %10s %10s\n", "wait", "median", "p99", "worst", ">50us", ">1ms");
    measure(64, trips);
    measure(0, trips);
    return 0;
}
