/*
 * spmd_ppermute_many: three blocks of different dtypes and shapes (a pytree's leaves) moved by
 * one pairs list, checked against a host reference: a ring, and a partial permutation whose
 * other positions receive zeros in every block. Members whose blocks differ in layout (the same
 * bytes in all) fail alike instead of reading each other's bytes wrongly.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { MAX_DEV = 64 };

typedef struct job {
    int ring;   /* 1: k -> k + 1; 0: only 0 -> 1 (when there are 2 or more) */
    int uneven; /* the device at position 0 describes its first block as (3, 2) */
} job;

static float fv(int pos, int k) { return (float)(pos * 10 + k) + 0.25f; }
static int32_t iv(int pos, int k) { return pos * 1000 + k * 7 - 3; }
static double dv(int pos) { return (double)pos * -1.5 + 0.125; }

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout;
    const job *j = user;
    int me = 0, n = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &me);
    if (st == SPMD_OK)
        st = spmd_axis_size(ctx, "i", &n);
    int64_t s23[2] = {2, 3}, s5[1] = {5};
    spmd_block ins[3], outs[3];
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, s23, SPMD_DTYPE_F32, &ins[0]);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, s5, SPMD_DTYPE_I32, &ins[1]);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 0, NULL, SPMD_DTYPE_F64, &ins[2]);
    for (int b = 0; b < 3 && st == SPMD_OK; b++)
        st = spmd_ctx_alloc(ctx, ins[b].ndim, ins[b].shape, ins[b].dtype, &outs[b]);
    if (st != SPMD_OK)
        return st;
    for (int k = 0; k < 6; k++)
        ((float *)ins[0].data)[k] = fv(me, k);
    for (int k = 0; k < 5; k++)
        ((int32_t *)ins[1].data)[k] = iv(me, k);
    *(double *)ins[2].data = dv(me);
    if (j->uneven && me == 0) { /* same bytes, another layout */
        ins[0].shape[0] = 3, ins[0].shape[1] = 2;
        outs[0].shape[0] = 3, outs[0].shape[1] = 2;
    }
    int pairs[2 * MAX_DEV], npairs = 0;
    for (int k = 0; k < n && (j->ring || k < 1); k++, npairs++)
        pairs[2 * k] = k, pairs[2 * k + 1] = (k + 1) % n;
    st = spmd_ppermute_many(ctx, 3, ins, outs, "i", pairs, npairs);
    if (st != SPMD_OK)
        return st;
    /* out[0] is this device's: (6 floats, 5 ints, 1 double) as received */
    float *o = out[0].data;
    for (int k = 0; k < 6; k++)
        o[k] = ((const float *)outs[0].data)[k];
    for (int k = 0; k < 5; k++)
        o[6 + k] = (float)((const int32_t *)outs[1].data)[k];
    o[11] = (float)*(const double *)outs[2].data;
    return SPMD_OK;
}

int main(void)
{
    int n = spmd_test_init_devices(MAX_DEV);
    float zeros[MAX_DEV] = {0};
    spmd_test_line line = spmd_test_line_create(1, zeros);
    const spmd_out_desc desc = {1, {(int64_t)12 * n}, SPMD_DTYPE_F32};
    float got[12 * MAX_DEV];
    for (int ring = 1; ring >= 0; ring--) {
        job j = {ring, 0};
        spmd_array *y = NULL;
        spmd_status st =
            spmd_shard_map(line.mesh, body, &j, 1, &line.x, (const spmd_spec *[]){line.split}, 1,
                           &desc, (const spmd_spec *[]){line.split}, NULL, &y);
        SPMD_TEST_CHECK(st == SPMD_OK, "ppermute_many (ring %d): %s", ring, spmd_last_error());
        if (st == SPMD_OK)
            st = spmd_process_allgather(y, 1, got, sizeof(float) * 12 * (size_t)n);
        for (int d = 0; st == SPMD_OK && d < n; d++) {
            int from = (d - 1 + n) % n; /* the source of position d */
            int gets = ring || (d == 1 % n && n > 1) || n == 1;
            const float *g = got + 12 * d;
            for (int k = 0; k < 6; k++)
                SPMD_TEST_CHECK(g[k] == (gets ? fv(from, k) : 0.0f),
                                "ring %d: position %d float %d is %g", ring, d, k, g[k]);
            for (int k = 0; k < 5; k++)
                SPMD_TEST_CHECK(g[6 + k] == (gets ? (float)iv(from, k) : 0.0f),
                                "ring %d: position %d int %d is %g", ring, d, k, g[6 + k]);
            SPMD_TEST_CHECK(g[11] == (gets ? (float)dv(from) : 0.0f),
                            "ring %d: position %d double is %g", ring, d, g[11]);
        }
        spmd_array_destroy(y);
    }
    if (n > 1) {
        job j = {1, 1};
        spmd_array *y = NULL;
        spmd_status st =
            spmd_shard_map(line.mesh, body, &j, 1, &line.x, (const spmd_spec *[]){line.split}, 1,
                           &desc, (const spmd_spec *[]){line.split}, NULL, &y);
        SPMD_TEST_CHECK(st == SPMD_ERR_COLLECTIVE_MISMATCH && y == NULL,
                        "blocks of another layout: %s (%s)", spmd_status_name(st),
                        spmd_last_error());
        spmd_array_destroy(y);
    }
    spmd_test_line_destroy(&line);
    return spmd_test_finish(spmd_test_failed_checks());
}
