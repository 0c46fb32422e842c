/*
 * Collectives between processes at the sizes where their transport changes: a ring's slot
 * (1,344 bytes with the trailer), a wide slot (65 KiB), MPI beyond (runtime/comm/host_rings.h).
 * At each size around those edges, psum, all_gather, psum_scatter, ppermute (a ring k -> k + 1)
 * and all_to_all run on every device, which compares every element it received with the value a
 * host loop computes. Integers in float32 sum exactly in any order. Run with and without the
 * rings (SPMD_SHM=0) and over several processes and devices per process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { OPS = 5, MAX_DEV = 64 };
static const char *const op_names[OPS] = {"psum", "all_gather", "psum_scatter", "ppermute",
                                          "all_to_all"};

/* Element k of the input of the device at position `pos` (an integer: sums are exact). */
static float value(int pos, int64_t k) { return (float)((pos * 7919 + k * 31) % 4093 - 2000); }

typedef struct job {
    int64_t elems; /* per device, a multiple of the device count */
} job;

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout;
    const job *j = user;
    int me = 0, n = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &me);
    if (st == SPMD_OK)
        st = spmd_axis_size(ctx, "i", &n);
    int64_t len = j->elems, all = len * n, part = len / n;
    spmd_block x, sum, gathered, scattered, moved, swapped;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &len, SPMD_DTYPE_F32, &x);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &len, SPMD_DTYPE_F32, &sum);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &all, SPMD_DTYPE_F32, &gathered);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &part, SPMD_DTYPE_F32, &scattered);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &len, SPMD_DTYPE_F32, &moved);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &len, SPMD_DTYPE_F32, &swapped);
    if (st != SPMD_OK)
        return st;
    float *xs = x.data;
    for (int64_t k = 0; k < len; k++)
        xs[k] = value(me, k);
    int pairs[2 * MAX_DEV];
    for (int k = 0; k < n; k++)
        pairs[2 * k] = k, pairs[2 * k + 1] = (k + 1) % n;
    st = spmd_psum(ctx, &x, &sum, "i");
    if (st == SPMD_OK)
        st = spmd_all_gather(ctx, &x, &gathered, "i", 0, 1);
    if (st == SPMD_OK)
        st = spmd_psum_scatter(ctx, &x, &scattered, "i", 0, 1);
    if (st == SPMD_OK)
        st = spmd_ppermute(ctx, &x, &moved, "i", pairs, n);
    if (st == SPMD_OK)
        st = spmd_all_to_all(ctx, &x, &swapped, "i", 0, 0, 1);
    if (st != SPMD_OK)
        return st;
    int32_t wrong[OPS] = {0};
    const float *s = sum.data, *g = gathered.data, *sc = scattered.data, *m = moved.data,
                *sw = swapped.data;
    for (int64_t k = 0; k < len; k++) { /* the reference: a host loop over the devices */
        float want = 0;
        for (int d = 0; d < n; d++)
            want += value(d, k);
        wrong[0] += s[k] != want;
        if (k >= (int64_t)me * part && k < (int64_t)(me + 1) * part)
            wrong[2] += sc[k - (int64_t)me * part] != want;
    }
    for (int64_t k = 0; k < all; k++)
        wrong[1] += g[k] != value((int)(k / len), k % len);
    for (int64_t k = 0; k < len; k++) {
        wrong[3] += m[k] != value((me - 1 + n) % n, k);
        /* chunk c of this device's output is chunk `me` of device c's input */
        wrong[4] += sw[k] != value((int)(k / part), (int64_t)me * part + k % part);
    }
    memcpy(out[0].data, wrong, sizeof wrong);
    return SPMD_OK;
}

/* Every collective at `bytes` per device (rounded up to whole elements split n ways). */
static void check_size(int n, int64_t bytes)
{
    job j = {0};
    int64_t elems = bytes / 4;
    j.elems = (elems + n - 1) / n * n; /* psum_scatter and all_to_all split it n ways */
    spmd_array *y = spmd_test_each_device(body, &j, sizeof(int32_t) * OPS);
    SPMD_TEST_CHECK(y != NULL, "%lld bytes: %s", (long long)(j.elems * 4), spmd_last_error());
    if (!y)
        return;
    int32_t got[MAX_DEV][OPS];
    spmd_status st = spmd_process_allgather(y, 1, got, sizeof(int32_t) * OPS * (size_t)n);
    SPMD_TEST_CHECK(st == SPMD_OK, "allgather: %s", spmd_last_error());
    for (int d = 0; st == SPMD_OK && d < n; d++)
        for (int op = 0; op < OPS; op++)
            SPMD_TEST_CHECK(got[d][op] == 0,
                            "%lld bytes per device: %s gave device %d %d wrong elements",
                            (long long)(j.elems * 4), op_names[op], d, got[d][op]);
    spmd_array_destroy(y);
}

int main(void)
{
    int n = spmd_test_init_devices(MAX_DEV);
    /* bytes per device: below, at and beyond a slot; within, at and beyond a wide slot; MPI */
    static const int64_t sizes[] = {8,     1024,  1296,  1312,  1344,  1400,   4096,
                                    32768, 65536, 66496, 66560, 66624, 131072, 1 << 20};
    /* the largest size streams its rounds in 64 KiB chunks: repeated, for chunks that could
     * overtake each other (a reader that looks at the slots one after another) */
    size_t nsizes = sizeof sizes / sizeof *sizes;
    for (size_t t = 0; t < nsizes; t++)
        for (int rep = 0; rep < (t + 1 == nsizes ? 16 : 1); rep++)
            check_size(n, sizes[t]);
    return spmd_test_finish(spmd_test_failed_checks());
}
