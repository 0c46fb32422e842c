/*
 * Collectives between processes at the sizes where their transport changes: a ring's slot
 * (1,344 bytes with the trailer), a wide slot (65 KiB), MPI beyond (runtime/comm/host_rings.h);
 * and where two processes' reductions go in halves (32-64 KiB without the rings, a
 * reduce-scatter's up to 128 KiB: runtime/comm/check_mpi.c).
 * At each size around those edges, psum, all_gather, psum_scatter, ppermute (a ring k -> k + 1)
 * and all_to_all run on every device, which compares every element it received with the value a
 * host loop computes. Integers in float32 sum exactly in any order. Run with and without the
 * rings (SPMD_SHM=0) and over several processes and devices per process. With several devices
 * per process, the same collectives also run over an axis across the processes in a 2-D mesh:
 * each device of a process is in a group of its own, and the groups' large reductions stream
 * between the same two processes at once (each must get its own group's data). Large
 * all_to_alls of 2-D blocks, split along their rows or their columns, send boxes that are not
 * contiguous (a streamed message gathers and scatters them chunk by chunk). An all_gather of
 * 32 MiB of output (past a last-level cache; written through the caches since stop 84). A process
 * late by 20 ms at 48 and 64 KiB makes its partner wait for the halves. A mesh of the devices in
 * reverse order puts each process's blocks out of process order. Messages of 32-64 KiB, which
 * go either way between two processes of one machine, repeated until both ways ran.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

enum { OPS = 5, MAX_DEV = 64 };
static const char *const op_names[OPS] = {"psum", "all_gather", "psum_scatter", "ppermute",
                                          "all_to_all"};
static const char *const op_names_2d[OPS] = {"all_to_all split along the columns",
                                             "all_to_all split along the rows", "", "", ""};

/* Element k of the input of the device at position `pos` (an integer: sums are exact). */
static float value(int pos, int64_t k) { return (float)((pos * 7919 + k * 31) % 4093 - 2000); }

typedef struct job {
    int64_t elems;     /* per device, a multiple of the device count */
    const char *axis;  /* the collectives' */
    const char *other; /* the mesh's other axis (NULL: none): which group the device is in */
    int late_process;  /* whose devices come late to the collectives (-1: none) ... */
    long late_ns;      /* ... by this long */
} job;

/* The device's index along the job's axis, the axis's size, and its group's first value
 * (each group's values its own). */
static spmd_status place(spmd_ctx *ctx, const job *j, int *me, int *n, int *base)
{
    int group = 0;
    spmd_status st = spmd_axis_index(ctx, j->axis, me);
    if (st == SPMD_OK)
        st = spmd_axis_size(ctx, j->axis, n);
    if (st == SPMD_OK && j->other)
        st = spmd_axis_index(ctx, j->other, &group);
    *base = group * MAX_DEV;
    return st;
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout;
    const job *j = user;
    int me = 0, n = 0, base = 0;
    spmd_status st = place(ctx, j, &me, &n, &base);
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
        xs[k] = value(base + me, k);
    int pairs[2 * MAX_DEV];
    for (int k = 0; k < n; k++)
        pairs[2 * k] = k, pairs[2 * k + 1] = (k + 1) % n;
    if (j->late_ns && spmd_process_index() == j->late_process) {
        struct timespec late = {0, j->late_ns};
        nanosleep(&late, NULL);
    }
    st = spmd_psum(ctx, &x, &sum, j->axis);
    if (st == SPMD_OK)
        st = spmd_all_gather(ctx, &x, &gathered, j->axis, 0, 1);
    if (st == SPMD_OK)
        st = spmd_psum_scatter(ctx, &x, &scattered, j->axis, 0, 1);
    if (st == SPMD_OK)
        st = spmd_ppermute(ctx, &x, &moved, j->axis, pairs, n);
    if (st == SPMD_OK)
        st = spmd_all_to_all(ctx, &x, &swapped, j->axis, 0, 0, 1);
    if (st != SPMD_OK)
        return st;
    int32_t wrong[OPS] = {0};
    const float *s = sum.data, *g = gathered.data, *sc = scattered.data, *m = moved.data,
                *sw = swapped.data;
    for (int64_t k = 0; k < len; k++) { /* the reference: a host loop over the devices */
        float want = 0;
        for (int d = 0; d < n; d++)
            want += value(base + d, k);
        wrong[0] += s[k] != want;
        if (k >= (int64_t)me * part && k < (int64_t)(me + 1) * part)
            wrong[2] += sc[k - (int64_t)me * part] != want;
    }
    for (int64_t k = 0; k < all; k++)
        wrong[1] += g[k] != value(base + (int)(k / len), k % len);
    for (int64_t k = 0; k < len; k++) {
        wrong[3] += m[k] != value(base + (me - 1 + n) % n, k);
        /* chunk c of this device's output is chunk `me` of device c's input */
        wrong[4] += sw[k] != value(base + (int)(k / part), (int64_t)me * part + k % part);
    }
    memcpy(out[0].data, wrong, sizeof wrong);
    return SPMD_OK;
}

/* all_to_all of 2-D blocks (2n rows of C columns), split along the columns into the rows and
 * along the rows into the columns: the counts of wrong elements, in out[0]'s first two. */
static spmd_status body_2d(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                           void *user)
{
    (void)nin, (void)in, (void)nout;
    const job *j = user;
    int me = 0, n = 0, base = 0;
    spmd_status st = place(ctx, j, &me, &n, &base);
    int64_t R = 2 * n, C = j->elems / R;
    int64_t shape[2] = {R, C}, by_rows[2] = {R * n, C / n}, by_cols[2] = {R / n, C * n};
    spmd_block x, a, b;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, shape, SPMD_DTYPE_F32, &x);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, by_rows, SPMD_DTYPE_F32, &a);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, by_cols, SPMD_DTYPE_F32, &b);
    if (st != SPMD_OK)
        return st;
    float *xs = x.data;
    for (int64_t k = 0; k < R * C; k++)
        xs[k] = value(base + me, k);
    st = spmd_all_to_all(ctx, &x, &a, j->axis, 1, 0, 1);
    if (st == SPMD_OK)
        st = spmd_all_to_all(ctx, &x, &b, j->axis, 0, 1, 1);
    if (st != SPMD_OK)
        return st;
    int32_t wrong[OPS] = {0};
    const float *as = a.data, *bs = b.data;
    int64_t cw = C / n, rw = R / n;
    for (int64_t row = 0; row < R * n; row++) /* row s * R + r: device s's row r, my columns */
        for (int64_t c = 0; c < cw; c++)
            wrong[0] += as[row * cw + c] !=
                        value(base + (int)(row / R), (row % R) * C + (int64_t)me * cw + c);
    for (int64_t r = 0; r < rw; r++) /* column s * C + c: device s's column c, my rows */
        for (int64_t col = 0; col < C * n; col++)
            wrong[1] += bs[r * C * n + col] !=
                        value(base + (int)(col / C), ((int64_t)me * rw + r) * C + col % C);
    memcpy(out[0].data, wrong, sizeof wrong);
    return SPMD_OK;
}

/* The counts of wrong elements in y, every device's (n in all), checked to be 0. */
static void check_counts(spmd_array *y, int n, const job *j, const char *where,
                         const char *const *names)
{
    int32_t got[MAX_DEV][OPS];
    spmd_status st = spmd_process_allgather(y, 1, got, sizeof(int32_t) * OPS * (size_t)n);
    SPMD_TEST_CHECK(st == SPMD_OK, "allgather: %s", spmd_last_error());
    for (int d = 0; st == SPMD_OK && d < n; d++)
        for (int op = 0; op < OPS; op++)
            SPMD_TEST_CHECK(got[d][op] == 0,
                            "%s, %lld bytes per device: %s gave device %d %d wrong elements", where,
                            (long long)(j->elems * 4), names[op], d, got[d][op]);
    spmd_array_destroy(y);
}

/* Every collective at `bytes` per device (rounded up to whole elements split n ways), the
 * devices of process `late_process` (-1: none) late by late_ns. */
static void check_size_late(int n, int64_t bytes, int late_process, long late_ns)
{
    job j = {.axis = "i", .late_process = late_process, .late_ns = late_ns};
    int64_t elems = bytes / 4;
    j.elems = (elems + n - 1) / n * n; /* psum_scatter and all_to_all split it n ways */
    spmd_array *y = spmd_test_each_device(body, &j, sizeof(int32_t) * OPS);
    SPMD_TEST_CHECK(y != NULL, "%lld bytes, process %d late: %s", (long long)(j.elems * 4),
                    late_process, spmd_last_error());
    if (y)
        check_counts(y, n, &j, late_process >= 0 ? "one group, one process late" : "one group",
                     op_names);
    if (bytes < 65536)
        return;
    j.elems = (elems + 2 * n * n - 1) / (2 * n * n) * (2 * n * n); /* 2n rows, n column parts */
    y = spmd_test_each_device(body_2d, &j, sizeof(int32_t) * OPS);
    SPMD_TEST_CHECK(y != NULL, "2-D, %lld bytes: %s", (long long)(j.elems * 4), spmd_last_error());
    if (y)
        check_counts(y, n, &j, "2-D blocks", op_names_2d);
}

static void check_size(int n, int64_t bytes) { check_size_late(n, bytes, -1, 0); }

/* Runs fn over `mesh` (each device's counts of wrong elements split by `split`, n devices) and
 * checks them; 1 when the call ran. */
static int run_and_check(spmd_mesh *mesh, const spmd_spec *split, spmd_fn fn, const job *j, int n,
                         const char *where, const char *const *names)
{
    const spmd_out_desc desc = {1, {(int64_t)n * (int64_t)sizeof(int32_t) * OPS}, SPMD_DTYPE_U8};
    spmd_array *y = NULL;
    spmd_status st = spmd_shard_map(mesh, fn, (void *)j, 0, NULL, NULL, 1, &desc,
                                    (const spmd_spec *[]){split}, NULL, &y);
    SPMD_TEST_CHECK(st == SPMD_OK, "%s, %lld bytes: %s", where, (long long)(j->elems * 4),
                    spmd_last_error());
    if (st == SPMD_OK)
        check_counts(y, n, j, where, names);
    return st == SPMD_OK;
}

/* Every collective over 'p' in a mesh of (processes x devices per process): each of a process's
 * devices in a group of its own, the groups' collectives at once. */
static void check_groups_at_once(int64_t bytes)
{
    int shape[2] = {spmd_process_count(), spmd_local_device_count()};
    const char *names[2] = {"p", "d"};
    int n = shape[0] * shape[1];
    job j = {.elems = (bytes / 4 + shape[0] - 1) / shape[0] * shape[0], .axis = "p", .other = "d"};
    spmd_mesh *mesh = NULL;
    spmd_spec *split = NULL;
    spmd_status st = spmd_mesh_create(2, shape, names, NULL, 0, &mesh);
    if (st == SPMD_OK)
        st = spmd_spec_parse("('p', 'd')", &split);
    SPMD_TEST_CHECK(st == SPMD_OK, "groups at once: %s", spmd_last_error());
    if (st == SPMD_OK && run_and_check(mesh, split, body, &j, n, "groups at once", op_names)) {
        j.elems = (bytes / 4 + 2 * shape[0] * shape[0] - 1) / (2 * shape[0] * shape[0]) *
                  (2 * shape[0] * shape[0]);
        (void)run_and_check(mesh, split, body_2d, &j, n, "groups at once, 2-D blocks", op_names_2d);
    }
    spmd_spec_destroy(split);
    spmd_mesh_destroy(mesh);
}

/* Every collective over a mesh of every device in reverse order: the last process's devices
 * hold the first positions, so each process's blocks lie out of process order in the outputs
 * (two processes of one device each gather through another path then). */
static void check_reversed(int64_t bytes)
{
    int n = spmd_device_count(), order[MAX_DEV];
    for (int d = 0; d < n; d++)
        order[d] = n - 1 - d;
    const char *names[1] = {"i"};
    job j = {.elems = (bytes / 4 + n - 1) / n * n, .axis = "i", .late_process = -1};
    spmd_mesh *mesh = NULL;
    spmd_spec *split = NULL;
    spmd_status st = spmd_mesh_create(1, &n, names, order, n, &mesh);
    if (st == SPMD_OK)
        st = spmd_spec_parse("'i'", &split);
    SPMD_TEST_CHECK(st == SPMD_OK, "devices in reverse order: %s", spmd_last_error());
    if (st == SPMD_OK)
        (void)run_and_check(mesh, split, body, &j, n, "devices in reverse order", op_names);
    spmd_spec_destroy(split);
    spmd_mesh_destroy(mesh);
}

int main(void)
{
    int n = spmd_test_init_devices(MAX_DEV);
    /* bytes per device: below, at and beyond a slot; within, at and beyond a wide slot; MPI */
    static const int64_t sizes[] = {8,     1024,  1296,  1312,  1344,  1400,  4096,   8192,   12288,
                                    32768, 49164, 65536, 66496, 66560, 66624, 131072, 1 << 20};
    /* the largest size streams its rounds in 64 KiB chunks: repeated, for chunks that could
     * overtake each other (a reader that looks at the slots one after another) */
    size_t nsizes = sizeof sizes / sizeof *sizes;
    for (size_t t = 0; t < nsizes; t++)
        for (int rep = 0; rep < (t + 1 == nsizes ? 16 : 1); rep++)
            check_size(n, sizes[t]);
    /* messages of 32-64 KiB within a machine go read straight or through the slots, whichever
     * the pair measured cheaper, in turns of 8, one in 64 the other way (runtime/comm/
     * host_rings.h): enough of them (two a call each way at 2 x 1) that both ways run, and one
     * turn goes back the other way after the winner settled */
    for (int rep = 0; spmd_process_count() > 1 && rep < 260; rep++)
        check_size(n, rep % 2 ? 49164 : 65536);
    /* a process 20 ms late, at sizes where two processes' reductions go in halves (32-64 KiB
     * without the rings) or stream (with them): its partner waits, then gets its values */
    for (int late = 0; late < spmd_process_count() && late < 2; late++) {
        check_size_late(n, 49164, late, 20000000);
        check_size_late(n, 65536, late, 20000000);
    }
    /* the processes' blocks out of process order, on each side of where the gathers change */
    static const int64_t reversed_sizes[] = {8, 4096, 12288, 49164};
    for (size_t t = 0; t < sizeof reversed_sizes / sizeof *reversed_sizes; t++)
        check_reversed(reversed_sizes[t]);
    /* an all_gather whose output (32 MiB) is larger than a last-level cache */
    check_size(n, ((int64_t)32 << 20) / n);
    if (spmd_process_count() > 1 && spmd_local_device_count() > 1)
        for (int rep = 0; rep < 8; rep++)
            check_groups_at_once(1 << 20);
    return spmd_test_finish(spmd_test_failed_checks());
}
