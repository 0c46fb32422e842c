/*
 * Processes that make different calls: each case fails on every process with
 * SPMD_ERR_COLLECTIVE_MISMATCH, at once (not after the collective timeout, 300 s here), and the
 * message shows what differs, quoting two calls whose texts differ (or naming the field that
 * differs where the texts read alike). Run with 2 or 3 processes of 2 devices; process 0 makes one
 * call, the others another:
 *   - axis_index_groups that differ between the processes: pairs [[0,1],[2,3],...] against
 *     [[0,n/2],[1,n/2+1],...] (a psum), and the same members in another order (an all_gather,
 *     every group within one process: only the end of the call sees it);
 *   - axis_index_groups that differ between devices (even ones take the pairs, odd ones the
 *     halves), on every process alike: however the devices are split into processes;
 *   - spmd_device_put onto meshes whose device order differs (the device lists, and where they
 *     first differ);
 *   - spmd_reshard from arrays on other devices to one sharding (the source devices);
 *   - shard_maps whose fn differ, all else alike (the field: what the call runs);
 *   - a psum or psum_scatter of other sizes on process 0, on each side of the sizes where the
 *     exchange between two processes changes its messages (run with SPMD_SHM=0 too);
 *   - an all_gather mismatched twenty times in a row, then one alike that must bring the right
 *     values (an exchange's streams stop listening when its agreement fails);
 *   - the thread guard: a call from another thread is refused at once, naming both threads.
 * After each case the processes still agree (a barrier), and the mesh still works.
 */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <spmd.h>

static int me;
static spmd_mesh *g_mesh; /* 'i' over every device */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The two calls quoted by "process A called X, process B called Y": X and Y must differ. */
static void check_quotes(const char *what, const char *msg)
{
    const char *a = strstr(msg, " called "), *b = a ? strstr(a + 8, " called ") : NULL;
    SPMD_TEST_CHECK(a && b, "%s: the message quotes no two calls: %s", what, msg);
    if (!a || !b)
        return;
    const char *end_a = strstr(a + 8, ", process ");
    const char *end_b = strstr(b + 8, "; every ");
    SPMD_TEST_CHECK(end_a && end_b, "%s: cannot cut the quotes out of: %s", what, msg);
    if (!end_a || !end_b)
        return;
    size_t la = (size_t)(end_a - (a + 8)), lb = (size_t)(end_b - (b + 8));
    SPMD_TEST_CHECK(la != lb || strncmp(a + 8, b + 8, la) != 0 || strstr(msg, "they differ in"),
                    "%s: the two quoted calls read alike and no field is named: %s", what, msg);
}

static void expect_mismatch(const char *what, spmd_status st, double took, const char *must)
{
    const char *msg = spmd_last_error();
    SPMD_TEST_CHECK(st == SPMD_ERR_COLLECTIVE_MISMATCH, "%s: %s, want a mismatch: %s", what,
                    spmd_status_name(st), msg);
    SPMD_TEST_CHECK(took < 1.0, "%s: the mismatch took %.2f s (want < 1 s)", what, took);
    if (must)
        SPMD_TEST_CHECK(strstr(msg, must) != NULL, "%s: the message lacks \"%s\": %s", what, must,
                        msg);
    printf("p%d %s (%.3f s): %.600s\n", me, what, took, msg);
}

static void barrier(const char *what)
{
    spmd_status st = spmd_sync_global_devices(what);
    SPMD_TEST_CHECK(st == SPMD_OK, "the barrier after %s failed: %s", what, spmd_last_error());
}

/* ---- axis_index_groups ---- */

#define MAX_DEV 8

/* Groups of two positions, flat: kind 0 [[0,1],[2,3],...], 1 [[0,n/2],[1,n/2+1],...],
 * 2 [[1,0],[3,2],...] (kind 0's members in another order). */
static void pairs(int kind, int ndev, int *positions)
{
    for (int g = 0; g < ndev / 2; g++) {
        int a = kind == 1 ? g : 2 * g, b = kind == 1 ? g + ndev / 2 : 2 * g + 1;
        positions[2 * g] = kind == 2 ? b : a;
        positions[2 * g + 1] = kind == 2 ? a : b;
    }
}

/* The pairs of `user` (positions) over the axis 'i' of ctx's mesh. */
static spmd_status pairs_over_i(spmd_ctx *ctx, void *user, spmd_axis_groups *g)
{
    int n = 0;
    spmd_status st = spmd_axis_size(ctx, "i", &n);
    *g = (spmd_axis_groups){n / 2, NULL, user};
    return st;
}

static spmd_status fn_groups(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    spmd_axis_groups g;
    spmd_status st = pairs_over_i(ctx, user, &g);
    return st != SPMD_OK ? st : spmd_psum_groups(ctx, &in[0], &out[0], "i", &g);
}

static spmd_status fn_gather_groups(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                    spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    spmd_axis_groups g;
    spmd_status st = pairs_over_i(ctx, user, &g);
    return st != SPMD_OK ? st : spmd_all_gather_groups(ctx, &in[0], &out[0], "i", 0, 1, &g);
}

/* user: two groupings; even device positions take the first, odd ones the second. */
static spmd_status fn_groups_by_parity(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                       spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    int *const *both = user;
    int d = 0;
    spmd_axis_groups g;
    spmd_status st = spmd_axis_index(ctx, "i", &d);
    if (st == SPMD_OK)
        st = pairs_over_i(ctx, both[d % 2], &g);
    return st != SPMD_OK ? st : spmd_psum_groups(ctx, &in[0], &out[0], "i", &g);
}

static spmd_status fn_psum_a(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "i");
}

static spmd_status fn_psum_b(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "i"); /* the same, in another function */
}

/* A shard_map over g_mesh of x (sharded over 'i') into an output of `rows` per device. */
static spmd_status run(spmd_fn fn, void *user, spmd_array *x, int64_t out_rows, int replicated,
                       spmd_array **out)
{
    spmd_spec *in_spec = NULL, *out_spec = NULL;
    assert_ok(spmd_spec_parse("'i'", &in_spec));
    assert_ok(spmd_spec_parse(replicated ? "" : "'i'", &out_spec));
    spmd_out_desc od = {1, {out_rows}, SPMD_DTYPE_F32};
    spmd_status st = spmd_shard_map(g_mesh, fn, user, 1, &x, (const spmd_spec *const *)&in_spec, 1,
                                    &od, (const spmd_spec *const *)&out_spec, NULL, out);
    spmd_spec_destroy(in_spec);
    spmd_spec_destroy(out_spec);
    return st;
}

static spmd_array *make_x(int ndev)
{
    spmd_spec *spec = NULL;
    spmd_sharding *sh = NULL;
    assert_ok(spmd_spec_parse("'i'", &spec));
    assert_ok(spmd_sharding_create(g_mesh, spec, &sh));
    float host[64];
    int64_t n = ndev;
    for (int k = 0; k < ndev; k++)
        host[k] = (float)(k + 1);
    spmd_array *x = NULL;
    assert_ok(spmd_device_put(host, 1, &n, SPMD_DTYPE_F32, sh, &x));
    spmd_sharding_destroy(sh);
    spmd_spec_destroy(spec);
    return x;
}

/* The message names both groupings: their first two groups, as "[[0, 1], [2, 3]". */
static void check_groupings_named(const char *what, const int *a, const int *b)
{
    const int *both[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        const int *g = both[k];
        char text[64];
        snprintf(text, sizeof text, "[[%d, %d], [%d, %d]", g[0], g[1], g[2], g[3]);
        SPMD_TEST_CHECK(strstr(spmd_last_error(), text) != NULL,
                        "%s: the message does not name the grouping %s...: %s", what, text,
                        spmd_last_error());
    }
}

static void test_groupings(spmd_array *x, int ndev)
{
    int consecutive[MAX_DEV], halves[MAX_DEV], swapped[MAX_DEV];
    pairs(0, ndev, consecutive);
    pairs(1, ndev, halves);
    pairs(2, ndev, swapped);
    spmd_array *out = NULL;
    double t0 = now_s();
    spmd_status st = run(fn_groups, me == 0 ? consecutive : halves, x, ndev, 0, &out);
    expect_mismatch("psum in groups [[0,1],[2,3],...] against [[0,n/2],...]", st, now_s() - t0,
                    "axis_index_groups");
    check_groupings_named("psum in groups", consecutive, halves);
    spmd_array_destroy(out);
    barrier("the groupings");
    t0 = now_s();
    st = run(fn_gather_groups, me == 0 ? consecutive : swapped, x, 2 * ndev, 0, &out);
    expect_mismatch("all_gather in groups with their members in another order", st, now_s() - t0,
                    NULL);
    check_groupings_named("all_gather in groups", consecutive, swapped);
    spmd_array_destroy(out);
    barrier("the reordered groups");
    /* the groupings differ between devices, on every process alike: even devices pair
     * consecutive positions, odd ones the halves (device 1 then waits for n/2+1, which waits for
     * n/2 ...): a mismatch at once however the devices are split into processes */
    for (int round = 0; round < 5; round++) {
        int *by_parity[2] = {consecutive, halves};
        t0 = now_s();
        st = run(fn_groups_by_parity, by_parity, x, ndev, 0, &out);
        expect_mismatch("psum in groups that differ between even and odd devices", st, now_s() - t0,
                        "axis_index_groups");
        check_groupings_named("psum in groups by parity", consecutive, halves);
        spmd_array_destroy(out);
        barrier("the groupings by parity");
    }
    /* the mesh still works: the same grouping everywhere, against a host loop */
    st = run(fn_groups, consecutive, x, ndev, 0, &out);
    SPMD_TEST_CHECK(st == SPMD_OK, "a psum in groups after the mismatch failed: %s",
                    spmd_last_error());
    if (st == SPMD_OK) {
        float got[MAX_DEV];
        for (int s = 0; s < spmd_array_num_shards(out); s++) {
            spmd_shard info;
            assert_ok(spmd_array_shard(out, s, &info));
            assert_ok(spmd_array_shard_to_host(out, s, got, sizeof got));
            int d = (int)info.index.start[0], partner = d ^ 1;
            SPMD_TEST_CHECK(got[0] == (float)(d + 1 + partner + 1),
                            "psum in groups: device position %d holds %g, want %g", d, got[0],
                            (double)(d + 1 + partner + 1));
        }
    }
    spmd_array_destroy(out);
}

static void test_signature(spmd_array *x)
{
    spmd_array *out = NULL;
    double t0 = now_s();
    spmd_status st = run(me == 0 ? fn_psum_a : fn_psum_b, NULL, x, 1, 1, &out);
    expect_mismatch("shard_maps of two fns alike", st, now_s() - t0, NULL);
    check_quotes("shard_maps of two fns alike", spmd_last_error());
    SPMD_TEST_CHECK(strstr(spmd_last_error(), "what the call runs") != NULL ||
                        strstr(spmd_last_error(), "fn") != NULL,
                    "the message does not say that fn differs: %s", spmd_last_error());
    spmd_array_destroy(out);
    barrier("the fns");
}

/* ---- reductions whose sizes differ between processes ---- */

typedef enum sized_op { SIZED_PSUM, SIZED_SCATTER, SIZED_GATHER } sized_op;
static const char *const sized_names[] = {"psum", "psum_scatter", "all_gather"};

typedef struct sized {
    sized_op op;
    int64_t elems; /* per device, on this process */
} sized;

static spmd_status fn_sized(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin, (void)in, (void)nout, (void)out;
    const sized *z = user;
    int n = 0;
    int64_t part = 0;
    spmd_block x, y;
    spmd_status st = spmd_axis_size(ctx, "i", &n);
    part = z->op == SIZED_SCATTER ? z->elems / n : z->op == SIZED_GATHER ? z->elems * n : z->elems;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &z->elems, SPMD_DTYPE_F32, &x);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &part, SPMD_DTYPE_F32, &y);
    if (st != SPMD_OK)
        return st;
    memset(x.data, 0, (size_t)z->elems * sizeof(float));
    if (z->op == SIZED_GATHER)
        return spmd_all_gather(ctx, &x, &y, "i", 0, 1);
    return z->op == SIZED_SCATTER ? spmd_psum_scatter(ctx, &x, &y, "i", 0, 1)
                                  : spmd_psum(ctx, &x, &y, "i");
}

/* A psum, psum_scatter or all_gather of other sizes on process 0 than on the others, on each
 * side of the sizes where the exchange between two processes changes its messages (check_mpi.c:
 * the agreement with the data in one message or in two halves, or before the data): process 0's
 * 48 KiB against 16 and 96 KiB, 64 KiB against 32 KiB, 4 KiB against 8 KiB (two processes of
 * one machine stream past 4 KiB); a psum_scatter's 64 KiB against 16 and 512 KiB, 4 KiB against
 * 16 KiB; an all_gather's 2 KiB per device against 16 and 64 KiB (its output straddles
 * where it streams within a machine, 16 KiB, and where it does everywhere, 64 KiB), 8 against
 * 24 KiB (two processes without the rings: the agreement in the message, against beside the
 * data). Each a
 * mismatch at once on every process, never a wait for a message that does not come. */
static void test_sizes(spmd_array *x, int ndev)
{
    static const struct {
        sized_op op;
        int64_t mine, others; /* bytes per device */
    } cases[] = {{SIZED_PSUM, 49152, 16384},    {SIZED_PSUM, 49152, 98304},
                 {SIZED_PSUM, 65536, 32768},    {SIZED_PSUM, 4096, 8192},
                 {SIZED_SCATTER, 65536, 16384}, {SIZED_SCATTER, 65536, 524288},
                 {SIZED_SCATTER, 4096, 16384},  {SIZED_GATHER, 2048, 16384},
                 {SIZED_GATHER, 2048, 65536},   {SIZED_GATHER, 8192, 24576}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        sized z = {cases[k].op, (me == 0 ? cases[k].mine : cases[k].others) / 4};
        z.elems = z.elems / ndev * ndev;
        char what[128];
        snprintf(what, sizeof what, "%s of %lld bytes per device on process 0, %lld on the others",
                 sized_names[z.op], (long long)cases[k].mine, (long long)cases[k].others);
        spmd_array *out = NULL;
        double t0 = now_s();
        spmd_status st = run(fn_sized, &z, x, ndev, 0, &out);
        expect_mismatch(what, st, now_s() - t0, NULL);
        check_quotes(what, spmd_last_error());
        spmd_array_destroy(out);
        barrier(what);
    }
}

/* An all_gather of 64 KiB per device whose output each device checks: block j holds
 * j * 1000 + k at its k-th element. Counts the wrong elements in wrong_gathered. */
static atomic_int wrong_gathered;

static spmd_status fn_gather_checked(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                     spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)out, (void)user;
    int n = 0, at = 0;
    int64_t elems = 16384, all = 0;
    spmd_block x, y;
    spmd_status st = spmd_axis_size(ctx, "i", &n);
    if (st == SPMD_OK)
        st = spmd_axis_index(ctx, "i", &at);
    all = elems * n;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &elems, SPMD_DTYPE_F32, &x);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, &all, SPMD_DTYPE_F32, &y);
    if (st != SPMD_OK)
        return st;
    for (int64_t k = 0; k < elems; k++)
        ((float *)x.data)[k] = (float)(at * 1000 + k);
    st = spmd_all_gather(ctx, &x, &y, "i", 0, 1);
    int bad = 0;
    for (int64_t k = 0; st == SPMD_OK && k < all; k++)
        bad += ((const float *)y.data)[k] != (float)(k / elems * 1000 + k % elems);
    atomic_fetch_add(&wrong_gathered, bad);
    return st;
}

/* One mismatch twenty times in a row, more than the streams a process listens for from one
 * sender at once (LISTENERS in host_rings.c): an exchange's streams listen before its
 * agreement, and must stop listening when it fails. An all_gather alike on every process then
 * still streams, and brings the right values. */
static void test_mismatch_repeated(spmd_array *x, int ndev)
{
    sized z = {SIZED_GATHER, (me == 0 ? 2048 : 65536) / 4};
    z.elems = z.elems / ndev * ndev;
    for (int k = 0; k < 20; k++) {
        spmd_array *out = NULL;
        double t0 = now_s();
        spmd_status st = run(fn_sized, &z, x, ndev, 0, &out);
        expect_mismatch("all_gather of 2 KiB per device on process 0, 64 KiB on the others, again",
                        st, now_s() - t0, NULL);
        spmd_array_destroy(out);
    }
    barrier("twenty mismatched all_gathers");
    spmd_array *out = NULL;
    atomic_store(&wrong_gathered, 0);
    double t0 = now_s();
    spmd_status st = run(fn_gather_checked, NULL, x, ndev, 0, &out);
    SPMD_TEST_CHECK(st == SPMD_OK && now_s() - t0 < 10,
                    "an all_gather alike after twenty mismatched ones: %s after %.1f s: %s",
                    spmd_status_name(st), now_s() - t0, spmd_last_error());
    SPMD_TEST_CHECK(atomic_load(&wrong_gathered) == 0,
                    "an all_gather alike after twenty mismatched ones: %d wrong elements",
                    atomic_load(&wrong_gathered));
    spmd_array_destroy(out);
    barrier("an all_gather after the mismatches");
}

/* ---- device_put and reshard onto other device orders ---- */

static spmd_mesh *mesh_in_order(const int *order, int ndev)
{
    const char *names[1] = {"i"};
    spmd_mesh *m = NULL;
    assert_ok(spmd_mesh_create(1, &ndev, names, order, ndev, &m));
    return m;
}

static spmd_status fill(const spmd_box *index, void *dst, void *user)
{
    (void)user;
    float *f = dst;
    for (int64_t k = index->start[0]; k < index->stop[0]; k++)
        f[k - index->start[0]] = (float)k;
    return SPMD_OK;
}

static void test_device_orders(int ndev)
{
    int order[MAX_DEV]; /* process 0: the devices in order; the others: 1 and 2 swapped */
    for (int d = 0; d < ndev; d++)
        order[d] = d;
    if (me != 0)
        order[1] = 2, order[2] = 1;
    spmd_mesh *m = mesh_in_order(order, ndev);
    spmd_spec *spec = NULL, *rep = NULL;
    spmd_sharding *sh = NULL;
    assert_ok(spmd_spec_parse("'i'", &spec));
    assert_ok(spmd_spec_parse("", &rep));
    assert_ok(spmd_sharding_create(m, spec, &sh));
    float host[4 * MAX_DEV] = {0};
    int64_t n = 4 * ndev;
    spmd_array *a = NULL;
    double t0 = now_s();
    spmd_status st = spmd_device_put(host, 1, &n, SPMD_DTYPE_F32, sh, &a);
    expect_mismatch("device_put onto meshes in other device orders", st, now_s() - t0,
                    "first differ at position 1");
    check_quotes("device_put onto meshes in other device orders", spmd_last_error());
    SPMD_TEST_CHECK(strstr(spmd_last_error(), "[0, 1, 2, 3") &&
                        strstr(spmd_last_error(), "[0, 2, 1, 3"),
                    "the message does not show both device orders: %s", spmd_last_error());
    spmd_array_destroy(a);
    barrier("device_put");

    /* an array on this process's device order (no check: a callback), resharded to 'i' of
     * the common mesh: the source devices differ */
    spmd_sharding *src = NULL, *dst = NULL;
    assert_ok(spmd_sharding_create(m, rep, &src));
    assert_ok(spmd_sharding_create(g_mesh, spec, &dst));
    spmd_array *x = NULL, *y = NULL;
    assert_ok(spmd_array_from_callback(1, &n, SPMD_DTYPE_F32, src, fill, NULL, &x));
    t0 = now_s();
    st = spmd_reshard(x, dst, NULL, &y);
    expect_mismatch("reshard from arrays on other devices", st, now_s() - t0, NULL);
    check_quotes("reshard from arrays on other devices", spmd_last_error());
    spmd_array_destroy(y);
    spmd_array_destroy(x);
    barrier("reshard");
    spmd_sharding_destroy(src);
    spmd_sharding_destroy(dst);
    spmd_sharding_destroy(sh);
    spmd_spec_destroy(spec);
    spmd_spec_destroy(rep);
    spmd_mesh_destroy(m);
}

/* ---- the thread guard ---- */

typedef struct guarded {
    spmd_array *x;
    spmd_status st;
    char message[1024];
} guarded;

static void *other_thread(void *arg)
{
    guarded *g = arg;
    spmd_array *out = NULL;
    g->st = run(fn_psum_a, NULL, g->x, 1, 1, &out);
    snprintf(g->message, sizeof g->message, "%s", spmd_last_error());
    spmd_array_destroy(out);
    return NULL;
}

static void test_thread_guard(spmd_array *x)
{
    assert_ok(spmd_thread_guard(1));
    guarded g = {x, SPMD_OK, ""};
    pthread_t t;
    SPMD_TEST_CHECK(pthread_create(&t, NULL, other_thread, &g) == 0, "pthread_create");
    pthread_join(t, NULL);
    SPMD_TEST_CHECK(g.st == SPMD_ERR_INVALID_ARGUMENT && strstr(g.message, "thread guard"),
                    "a call from another thread under the guard: %s: %s", spmd_status_name(g.st),
                    g.message);
    assert_ok(spmd_thread_guard(0));
    pthread_create(&t, NULL, other_thread, &g);
    pthread_join(t, NULL);
    SPMD_TEST_CHECK(g.st == SPMD_OK, "a call from another thread once the guard is released: %s",
                    g.message);
}

int main(void)
{
    spmd_test_init();
    me = spmd_process_index();
    int ndev = spmd_device_count();
    if (spmd_process_count() < 2 || ndev % 2 || ndev < 4 || ndev > MAX_DEV) {
        printf("skipped: needs 2 or more processes, 4 to %d devices in all, even\n", MAX_DEV);
        spmd_test_finish(0);
        return SPMD_TEST_SKIP;
    }
    const char *names[1] = {"i"};
    assert_ok(spmd_mesh_create(1, &ndev, names, NULL, 0, &g_mesh));
    spmd_array *x = make_x(ndev);
    test_groupings(x, ndev);
    test_signature(x);
    test_sizes(x, ndev);
    test_mismatch_repeated(x, ndev);
    test_device_orders(ndev);
    test_thread_guard(x);
    spmd_array_destroy(x);
    spmd_mesh_destroy(g_mesh);
    return spmd_test_finish(spmd_test_failed_checks());
}
