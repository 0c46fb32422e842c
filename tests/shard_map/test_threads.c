/*
 * Calls from several threads of each process (README "Calls from several threads"): whatever
 * the interleaving, a call returns correct data or fails on every process with a mismatch that
 * names the other call; never SPMD_OK with another call's data, never a crash or a hang, every
 * failure within the collective timeout and its grace.
 *
 * Each of THREADS threads per process makes CALLS calls, chosen by (thread, iteration) alike on
 * every process: shard_map with a psum and with an all_gather (on one mesh, or on one of two
 * meshes over the same devices), spmd_reshard, spmd_process_allgather and spmd_device_put, of
 * data that depends on the thread and the iteration. Every result is checked against a host
 * loop. Modes (argv[1]):
 *   same     unnamed threads psumming one shared array (issue's point 1): every result right
 *   named    named threads, each its own data, one mesh: right, or a mismatch
 *   meshes   the same over two meshes of the same devices
 *   mixed    named threads mixing every kind of call above
 *
 *   mpirun -np 2 -x SPMD_NUM_CPU_DEVICES=2 -x SPMD_COLLECTIVE_TIMEOUT=3 test_threads mixed
 */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <spmd.h>

#define THREADS 4
#define BLOCK 2 /* elements of each device's block */

static int g_ndev, g_mode_named, g_calls = 200;
static double g_timeout = 300, g_bound;
static spmd_mesh *g_mesh[2];
static spmd_array *g_data[THREADS]; /* thread t's array: value 1000 t + k at k */
static spmd_array *g_shared;
static const char *g_mode;

static atomic_int g_ok, g_mismatch, g_other, g_wrong, g_slow;
static _Atomic double g_slowest;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double value_of(int t, int iteration, int64_t k)
{
    return 1000.0 * t + 10.0 * (iteration % 7) + (double)k;
}

static spmd_status fn_psum(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                           void *user)
{
    (void)nin, (void)nout;
    return spmd_psum(ctx, &in[0], &out[0], (const char *)user);
}

static spmd_status fn_gather(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    return spmd_all_gather_invariant(ctx, &in[0], &out[0], (const char *)user, 0, 1);
}

/* A failure must be a mismatch (or a timeout), end within the bound and name a call. */
static void failed(int t, int i, const char *what, spmd_status st, double took)
{
    const char *msg = spmd_last_error();
    if (took > g_bound) {
        atomic_fetch_add(&g_slow, 1);
        fprintf(stderr, "p%d thread %d call %d (%s): failed after %.2f s > %.2f s: %s\n",
                spmd_process_index(), t, i, what, took, g_bound, msg);
    }
    double slowest = atomic_load(&g_slowest);
    while (took > slowest && !atomic_compare_exchange_weak(&g_slowest, &slowest, took))
        ;
    /* a thread's calls on two processes may pair a few iterations apart after calls failed:
     * device_put's check of the data is the mismatch then */
    int put_check = st == SPMD_ERR_INVALID_ARGUMENT && strstr(msg, "not the same on each process");
    if (st == SPMD_ERR_COLLECTIVE_MISMATCH || put_check) {
        atomic_fetch_add(&g_mismatch, 1);
        SPMD_TEST_CHECK(strstr(msg, "call #") != NULL,
                        "thread %d call %d (%s): a mismatch that names no call: %s", t, i, what,
                        msg);
    } else {
        atomic_fetch_add(&g_other, 1);
        fprintf(stderr, "p%d thread %d call %d (%s): %s: %s\n", spmd_process_index(), t, i, what,
                spmd_status_name(st), msg);
    }
}

static void check_values(int t, int i, const char *what, const double *got, const double *want,
                         int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        if (got[k] != want[k]) {
            atomic_fetch_add(&g_wrong, 1);
            SPMD_TEST_CHECK(0,
                            "p%d thread %d call %d (%s): SPMD_OK with element %lld = %g, "
                            "want %g",
                            spmd_process_index(), t, i, what, (long long)k, got[k], want[k]);
            return;
        }
    atomic_fetch_add(&g_ok, 1);
}

/* shard_map over mesh m: psum (gather = 0) or all_gather of thread t's array x. */
static void call_shard_map(int t, int i, int m, int gather, spmd_array *x, int xt)
{
    const char *axis = m ? "j" : "i";
    spmd_spec *in_spec = NULL, *out_spec = NULL;
    char spec[8];
    snprintf(spec, sizeof spec, "'%s'", axis);
    assert_ok(spmd_spec_parse(spec, &in_spec));
    assert_ok(spmd_spec_parse("", &out_spec));
    int64_t n = gather ? (int64_t)g_ndev * BLOCK : BLOCK;
    spmd_out_desc od = {1, {n}, SPMD_DTYPE_F64};
    spmd_array *out = NULL;
    /* the input lives on mesh 0; mesh 1 has the same devices in the same order */
    spmd_array *input = x;
    spmd_sharding *sh = NULL;
    if (m) {
        assert_ok(spmd_sharding_create(g_mesh[1], in_spec, &sh));
        spmd_array *moved = NULL;
        spmd_status st = spmd_reshard(x, sh, NULL, &moved);
        spmd_sharding_destroy(sh);
        if (st != SPMD_OK) {
            failed(t, i, "reshard onto mesh j", st, 0);
            spmd_spec_destroy(in_spec);
            spmd_spec_destroy(out_spec);
            return;
        }
        input = moved;
    }
    double t0 = now_s();
    spmd_status st = spmd_shard_map(g_mesh[m], gather ? fn_gather : fn_psum, (void *)axis, 1,
                                    &input, (const spmd_spec *const *)&in_spec, 1, &od,
                                    (const spmd_spec *const *)&out_spec, NULL, &out);
    double took = now_s() - t0;
    const char *what = gather ? "shard_map all_gather" : "shard_map psum";
    if (st != SPMD_OK) {
        failed(t, i, what, st, took);
    } else {
        double got[64], want[64];
        assert_ok(spmd_array_to_host(out, got, sizeof got));
        for (int64_t k = 0; k < n; k++) {
            if (gather) {
                want[k] = value_of(xt, 0, k);
            } else {
                want[k] = 0;
                for (int d = 0; d < g_ndev; d++)
                    want[k] += value_of(xt, 0, d * BLOCK + k);
            }
        }
        check_values(t, i, what, got, want, n);
    }
    spmd_array_destroy(out);
    if (input != x)
        spmd_array_destroy(input);
    spmd_spec_destroy(in_spec);
    spmd_spec_destroy(out_spec);
}

static void call_reshard(int t, int i)
{
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create_parse(g_mesh[0], "", &sh));
    spmd_array *out = NULL;
    double t0 = now_s();
    spmd_status st = spmd_reshard(g_data[t], sh, NULL, &out);
    double took = now_s() - t0;
    if (st != SPMD_OK) {
        failed(t, i, "spmd_reshard", st, took);
    } else {
        int64_t n = (int64_t)g_ndev * BLOCK;
        double got[64], want[64];
        assert_ok(spmd_array_to_host(out, got, sizeof got));
        for (int64_t k = 0; k < n; k++)
            want[k] = value_of(t, 0, k);
        check_values(t, i, "spmd_reshard", got, want, n);
    }
    spmd_array_destroy(out);
    spmd_sharding_destroy(sh);
}

static void call_allgather(int t, int i)
{
    int64_t n = (int64_t)g_ndev * BLOCK;
    double got[64], want[64];
    double t0 = now_s();
    spmd_status st = spmd_process_allgather(g_data[t], 1, got, sizeof got);
    double took = now_s() - t0;
    if (st != SPMD_OK) {
        failed(t, i, "spmd_process_allgather", st, took);
        return;
    }
    for (int64_t k = 0; k < n; k++)
        want[k] = value_of(t, 0, k);
    check_values(t, i, "spmd_process_allgather", got, want, n);
}

static void call_device_put(int t, int i)
{
    int64_t n = (int64_t)g_ndev * BLOCK;
    double host[64], got[64];
    for (int64_t k = 0; k < n; k++)
        host[k] = value_of(t, i, k);
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create_parse(g_mesh[0], "'i'", &sh));
    spmd_array *a = NULL;
    double t0 = now_s();
    spmd_status st = spmd_device_put(host, 1, &n, SPMD_DTYPE_F64, sh, &a);
    double took = now_s() - t0;
    if (st != SPMD_OK) {
        failed(t, i, "spmd_device_put", st, took);
    } else {
        /* this process's blocks hold what was put */
        int ok = 1;
        for (int s = 0; s < spmd_array_num_shards(a) && ok; s++) {
            spmd_shard info;
            assert_ok(spmd_array_shard(a, s, &info));
            assert_ok(spmd_array_shard_to_host(a, s, got, sizeof got));
            for (int64_t k = 0; k < BLOCK; k++)
                ok &= got[k] == host[info.index.start[0] + k];
        }
        double one = ok ? 1 : 0, want = 1;
        check_values(t, i, "spmd_device_put", &one, &want, 1);
    }
    spmd_array_destroy(a);
    spmd_sharding_destroy(sh);
}

static void *thread_main(void *arg)
{
    int t = (int)(intptr_t)arg;
    if (g_mode_named) {
        char name[16];
        snprintf(name, sizeof name, "worker%d", t);
        assert_ok(spmd_thread_set_name(name));
    }
    for (int i = 0; i < g_calls; i++) {
        if (strcmp(g_mode, "same") == 0) {
            call_shard_map(t, i, 0, 0, g_shared, 0);
        } else if (strcmp(g_mode, "named") == 0) {
            call_shard_map(t, i, 0, i % 2, g_data[t], t);
        } else if (strcmp(g_mode, "meshes") == 0) {
            call_shard_map(t, i, t % 2, i % 2, g_data[t], t);
        } else {
            switch ((t + i) % 6) {
            case 0:
                call_shard_map(t, i, 0, 0, g_data[t], t);
                break;
            case 1:
                call_shard_map(t, i, 1, 1, g_data[t], t);
                break;
            case 2:
                call_reshard(t, i);
                break;
            case 3:
                call_allgather(t, i);
                break;
            case 4:
                call_device_put(t, i);
                break;
            default:
                call_shard_map(t, i, 0, 1, g_data[t], t);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    spmd_test_init();
    g_mode = argc > 1 ? argv[1] : "mixed";
    g_mode_named = strcmp(g_mode, "same") != 0;
    const char *calls = getenv("TEST_THREADS_CALLS");
    if (calls)
        g_calls = atoi(calls);
    const char *timeout = getenv("SPMD_COLLECTIVE_TIMEOUT");
    if (timeout)
        g_timeout = atof(timeout);
    double grace = g_timeout / 10 > 0.5 ? g_timeout / 10 : 0.5;
    g_bound = g_timeout + grace + 0.5; /* the slack: scheduling on an oversubscribed machine */
    g_ndev = spmd_device_count();
    if (g_ndev * BLOCK > 64) {
        printf("skipped: %d devices are more than this test's buffers hold\n", g_ndev);
        return SPMD_TEST_SKIP;
    }
    const char *names[2] = {"i", "j"};
    for (int m = 0; m < 2; m++) {
        int shape = g_ndev;
        assert_ok(spmd_mesh_create(1, &shape, &names[m], NULL, 0, &g_mesh[m]));
    }
    spmd_spec *spec = NULL;
    spmd_sharding *sh = NULL;
    assert_ok(spmd_spec_parse("'i'", &spec));
    assert_ok(spmd_sharding_create(g_mesh[0], spec, &sh));
    int64_t n = (int64_t)g_ndev * BLOCK;
    for (int t = 0; t < THREADS; t++) {
        double host[64];
        for (int64_t k = 0; k < n; k++)
            host[k] = value_of(t, 0, k);
        assert_ok(spmd_device_put(host, 1, &n, SPMD_DTYPE_F64, sh, &g_data[t]));
    }
    g_shared = g_data[0];

    double start = now_s();
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        SPMD_TEST_CHECK(pthread_create(&threads[t], NULL, thread_main, (void *)(intptr_t)t) == 0,
                        "pthread_create");
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    double took = now_s() - start;

    /* whatever happened, the processes still agree: a barrier from the main thread */
    spmd_status st = spmd_sync_global_devices("after the threads");
    SPMD_TEST_CHECK(st == SPMD_OK, "the barrier after the threads failed: %s", spmd_last_error());

    printf("p%d mode %s: %d calls: ok %d, mismatch %d, other %d, wrong %d, over the bound %d "
           "(slowest failure %.2f s, bound %.2f s), %.1f s in all\n",
           spmd_process_index(), g_mode, THREADS * g_calls, atomic_load(&g_ok),
           atomic_load(&g_mismatch), atomic_load(&g_other), atomic_load(&g_wrong),
           atomic_load(&g_slow), atomic_load(&g_slowest), g_bound, took);
    SPMD_TEST_CHECK(atomic_load(&g_wrong) == 0, "calls returned SPMD_OK with wrong data");
    SPMD_TEST_CHECK(atomic_load(&g_slow) == 0, "failures took longer than timeout + grace");
    SPMD_TEST_CHECK(atomic_load(&g_other) == 0, "failures other than mismatches");
    if (strcmp(g_mode, "same") == 0)
        SPMD_TEST_CHECK(atomic_load(&g_ok) == THREADS * g_calls,
                        "identical calls from unnamed threads must all succeed");
    for (int t = 0; t < THREADS; t++)
        spmd_array_destroy(g_data[t]);
    spmd_sharding_destroy(sh);
    spmd_spec_destroy(spec);
    for (int m = 0; m < 2; m++)
        spmd_mesh_destroy(g_mesh[m]);
    return spmd_test_finish(spmd_test_failed_checks());
}
