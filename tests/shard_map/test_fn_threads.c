/*
 * A thread that fn starts may call spmd_shard_map: the call waits for the enclosing call to
 * end (README "Inside fn"), then runs as the process's next call. ROUNDS rounds: the fn of an
 * outer shard_map (psum over 'i') starts, on this process's first device, a thread that
 * psums another array; fn returns without waiting for it. Even rounds join that thread before
 * the next outer call (every call in the same order on every process: all right); odd rounds
 * start the next outer call first (the two threads race: right, or a mismatch on every
 * process). Never a crash, a hang or SPMD_OK with wrong data.
 *
 *   mpirun -np 3 -x SPMD_NUM_CPU_DEVICES=1 test_fn_threads
 */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <spmd.h>

#define ROUNDS 50

static spmd_mesh *g_mesh;
static spmd_spec *g_sharded, *g_replicated;
static spmd_array *g_a, *g_b; /* a[k] = k, b[k] = 100 + k */
static int g_ndev;
static atomic_int g_ok, g_mismatch, g_wrong, g_other;

typedef struct inner {
    pthread_t thread;
    int started;
    spmd_status st;
    double got[2];
    char message[512];
} inner;

static inner g_inner[ROUNDS];
static atomic_int g_round;

static spmd_status fn_psum(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                           void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "i");
}

static spmd_status psum_of(spmd_array *x, double *got)
{
    spmd_out_desc od = {1, {2}, SPMD_DTYPE_F64};
    spmd_array *out = NULL;
    spmd_status st =
        spmd_shard_map(g_mesh, fn_psum, NULL, 1, &x, (const spmd_spec *const *)&g_sharded, 1, &od,
                       (const spmd_spec *const *)&g_replicated, NULL, &out);
    if (st == SPMD_OK)
        st = spmd_array_to_host(out, got, 2 * sizeof *got);
    spmd_array_destroy(out);
    return st;
}

static void *inner_main(void *arg)
{
    inner *in = arg;
    in->st = psum_of(g_b, in->got);
    if (in->st != SPMD_OK)
        snprintf(in->message, sizeof in->message, "%s", spmd_last_error());
    return NULL;
}

static spmd_status fn_outer(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)user;
    spmd_status st = fn_psum(ctx, nin, in, nout, out, NULL);
    int index = -1;
    if (spmd_axis_index(ctx, "i", &index) == SPMD_OK &&
        spmd_ctx_device(ctx) == spmd_local_device_id(0)) { /* this process's first device */
        inner *t = &g_inner[atomic_load(&g_round)];
        t->started = pthread_create(&t->thread, NULL, inner_main, t) == 0;
    }
    return st;
}

static void check(const char *what, spmd_status st, const double *got, double base,
                  const char *message)
{
    double want0 = 0, want1 = 0; /* psum of x[2d + e] over the devices d */
    for (int d = 0; d < g_ndev; d++) {
        want0 += base + 2 * d;
        want1 += base + 2 * d + 1;
    }
    if (st == SPMD_OK && (got[0] != want0 || got[1] != want1)) {
        atomic_fetch_add(&g_wrong, 1);
        SPMD_TEST_CHECK(0, "%s: SPMD_OK with [%g, %g], want [%g, %g]", what, got[0], got[1], want0,
                        want1);
    } else if (st == SPMD_OK) {
        atomic_fetch_add(&g_ok, 1);
    } else if (st == SPMD_ERR_COLLECTIVE_MISMATCH) {
        atomic_fetch_add(&g_mismatch, 1);
        SPMD_TEST_CHECK(strstr(message, "call #") != NULL, "%s: a mismatch naming no call: %s",
                        what, message);
    } else {
        atomic_fetch_add(&g_other, 1);
        SPMD_TEST_CHECK(0, "%s: %s: %s", what, spmd_status_name(st), message);
    }
}

static void join_inner(int r)
{
    if (!g_inner[r].started)
        return;
    pthread_join(g_inner[r].thread, NULL);
    char what[64];
    snprintf(what, sizeof what, "round %d, the thread fn started", r);
    check(what, g_inner[r].st, g_inner[r].got, 100, g_inner[r].message);
}

int main(void)
{
    spmd_test_init();
    g_ndev = spmd_device_count();
    const char *names[1] = {"i"};
    assert_ok(spmd_mesh_create(1, &g_ndev, names, NULL, 0, &g_mesh));
    assert_ok(spmd_spec_parse("'i'", &g_sharded));
    assert_ok(spmd_spec_parse("", &g_replicated));
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create(g_mesh, g_sharded, &sh));
    int64_t n = 2 * (int64_t)g_ndev;
    double a[256], b[256];
    SPMD_TEST_CHECK(n <= 256, "too many devices");
    for (int64_t k = 0; k < n; k++) {
        a[k] = (double)k;
        b[k] = 100.0 + (double)k;
    }
    assert_ok(spmd_device_put(a, 1, &n, SPMD_DTYPE_F64, sh, &g_a));
    assert_ok(spmd_device_put(b, 1, &n, SPMD_DTYPE_F64, sh, &g_b));

    spmd_out_desc od = {1, {2}, SPMD_DTYPE_F64};
    for (int r = 0; r < ROUNDS; r++) {
        atomic_store(&g_round, r);
        spmd_array *out = NULL;
        spmd_status st =
            spmd_shard_map(g_mesh, fn_outer, NULL, 1, &g_a, (const spmd_spec *const *)&g_sharded, 1,
                           &od, (const spmd_spec *const *)&g_replicated, NULL, &out);
        double got[2] = {0, 0};
        char message[512] = "";
        if (st == SPMD_OK)
            assert_ok(spmd_array_to_host(out, got, sizeof got));
        else
            snprintf(message, sizeof message, "%s", spmd_last_error());
        spmd_array_destroy(out);
        char what[64];
        snprintf(what, sizeof what, "round %d, the outer call", r);
        check(what, st, got, 0, message);
        if (r % 2 == 1)
            continue; /* its thread races with the next outer call */
        if (r > 0)
            join_inner(r - 1);
        join_inner(r); /* the thread's call before the next outer one, everywhere */
    }
    join_inner(ROUNDS - 1);
    spmd_status st = spmd_sync_global_devices("after the rounds");
    SPMD_TEST_CHECK(st == SPMD_OK, "the barrier after the rounds failed: %s", spmd_last_error());
    printf("p%d: %d calls right, %d mismatches, %d wrong, %d other failures\n",
           spmd_process_index(), atomic_load(&g_ok), atomic_load(&g_mismatch),
           atomic_load(&g_wrong), atomic_load(&g_other));
    spmd_array_destroy(g_a);
    spmd_array_destroy(g_b);
    spmd_sharding_destroy(sh);
    spmd_spec_destroy(g_sharded);
    spmd_spec_destroy(g_replicated);
    spmd_mesh_destroy(g_mesh);
    return spmd_test_finish(spmd_test_failed_checks());
}
