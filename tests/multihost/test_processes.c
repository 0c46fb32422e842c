/* Process-level collectives, against values computed here from the process index: gathers of
 * host-local and global arrays, broadcast, barrier names, equality checks, and a process that
 * never arrives (SPMD_COLLECTIVE_TIMEOUT=3). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

static int P, me;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A value on this process's first device only (fully addressable). */
static spmd_array *host_local(const void *data, int ndim, const int64_t *shape, spmd_dtype dtype)
{
    spmd_array *a = NULL;
    assert_ok(spmd_array_create_on_device(spmd_local_device_id(0), data, ndim, shape, dtype, &a));
    return a;
}

/* arange(4) + 4p gathered: stacked (P, 4) and tiled (4P,) are both arange(4P). */
static void test_allgather_host_local(void **state)
{
    (void)state;
    int32_t mine[4];
    double mine_f64[4];
    for (int i = 0; i < 4; i++) {
        mine[i] = i + 4 * me;
        mine_f64[i] = 0.5 * (i + 4 * me);
    }
    int64_t shape[1] = {4};
    spmd_array *x = host_local(mine, 1, shape, SPMD_DTYPE_I32);
    spmd_array *y = host_local(mine_f64, 1, shape, SPMD_DTYPE_F64);
    int32_t *all = calloc((size_t)(4 * P), sizeof *all);
    double *all_f64 = calloc((size_t)(4 * P), sizeof *all_f64);
    for (int tiled = 0; tiled <= 1; tiled++) {
        int ndim = 0;
        int64_t out_shape[SPMD_MAX_RANK];
        assert_ok(spmd_process_allgather_shape(x, tiled, &ndim, out_shape));
        assert_int_equal(ndim, tiled ? 1 : 2);
        assert_int_equal(out_shape[0], tiled ? 4 * P : P);
        memset(all, 0xff, (size_t)(4 * P) * sizeof *all);
        assert_ok(spmd_process_allgather(x, tiled, all, (size_t)(4 * P) * sizeof *all));
        assert_ok(spmd_process_allgather(y, tiled, all_f64, (size_t)(4 * P) * sizeof *all_f64));
        for (int i = 0; i < 4 * P; i++) {
            assert_int_equal(all[i], i);
            assert_true(all_f64[i] == 0.5 * i);
        }
    }
    /* a scalar stacks to (P,) even when tiled */
    float scalar = 4.0f * (float)me, scalars[64];
    spmd_array *s = host_local(&scalar, 0, NULL, SPMD_DTYPE_F32);
    for (int tiled = 0; tiled <= 1; tiled++) {
        int ndim = 0;
        int64_t out_shape[SPMD_MAX_RANK];
        assert_ok(spmd_process_allgather_shape(s, tiled, &ndim, out_shape));
        assert_int_equal(ndim, 1);
        assert_int_equal(out_shape[0], P);
        assert_ok(spmd_process_allgather(s, tiled, scalars, sizeof scalars));
        for (int p = 0; p < P; p++)
            assert_true(scalars[p] == 4.0f * (float)p);
    }
    /* too small a buffer is refused before any communication */
    assert_status(spmd_process_allgather(x, 1, all, 4), SPMD_ERR_INVALID_ARGUMENT, "host_out",
                  "spmd_process_allgather_shape");
    spmd_array_destroy(x);
    spmd_array_destroy(y);
    spmd_array_destroy(s);
    free(all);
    free(all_f64);
}

/* A global array over every device: its global value, on every process; untiled is refused. */
static void test_allgather_global(void **state)
{
    (void)state;
    int n = spmd_device_count();
    const char *x_name = "x";
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, &n, &x_name, NULL, 0, &mesh));
    const char *specs[2] = {"'x', None", ""};
    for (int k = 0; k < 2; k++) {
        spmd_sharding *sh = NULL;
        assert_ok(spmd_sharding_create_parse(mesh, specs[k], &sh));
        int64_t shape[2] = {2 * n, 3};
        int count = 6 * n;
        float *value = malloc((size_t)count * sizeof *value), *back = malloc((size_t)count * 4);
        for (int i = 0; i < count; i++)
            value[i] = (float)i * 0.25f - 3.0f;
        spmd_array *g = NULL;
        assert_ok(spmd_device_put(value, 2, shape, SPMD_DTYPE_F32, sh, &g));
        memset(back, 0, (size_t)count * sizeof *back);
        if (P > 1) {
            assert_ok(spmd_process_allgather(g, 1, back, (size_t)count * sizeof *back));
            assert_memory_equal(back, value, (size_t)count * sizeof *back);
            assert_status(spmd_process_allgather(g, 0, back, (size_t)count * sizeof *back),
                          SPMD_ERR_INVALID_ARGUMENT, "tiled=1");
            /* to one process only */
            float *root_out = me == P - 1 ? back : NULL;
            memset(back, 0, (size_t)count * sizeof *back);
            assert_ok(spmd_process_gather(g, P - 1, 1, root_out, root_out ? (size_t)count * 4 : 0));
            if (me == P - 1)
                assert_memory_equal(back, value, (size_t)count * sizeof *back);
        }
        spmd_array_destroy(g);
        spmd_sharding_destroy(sh);
        free(value);
        free(back);
    }
    spmd_mesh_destroy(mesh);
}

static void test_gather_host_local_to_root(void **state)
{
    (void)state;
    int64_t shape[2] = {2, 2};
    int64_t mine[4] = {me, me + 10, me + 20, me + 30};
    spmd_array *x = host_local(mine, 2, shape, SPMD_DTYPE_I64);
    int64_t *all = calloc((size_t)(4 * P), sizeof *all);
    int root = P / 2;
    assert_ok(spmd_process_gather(x, root, 0, me == root ? all : NULL,
                                  me == root ? (size_t)(4 * P) * sizeof *all : 0));
    for (int p = 0; p < P; p++)
        for (int i = 0; i < 4; i++)
            assert_int_equal(all[4 * p + i], me == root ? p + 10 * i : 0);
    assert_status(spmd_process_gather(x, P, 0, all, 0), SPMD_ERR_INVALID_ARGUMENT, "root");
    spmd_array_destroy(x);
    free(all);
}

static void test_broadcast(void **state)
{
    (void)state;
    for (int source = 0; source < P; source++) {
        float v[4];
        for (int i = 0; i < 4; i++)
            v[i] = (float)(i + 4 * me);
        v[3] = me == source ? -0.0f : 7.0f; /* a broadcast keeps the sign of zero */
        assert_ok(spmd_broadcast_one_to_all(v, sizeof v, source));
        for (int i = 0; i < 3; i++)
            assert_true(v[i] == (float)(i + 4 * source));
        assert_true(v[3] == 0.0f && signbit(v[3]));
    }
    /* the array form: the source's value, whatever the others hold */
    int64_t shape[1] = {4};
    int32_t v32[4] = {me, me + 1, me + 2, me + 3}, got[4] = {-1, -1, -1, -1};
    spmd_array *x = host_local(v32, 1, shape, SPMD_DTYPE_I32);
    assert_ok(spmd_broadcast_array_one_to_all(x, P - 1, got, sizeof got));
    for (int i = 0; i < 4; i++)
        assert_int_equal(got[i], P - 1 + i);
    assert_status(spmd_broadcast_array_one_to_all(x, 0, got, 8), SPMD_ERR_INVALID_ARGUMENT,
                  "host_out");
    spmd_array_destroy(x);
    uint8_t b[3] = {(uint8_t)me, 1, 2};
    assert_ok(spmd_broadcast_one_to_all(b, sizeof b, P - 1));
    assert_int_equal(b[0], P - 1);
    assert_status(spmd_broadcast_one_to_all(b, sizeof b, -1), SPMD_ERR_INVALID_ARGUMENT, "source");
    assert_status(spmd_broadcast_one_to_all(NULL, 4, 0), SPMD_ERR_INVALID_ARGUMENT, "buffer");
    if (P > 1) { /* sizes that differ are reported on every process, then all is well again */
        double d[2] = {1, 2};
        assert_status(spmd_broadcast_one_to_all(d, me == 0 ? 8 : 16, 0),
                      SPMD_ERR_COLLECTIVE_MISMATCH, "8 bytes", "16 bytes");
        assert_ok(spmd_broadcast_one_to_all(d, sizeof d, 0));
    }
}

static void test_sync_and_assert_equal(void **state)
{
    (void)state;
    assert_ok(spmd_sync_global_devices("start"));
    assert_status(spmd_sync_global_devices(NULL), SPMD_ERR_INVALID_ARGUMENT, "name");
    if (P > 1) {
        char name[32];
        snprintf(name, sizeof name, "step-%d", me == 0 ? 0 : 1);
        assert_status(spmd_sync_global_devices(name), SPMD_ERR_COLLECTIVE_MISMATCH, "step-0",
                      "step-1");
        assert_ok(spmd_sync_global_devices("after a mismatch"));
    }
    int32_t same[3] = {1, 2, 3};
    int64_t shape[1] = {3};
    spmd_array *x = host_local(same, 1, shape, SPMD_DTYPE_I32);
    assert_ok(spmd_assert_equal(x, "same everywhere"));
    spmd_array_destroy(x);
    if (P > 1) {
        int32_t differs[3] = {1, me == P - 1 ? 5 : 2, 3};
        x = host_local(differs, 1, shape, SPMD_DTYPE_I32);
        char expected[64];
        snprintf(expected, sizeof expected, "process %d's value differs", P - 1);
        assert_status(spmd_assert_equal(x, "weights drifted"), SPMD_ERR_INVALID_ARGUMENT,
                      "weights drifted", expected, "element 1 is 5 instead of 2");
        spmd_array_destroy(x);
        /* process 0 alone differs: the first process named is 1, against process 0's value */
        int32_t odd_one[3] = {1, 2, me == 0 ? 7 : 3};
        x = host_local(odd_one, 1, shape, SPMD_DTYPE_I32);
        assert_status(spmd_assert_equal(x, NULL), SPMD_ERR_INVALID_ARGUMENT,
                      "process 1's value differs", "element 2 is 3 instead of 7");
        spmd_array_destroy(x);
    }
    if (P > 2) {
        /* processes from 2 on differ, each at its own element: the lowest is named, with its
         * first differing element (the reduction pairs processes in any order) */
        int32_t several[3] = {1, 2, 3};
        if (me >= 2)
            several[me % 3] = 100 + me;
        x = host_local(several, 1, shape, SPMD_DTYPE_I32);
        assert_status(spmd_assert_equal(x, "drift"), SPMD_ERR_INVALID_ARGUMENT,
                      "drift: process 2's value differs from process 0's",
                      "element 2 is 102 instead of 3");
        spmd_array_destroy(x);
    }
}

/* Last: the upper half of the processes never arrives; every other one reports all of them,
 * alike, within the timeout (each of their own steps missed only some). */
static void test_missing_process(void **state)
{
    (void)state;
    if (P < 2)
        skip();
    int first_missing = P / 2;
    if (me >= first_missing)
        return;
    double start = now_s();
    spmd_status st = spmd_sync_global_devices("the upper half never comes");
    double elapsed = now_s() - start;
    assert_int_equal(st, SPMD_ERR_TIMEOUT);
    char expected[128] = "process(es) ";
    for (int p = first_missing; p < P; p++)
        snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s%d",
                 p > first_missing ? ", " : "", p);
    strncat(expected, " did not arrive", sizeof expected - strlen(expected) - 1);
    if (!strstr(spmd_last_error(), expected))
        fail_msg("process %d: the message lacks \"%s\": %s", me, expected, spmd_last_error());
    assert_true(elapsed < 3.0 + 5.0);
}

int main(void)
{
    spmd_test_init();
    P = spmd_process_count();
    me = spmd_process_index();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allgather_host_local),      cmocka_unit_test(test_allgather_global),
        cmocka_unit_test(test_gather_host_local_to_root), cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_sync_and_assert_equal),     cmocka_unit_test(test_missing_process),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
