/*
 * Streams given up half way leave nothing behind: a shard_map's groups stream a large psum
 * between the same two processes at once (a 2-D mesh, psum over the processes' axis 'p'), and
 * the last device of the last process fails in fn a few milliseconds in, so that every process
 * abandons the call while chunks are on their way (a chunk may still reach a reader that gave
 * up: runtime/comm/host_rings.c empties it). Each failed call is followed by a good one on the
 * same mesh, every element checked against a host loop: a chunk left in a slot would make it
 * time out (its slot never freed) or take another call's data. Run with a short
 * SPMD_COLLECTIVE_TIMEOUT, so that a leftover shows as a failure, not a hang.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

enum { CYCLES = 12, ELEMS = 4 << 20 }; /* 16 MiB of float32 per device: 256 chunks a round */

/* Element k of the block of the device at (p, d): an integer, so sums are exact. */
static float value(int p, int d, int64_t k) { return (float)((p * 131 + d * 17 + k * 7) % 1021); }

typedef struct job {
    int fail;           /* the last device of the last process fails ... */
    long fail_after_ns; /* ... this long after the call starts (each cycle another point) */
} job;

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout;
    const job *j = user;
    int p = 0, np = 0, d = 0, nd = 0;
    spmd_status st = spmd_axis_index(ctx, "p", &p);
    if (st == SPMD_OK)
        st = spmd_axis_size(ctx, "p", &np);
    if (st == SPMD_OK)
        st = spmd_axis_index(ctx, "d", &d);
    if (st == SPMD_OK)
        st = spmd_axis_size(ctx, "d", &nd);
    if (st != SPMD_OK)
        return st;
    if (j->fail && p == np - 1 && d == nd - 1) {
        struct timespec pause = {0, j->fail_after_ns}; /* the other groups' streams under way */
        nanosleep(&pause, NULL);
        return SPMD_ERR_INVALID_ARGUMENT;
    }
    int64_t len = ELEMS;
    spmd_block x, sum;
    st = spmd_ctx_alloc(ctx, 1, &len, SPMD_DTYPE_F32, &x);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &len, SPMD_DTYPE_F32, &sum);
    if (st != SPMD_OK)
        return st;
    float *xs = x.data;
    for (int64_t k = 0; k < len; k++)
        xs[k] = value(p, d, k);
    st = spmd_psum(ctx, &x, &sum, "p");
    if (st != SPMD_OK)
        return st;
    int32_t wrong = 0;
    const float *s = sum.data;
    for (int64_t k = 0; k < len; k++) {
        float want = 0;
        for (int q = 0; q < np; q++)
            want += value(q, d, k);
        wrong += s[k] != want;
    }
    memcpy(out[0].data, &wrong, sizeof wrong);
    return SPMD_OK;
}

int main(void)
{
    spmd_test_init();
    int shape[2] = {spmd_process_count(), spmd_local_device_count()};
    if (shape[0] < 2 || shape[1] < 2) {
        printf("skipped: needs 2 or more processes of 2 or more devices\n");
        spmd_test_finish(0);
        return SPMD_TEST_SKIP;
    }
    const char *names[2] = {"p", "d"};
    int n = shape[0] * shape[1];
    spmd_mesh *mesh = NULL;
    spmd_spec *split = NULL;
    assert_ok(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    assert_ok(spmd_spec_parse("('p', 'd')", &split));
    const spmd_out_desc desc = {1, {(int64_t)n}, SPMD_DTYPE_I32};
    for (int cycle = 0; cycle < CYCLES; cycle++) {
        for (int fail = 1; fail >= 0; fail--) {
            job j = {fail, 2000000L * (cycle + 1)};
            spmd_array *y = NULL;
            spmd_status st = spmd_shard_map(mesh, body, &j, 0, NULL, NULL, 1, &desc,
                                            (const spmd_spec *[]){split}, NULL, &y);
            if (fail) { /* every process fails the call, whichever way it heard of it */
                SPMD_TEST_CHECK(st != SPMD_OK, "cycle %d: the failing call returned OK", cycle);
                SPMD_TEST_CHECK(st != SPMD_ERR_TIMEOUT, "cycle %d: the failing call timed out: %s",
                                cycle, spmd_last_error());
                spmd_array_destroy(y);
                continue;
            }
            SPMD_TEST_CHECK(st == SPMD_OK, "cycle %d: the call after a failed one: %s: %s", cycle,
                            spmd_status_name(st), spmd_last_error());
            if (st != SPMD_OK)
                break;
            int32_t got[64];
            st = spmd_process_allgather(y, 1, got, sizeof(int32_t) * (size_t)n);
            SPMD_TEST_CHECK(st == SPMD_OK, "allgather: %s", spmd_last_error());
            for (int k = 0; st == SPMD_OK && k < n; k++)
                SPMD_TEST_CHECK(got[k] == 0, "cycle %d: device %d has %d wrong sums", cycle, k,
                                got[k]);
            spmd_array_destroy(y);
        }
    }
    spmd_spec_destroy(split);
    spmd_mesh_destroy(mesh);
    return spmd_test_finish(spmd_test_failed_checks());
}
