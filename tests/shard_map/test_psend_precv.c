/*
 * spmd_psend / spmd_precv (JAX's lax.psend / lax.precv): a pipeline step on a line of devices
 * (each sends its activations to the next stage, overwrites them, then receives the previous
 * stage's, its precv listing the pairs in another order), a partial permutation whose other
 * positions receive zeros, two sends waiting at once received oldest first, and the refusals: a
 * precv with no psend, a precv whose pairs differ from its psend's, a psend that no precv takes
 * (the call fails, naming the device), and a psend whose pairs repeat a source after a good
 * psend and precv in the same call. Values checked against a host reference.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { MAX_DEV = 64, PER = 6 };

typedef enum {
    PIPELINE,
    PARTIAL,
    TWO_WAITING,
    LOOP,
    NO_SEND,
    OTHER_PAIRS,
    NO_RECV,
    BAD_PAIRS
} mode;

enum { STEPS = 40 };

static float act(int stage, int k) { return (float)(stage * 100 + k) + 0.5f; }
static float grad(int stage, int k) { return -(float)(stage * 10 + k) - 0.25f; }

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout;
    mode m = *(const mode *)user;
    int p = 0, n = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &p);
    if (st == SPMD_OK)
        st = spmd_axis_size(ctx, "i", &n);
    int64_t shape[1] = {PER};
    spmd_block a, g, ra, rg;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_F32, &a);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_F32, &g);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_F32, &ra);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_F32, &rg);
    if (st != SPMD_OK)
        return st;
    for (int k = 0; k < PER; k++) {
        ((float *)a.data)[k] = act(p, k);
        ((float *)g.data)[k] = grad(p, k);
        ((float *)ra.data)[k] = ((float *)rg.data)[k] = 7.0f; /* to be overwritten */
    }
    int forward[2 * MAX_DEV], reordered[2 * MAX_DEV], backward[2 * MAX_DEV], nf = 0;
    for (int k = 0; k < n; k++, nf++) { /* a ring forward (also listed last pair first), back */
        forward[2 * k] = k, forward[2 * k + 1] = (k + 1) % n;
        reordered[2 * (n - 1 - k)] = k, reordered[2 * (n - 1 - k) + 1] = (k + 1) % n;
        backward[2 * k] = (k + 1) % n, backward[2 * k + 1] = k;
    }
    const int first_only[2] = {0, 1 % n};
    switch (m) {
    case PIPELINE:
        st = spmd_psend(ctx, &a, "i", forward, nf);
        for (int k = 0; k < PER; k++) /* the send kept its own copy */
            ((float *)a.data)[k] = -1.0f;
        if (st == SPMD_OK) /* the same permutation, its pairs in another order */
            st = spmd_precv(ctx, &ra, "i", reordered, nf);
        break;
    case PARTIAL:
        st = spmd_psend(ctx, &a, "i", first_only, 1);
        if (st == SPMD_OK)
            st = spmd_precv(ctx, &ra, "i", first_only, 1);
        break;
    case TWO_WAITING:
        st = spmd_psend(ctx, &a, "i", forward, nf);
        if (st == SPMD_OK)
            st = spmd_psend(ctx, &g, "i", backward, nf);
        if (st == SPMD_OK)
            st = spmd_precv(ctx, &ra, "i", forward, nf);
        if (st == SPMD_OK)
            st = spmd_precv(ctx, &rg, "i", backward, nf);
        break;
    case LOOP: /* a pipeline's steps, blocks of two sizes: the sends' copies are reused */
        for (int step = 0; st == SPMD_OK && step < STEPS; step++) {
            spmd_block x = a;
            x.shape[0] = step % 2 ? PER / 2 : PER;
            for (int k = 0; k < PER; k++)
                ((float *)a.data)[k] = act(p, k) + (float)step;
            st = spmd_psend(ctx, &x, "i", forward, nf);
            for (int k = 0; k < PER; k++)
                ((float *)a.data)[k] = -1.0f;
            spmd_block r = ra;
            r.shape[0] = x.shape[0];
            if (st == SPMD_OK)
                st = spmd_precv(ctx, &r, "i", forward, nf);
            for (int k = 0; st == SPMD_OK && k < x.shape[0]; k++)
                if (((float *)r.data)[k] != act((p - 1 + n) % n, k) + (float)step)
                    ((float *)rg.data)[0] = -1.0f; /* a wrong step shows in the second block */
        }
        break;
    case NO_SEND:
        return spmd_precv(ctx, &ra, "i", forward, nf);
    case OTHER_PAIRS:
        st = spmd_psend(ctx, &a, "i", forward, nf);
        return st == SPMD_OK ? spmd_precv(ctx, &ra, "i", NULL, 0) : st; /* no pairs */
    case NO_RECV:
        return spmd_psend(ctx, &a, "i", forward, nf);
    case BAD_PAIRS: { /* a good psend and precv first: its pairs' check is kept for the call */
        st = spmd_psend(ctx, &a, "i", forward, nf);
        if (st == SPMD_OK)
            st = spmd_precv(ctx, &ra, "i", forward, nf);
        const int repeated[] = {0, 0, 0, 1}; /* source 0 twice */
        return st == SPMD_OK ? spmd_psend(ctx, &a, "i", repeated, 2) : st;
    }
    }
    if (st != SPMD_OK)
        return st;
    float *o = out[0].data;
    memcpy(o, ra.data, sizeof(float) * PER);
    memcpy(o + PER, rg.data, sizeof(float) * PER);
    return SPMD_OK;
}

static spmd_status run(spmd_test_line *line, mode m, int n, float *got)
{
    const spmd_out_desc desc = {1, {(int64_t)2 * PER * n}, SPMD_DTYPE_F32};
    spmd_array *y = NULL;
    spmd_status st =
        spmd_shard_map(line->mesh, body, &m, 1, &line->x, (const spmd_spec *[]){line->split}, 1,
                       &desc, (const spmd_spec *[]){line->split}, NULL, &y);
    if (st == SPMD_OK)
        st = spmd_process_allgather(y, 1, got, sizeof(float) * 2 * PER * (size_t)n);
    spmd_array_destroy(y);
    return st;
}

int main(void)
{
    int n = spmd_test_init_devices(MAX_DEV);
    float zeros[MAX_DEV] = {0};
    spmd_test_line line = spmd_test_line_create(1, zeros);
    static float got[2 * PER * MAX_DEV];
    for (mode m = PIPELINE; m <= LOOP; m++) {
        spmd_status st = run(&line, m, n, got);
        SPMD_TEST_CHECK(st == SPMD_OK, "mode %d: %s", (int)m, spmd_last_error());
        for (int d = 0; st == SPMD_OK && d < n; d++) {
            const float *r = got + 2 * PER * d;
            int prev = (d - 1 + n) % n, next = (d + 1) % n;
            int gets = m != PARTIAL || d == 1 % n;
            for (int k = 0; k < PER; k++) {
                /* LOOP: the last step (odd) sent the first PER / 2 elements */
                float want = !gets ? 0.0f : act(prev, k);
                if (m == LOOP)
                    want = k < PER / 2 ? act(prev, k) + (float)(STEPS - 1)
                                       : act(prev, k) + (float)(STEPS - 2);
                SPMD_TEST_CHECK(r[k] == want, "mode %d: position %d element %d is %g, want %g",
                                (int)m, d, k, r[k], want);
                float want_g = m == TWO_WAITING ? grad(next, k) : 7.0f;
                SPMD_TEST_CHECK(r[PER + k] == want_g,
                                "mode %d: position %d second block %d is %g, want %g", (int)m, d, k,
                                r[PER + k], want_g);
            }
        }
    }
    spmd_status st = run(&line, NO_SEND, n, got);
    SPMD_TEST_CHECK(st == SPMD_ERR_INVALID_ARGUMENT && strstr(spmd_last_error(), "spmd_precv") &&
                        strstr(spmd_last_error(), "no spmd_psend"),
                    "precv without psend: %s (%s)", spmd_status_name(st), spmd_last_error());
    st = run(&line, OTHER_PAIRS, n, got);
    SPMD_TEST_CHECK(st == SPMD_ERR_INVALID_ARGUMENT && strstr(spmd_last_error(), "differ"),
                    "precv with other pairs: %s (%s)", spmd_status_name(st), spmd_last_error());
    st = run(&line, NO_RECV, n, got);
    SPMD_TEST_CHECK(st == SPMD_ERR_INVALID_ARGUMENT && strstr(spmd_last_error(), "no spmd_precv") &&
                        strstr(spmd_last_error(), "device"),
                    "psend without precv: %s (%s)", spmd_status_name(st), spmd_last_error());
    st = run(&line, BAD_PAIRS, n, got);
    SPMD_TEST_CHECK(st == SPMD_ERR_INVALID_ARGUMENT && strstr(spmd_last_error(), "spmd_psend") &&
                        strstr(spmd_last_error(), "unique"),
                    "psend with a repeated source: %s (%s)", spmd_status_name(st),
                    spmd_last_error());
    /* the runtime is still usable */
    st = run(&line, PIPELINE, n, got);
    SPMD_TEST_CHECK(st == SPMD_OK, "after the refusals: %s", spmd_last_error());
    spmd_test_line_destroy(&line);
    return spmd_test_finish(spmd_test_failed_checks());
}
