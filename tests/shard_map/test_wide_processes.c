/*
 * Processes with many devices whose groups cross to other processes: psum over an axis that
 * spans processes, over one within a process, and over both, 200 calls per mesh, every result
 * checked against a host loop. With more devices in a process than a shared-memory ring has
 * slots, some messages between two processes go through MPI. Every 20th call the mesh's first
 * row comes late (the others' messages pile up) and then keeps the cores busy (the waits that
 * remain go on for longer than the notes' first probe): a wait must find a message that came
 * through MPI before a note that its sender went past calls the call a mismatch. Any layout,
 * with devices per process alike or not (mpiexec -n 1 -x SPMD_NUM_CPU_DEVICES=32 prog : -n 1 -x
 * SPMD_NUM_CPU_DEVICES=1 prog). $SPMD_TEST_WIDE_CALLS: calls per mesh; $SPMD_TEST_WIDE_AXES:
 * every psum over these axes ("i", "j", "i,j").
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

#define K 3 /* elements per block */

static int calls = 200;
static const char *only; /* $SPMD_TEST_WIDE_AXES: every call over these axes */

/* The value at mesh position (i, j), element k, of call `call`: small integers, exact sums. */
static float value(int i, int j, int k, int call)
{
    return (float)((i * 7 + j * 13 + k * 3 + call * 5) % 17 - 8);
}

typedef struct job {
    const char *axes; /* psum over these */
    int call;
} job;

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout;
    const job *j = user;
    int i = 0, jj = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &i);
    if (st == SPMD_OK)
        st = spmd_axis_index(ctx, "j", &jj);
    if (st != SPMD_OK)
        return st;
    spmd_block mine;
    st = spmd_ctx_alloc(ctx, out[0].ndim, out[0].shape, SPMD_DTYPE_F32, &mine);
    if (st != SPMD_OK)
        return st;
    if (i == 0 && j->call % 20 == 0) {        /* the first row late: the others' messages pile up */
        struct timespec late = {0, 30000000}; /* 30 ms */
        nanosleep(&late, NULL);
    }
    float *v = mine.data;
    for (int k = 0; k < K; k++)
        v[k] = value(i, jj, k, j->call);
    st = spmd_psum(ctx, &mine, &out[0], j->axes);
    if (i == 0 && j->call % 20 == 0) { /* ... and busy after: the cores are taken */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do
            clock_gettime(CLOCK_MONOTONIC, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 150000000L);
    }
    return st;
}

/* Runs every call on the (I, J) mesh and checks each result; the failures. */
static int run_mesh(int I, int J)
{
    spmd_test_mesh m;
    spmd_test_mesh_build(&m, "wide", 2, (int[]){I, J}, (const char *const[]){"i", "j"}, NULL);
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'i', 'j'", &spec));
    const spmd_out_desc desc = {3, {I, J, K}, SPMD_DTYPE_F32};
    const char *const axes[] = {"i", "j", "i,j"};
    int failures = 0;
    for (int call = 0; call < calls; call++) {
        job j = {only ? only : axes[call % 3], call};
        spmd_array *out = NULL;
        spmd_status st = spmd_shard_map(m.mesh, body, &j, 0, NULL, NULL, 1, &desc,
                                        (const spmd_spec *[]){spec}, NULL, &out);
        SPMD_TEST_CHECK(st == SPMD_OK, "%s: call %d (psum over %s) failed: %s: %s", m.label, call,
                        j.axes, spmd_status_name(st), spmd_last_error());
        if (st != SPMD_OK) {
            failures++;
            break; /* every process failed it: go on to the end together */
        }
        for (int s = 0; s < spmd_array_num_shards(out); s++) {
            spmd_shard sh;
            float got[K];
            assert_ok(spmd_array_shard(out, s, &sh));
            assert_ok(spmd_array_shard_to_host(out, s, got, sizeof got));
            int i = (int)sh.index.start[0], jj = (int)sh.index.start[1];
            for (int k = 0; k < K; k++) {
                float want = 0;
                for (int a = 0; a < I; a++)
                    for (int b = 0; b < J; b++)
                        if ((strchr(j.axes, 'i') || a == i) && (strchr(j.axes, 'j') || b == jj))
                            want += value(a, b, k, call);
                SPMD_TEST_CHECK(got[k] == want,
                                "%s: call %d, psum over %s at (%d, %d)[%d]: %g, "
                                "expected %g",
                                m.label, call, j.axes, i, jj, k, got[k], want);
            }
        }
        spmd_array_destroy(out);
    }
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(m.mesh);
    return failures;
}

int main(void)
{
    const char *env = getenv("SPMD_TEST_WIDE_CALLS");
    if (env)
        calls = atoi(env);
    only = getenv("SPMD_TEST_WIDE_AXES");
    int n = spmd_test_init_devices(SPMD_TEST_MAX_DEVICES);
    int failures = 0;
    /* i across processes (two rows: process halves), and i within a process too */
    if (n % 2 == 0)
        failures += run_mesh(2, n / 2);
    if (!failures && n % 3 == 0)
        failures += run_mesh(3, n / 3);
    if (!failures)
        failures += run_mesh(1, n);
    if (!failures && spmd_process_index() == 0)
        printf("%d devices over %d processes: %d calls per mesh, every result as the host's\n", n,
               spmd_process_count(), calls);
    return spmd_test_finish(failures + spmd_test_failed_checks());
}
