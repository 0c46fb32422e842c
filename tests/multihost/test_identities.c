/* The identities of JAX's multihost_utils and device_put, against host references:
 *  - host_local_to_global of an array that is already global returns it unchanged (a new
 *    handle over the same buffers), whatever its layout;
 *  - global_to_host_local of an array in another layout reshards a copy first (a collective;
 *    the caller's array keeps its layout, buffers and values); a fully addressable one comes
 *    back unchanged;
 *  - device_put checks that every process of the mesh passed the same host data (one agreement
 *    on a digest), fails on every process naming the processes that differ, is skipped with
 *    SPMD_CHECK_DEVICE_PUT=0, involves only the processes of the mesh, and costs nothing on a
 *    mesh of one process's devices. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static int P, L, me;

static spmd_mesh *line_mesh(const int *ids, int n)
{
    const char *x = "x";
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, &n, &x, ids, ids ? n : 0, &mesh));
    return mesh;
}

static spmd_sharding *sharding(spmd_mesh *mesh, const char *spec)
{
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create_parse(mesh, spec, &sh));
    return sh;
}

static spmd_array *put(const float *host, int64_t n, spmd_mesh *mesh, const char *spec)
{
    spmd_sharding *sh = sharding(mesh, spec);
    spmd_array *a = NULL;
    assert_ok(spmd_device_put(host, 1, &n, SPMD_DTYPE_F32, sh, &a));
    spmd_sharding_destroy(sh);
    return a;
}

/* 1 when every shard of a is the buffer of b's shard on the same device, and they have as many. */
static int same_buffers(const spmd_array *a, const spmd_array *b)
{
    if (spmd_array_num_shards(a) != spmd_array_num_shards(b))
        return 0;
    for (int i = 0; i < spmd_array_num_shards(a); i++) {
        spmd_shard sa, sb;
        assert_ok(spmd_array_shard(a, i, &sa));
        assert_ok(spmd_array_shard(b, i, &sb));
        if (sa.device_id != sb.device_id || sa.data != sb.data)
            return 0;
    }
    return 1;
}

static void check_values(const spmd_array *g, const float *expected, int64_t n)
{
    float *got = malloc((size_t)n * sizeof *got);
    assert_ok(spmd_process_allgather(g, 1, got, (size_t)n * sizeof *got));
    for (int64_t i = 0; i < n; i++)
        if (got[i] != expected[i])
            fail_msg("element %lld is %g, expected %g", (long long)i, got[i], expected[i]);
    free(got);
}

/* ---- host_local_to_global of a global array ---- */

static void test_global_passes_through(void **state)
{
    (void)state;
    int n = P * L;
    spmd_mesh *mesh = line_mesh(NULL, n);
    spmd_spec *by_x = NULL, *replicated = NULL, *unknown = NULL, *too_long = NULL;
    assert_ok(spmd_spec_parse("'x'", &by_x));
    assert_ok(spmd_spec_parse("", &replicated));
    assert_ok(spmd_spec_parse("'y'", &unknown));
    assert_ok(spmd_spec_parse("'x', None", &too_long));
    float *value = malloc((size_t)(4 * n) * sizeof *value);
    for (int i = 0; i < 4 * n; i++)
        value[i] = (float)(3 * i + 1);
    /* laid out as NamedSharding(mesh, P('x')): global when P > 1, fully addressable in one
     * process, where the local-mesh rule gives the same: same shape, same buffers */
    spmd_array *g = put(value, 4 * n, mesh, "'x'"), *again = NULL;
    assert_ok(spmd_host_local_to_global(g, mesh, by_x, &again));
    assert_non_null(again);
    assert_true(again != g);
    assert_int_equal(spmd_array_ndim(again), 1);
    assert_int_equal(spmd_array_shape(again)[0], 4 * n);
    assert_true(spmd_sharding_is_equivalent(spmd_array_sharding(again), spmd_array_sharding(g), 1));
    assert_true(same_buffers(again, g));
    spmd_array_destroy(g); /* the new handle holds its own references */
    check_values(again, value, 4 * n);

    if (P > 1) {
        /* JAX returns any non-fully-addressable array unchanged, whatever its layout */
        spmd_array *rep = put(value, 4 * n, mesh, ""), *same = NULL;
        assert_ok(spmd_host_local_to_global(rep, mesh, by_x, &same));
        assert_true(same_buffers(same, rep));
        assert_int_equal(spmd_array_shape(same)[0], 4 * n);
        assert_true(spmd_sharding_is_fully_replicated(spmd_array_sharding(same)));
        check_values(same, value, 4 * n);
        spmd_array_destroy(same);
        spmd_array_destroy(rep);
        /* the spec must still fit the mesh and the rank */
        spmd_array *out = again;
        assert_status(spmd_host_local_to_global(again, mesh, unknown, &out), SPMD_ERR_SPEC, "'y'");
        assert_null(out);
        assert_status(spmd_host_local_to_global(again, mesh, too_long, &out), SPMD_ERR_SPEC,
                      "spmd_host_local_to_global", "2 entries", "rank 1");
        assert_null(out);
    }
    spmd_array_destroy(again);
    free(value);
    spmd_spec_destroy(by_x);
    spmd_spec_destroy(replicated);
    spmd_spec_destroy(unknown);
    spmd_spec_destroy(too_long);
    spmd_mesh_destroy(mesh);
}

/* ---- global_to_host_local of an array in another layout ---- */

static void test_other_layout_is_resharded(void **state)
{
    (void)state;
    int n = P * L;
    int *reversed = malloc((size_t)n * sizeof *reversed);
    for (int i = 0; i < n; i++)
        reversed[i] = n - 1 - i;
    spmd_mesh *mesh = line_mesh(NULL, n), *other = line_mesh(reversed, n);
    spmd_spec *by_x = NULL;
    assert_ok(spmd_spec_parse("'x'", &by_x));
    float *value = malloc((size_t)(2 * n) * sizeof *value);
    for (int i = 0; i < 2 * n; i++)
        value[i] = (float)(i * i % 97);
    /* this process's part under P('x') on the id-ordered mesh: rows [2 L me, 2 L (me + 1)) */
    const float *mine = value + 2 * L * me;
    for (int k = 0; k < 2; k++) { /* replicated; then P('x') on the reversed mesh */
        spmd_array *g = put(value, 2 * n, k == 0 ? mesh : other, k == 0 ? "" : "'x'");
        spmd_shard before[64];
        for (int i = 0; i < spmd_array_num_shards(g); i++)
            assert_ok(spmd_array_shard(g, i, &before[i]));
        spmd_array *local = NULL;
        assert_ok(spmd_global_to_host_local(g, mesh, by_x, &local));
        float got[64];
        if (P > 1) { /* resharded: this process's rows, on the local mesh, in P('x') */
            assert_int_equal(spmd_array_shape(local)[0], 2 * L);
            assert_true(spmd_array_is_fully_addressable(local));
            assert_ok(spmd_array_to_host(local, got, sizeof got));
            assert_memory_equal(got, mine, (size_t)(2 * L) * sizeof *got);
            for (int i = 0; i < spmd_array_num_shards(local); i++) {
                spmd_shard s;
                assert_ok(spmd_array_shard(local, i, &s));
                assert_int_equal(s.index.start[0], 2 * i);
            }
        } else { /* fully addressable: unchanged, as JAX */
            assert_true(same_buffers(local, g));
            assert_true(
                spmd_sharding_is_equivalent(spmd_array_sharding(local), spmd_array_sharding(g), 1));
        }
        /* the caller's array is untouched: same layout, buffers and values */
        for (int i = 0; i < spmd_array_num_shards(g); i++) {
            spmd_shard s;
            assert_ok(spmd_array_shard(g, i, &s));
            assert_true(s.data == before[i].data && s.device_id == before[i].device_id);
        }
        check_values(g, value, 2 * n);
        spmd_array_destroy(local);
        spmd_array_destroy(g);
    }
    /* laid out as asked: shared buffers, no reshard (as before) */
    spmd_array *g = put(value, 2 * n, mesh, "'x'"), *local = NULL, *back = NULL;
    assert_ok(spmd_global_to_host_local(g, mesh, by_x, &local));
    assert_true(same_buffers(local, g));
    /* and back: host_local_to_global of that part shares them again */
    assert_ok(spmd_host_local_to_global(local, mesh, by_x, &back));
    assert_true(same_buffers(back, g));
    spmd_array_destroy(back);
    spmd_array_destroy(local);
    spmd_array_destroy(g);
    free(value);
    free(reversed);
    spmd_spec_destroy(by_x);
    spmd_mesh_destroy(other);
    spmd_mesh_destroy(mesh);
}

/* ---- device_put's check ---- */

/* What every process expects from a device_put that fails the check: the status, and the
 * message naming `odd` against `same` (lists as the library prints them). */
static void expect_differ(spmd_status st, const char *odd, const char *same)
{
    char want[128];
    snprintf(want, sizeof want, "process(es) %s passed other values than process(es) %s", odd,
             same);
    assert_status(st, SPMD_ERR_INVALID_ARGUMENT, "spmd_device_put",
                  "passed to device_put is not the same on each process", want,
                  "SPMD_CHECK_DEVICE_PUT=0");
}

static void test_device_put_check(void **state)
{
    (void)state;
    int n = P * L;
    spmd_mesh *mesh = line_mesh(NULL, n);
    spmd_sharding *rows = sharding(mesh, "'x'");
    size_t bytes = (size_t)(2 * n) * sizeof(float);
    float *same = malloc(bytes), *mine = malloc(bytes), *other = malloc(bytes);
    for (int i = 0; i < 2 * n; i++) {
        same[i] = (float)(i + 1);
        mine[i] = (float)(i + 1 + 1000 * (me + 1)); /* different on every process */
        other[i] = -same[i];
    }
    int64_t shape[1] = {2 * n};
    spmd_array *x = NULL;
    /* equal data: accepted, and every device holds its rows */
    assert_ok(spmd_device_put(same, 1, shape, SPMD_DTYPE_F32, rows, &x));
    check_values(x, same, 2 * n);
    spmd_array_destroy(x);
    if (P > 1) {
        x = (spmd_array *)rows;
        /* process 1 differs from the others */
        expect_differ(spmd_device_put(me == 1 ? mine : same, 1, shape, SPMD_DTYPE_F32, rows, &x),
                      "[1]", P == 2 ? "[0]" : "[0, 2, 3]");
        assert_null(x);
        /* every process differs: the lowest process's value stands for the rest */
        if (P == 2)
            expect_differ(spmd_device_put(mine, 1, shape, SPMD_DTYPE_F32, rows, &x), "[1]", "[0]");
        else
            expect_differ(spmd_device_put(mine, 1, shape, SPMD_DTYPE_F32, rows, &x), "[1, 2, 3]",
                          "[0]");
        if (P == 4) {
            /* process 0 is the odd one out: the most common value is the reference */
            expect_differ(
                spmd_device_put(me == 0 ? mine : same, 1, shape, SPMD_DTYPE_F32, rows, &x), "[0]",
                "[1, 2, 3]");
            /* two against two: the lowest process's side is the reference */
            expect_differ(
                spmd_device_put(me >= 2 ? other : same, 1, shape, SPMD_DTYPE_F32, rows, &x),
                "[2, 3]", "[0, 1]");
        }
        /* another shape on one process: not the same call, quoted from both sides */
        int64_t longer[1] = {me == 1 ? 4 * n : 2 * n};
        float *big = calloc((size_t)(4 * n), sizeof *big);
        assert_status(spmd_device_put(big, 1, longer, SPMD_DTYPE_F32, rows, &x),
                      SPMD_ERR_COLLECTIVE_MISMATCH, "spmd_device_put of float32");
        free(big);
        /* after a failed check the next one works */
        assert_ok(spmd_device_put(same, 1, shape, SPMD_DTYPE_F32, rows, &x));
        check_values(x, same, 2 * n);
        spmd_array_destroy(x);
    }
    /* skipped: each device holds its rows of its own process's data */
    setenv("SPMD_CHECK_DEVICE_PUT", "0", 1);
    assert_ok(spmd_device_put(mine, 1, shape, SPMD_DTYPE_F32, rows, &x));
    unsetenv("SPMD_CHECK_DEVICE_PUT");
    for (int i = 0; i < spmd_array_num_shards(x); i++) {
        spmd_shard s;
        float got[2];
        assert_ok(spmd_array_shard(x, i, &s));
        assert_ok(spmd_array_shard_to_host(x, i, got, sizeof got));
        assert_memory_equal(got, mine + s.index.start[0], sizeof got);
    }
    spmd_array_destroy(x);
    /* a value that is no switch */
    setenv("SPMD_CHECK_DEVICE_PUT", "2", 1);
    x = (spmd_array *)rows;
    assert_status(spmd_device_put(same, 1, shape, SPMD_DTYPE_F32, rows, &x),
                  SPMD_ERR_INVALID_ARGUMENT, "SPMD_CHECK_DEVICE_PUT");
    assert_null(x);
    unsetenv("SPMD_CHECK_DEVICE_PUT");
    free(same);
    free(mine);
    free(other);
    spmd_sharding_destroy(rows);
    spmd_mesh_destroy(mesh);
}

/* Only the processes of the mesh take part; a mesh of this process's devices costs nothing. */
static void test_device_put_who_takes_part(void **state)
{
    (void)state;
    float mine[64];
    for (int i = 0; i < 64; i++)
        mine[i] = (float)(7 * me + i);
    /* this process's devices only: different data everywhere, nothing to agree on */
    int ids[64];
    for (int i = 0; i < L; i++)
        ids[i] = spmd_local_device_id(i);
    spmd_mesh *local = line_mesh(ids, L);
    spmd_array *x = put(mine, 2 * L, local, "'x'");
    float got[64];
    assert_ok(spmd_array_to_host(x, got, sizeof got));
    assert_memory_equal(got, mine, (size_t)(2 * L) * sizeof *got);
    spmd_array_destroy(x);
    spmd_mesh_destroy(local);
    if (P != 4)
        return;
    /* two meshes of two processes each: each pair checks its own data, the pairs differ */
    int pair[64], base = me < 2 ? 0 : 2;
    for (int i = 0; i < 2 * L; i++)
        pair[i] = base * L + i;
    spmd_mesh *half = line_mesh(pair, 2 * L);
    float data[64];
    for (int i = 0; i < 4 * L; i++)
        data[i] = (float)(100 * base + i);
    x = put(data, 4 * L, half, "'x'");
    for (int i = 0; i < spmd_array_num_shards(x); i++) {
        spmd_shard s;
        assert_ok(spmd_array_shard(x, i, &s));
        assert_ok(spmd_array_shard_to_host(x, i, got, sizeof got));
        assert_memory_equal(got, data + s.index.start[0], 2 * sizeof *got);
    }
    spmd_array_destroy(x);
    /* a process of the pair that differs fails, with its partner, naming it */
    spmd_sharding *rows = sharding(half, "'x'");
    int64_t shape[1] = {4 * L};
    data[0] += me == 3 ? 1.0f : 0.0f;
    spmd_status st = spmd_device_put(data, 1, shape, SPMD_DTYPE_F32, rows, &x);
    if (me < 2) {
        assert_ok(st);
        spmd_array_destroy(x);
    } else {
        expect_differ(st, "[3]", "[2]");
    }
    spmd_sharding_destroy(rows);
    spmd_mesh_destroy(half);
}

int main(void)
{
    spmd_test_init();
    P = spmd_process_count();
    L = spmd_local_device_count();
    me = spmd_process_index();
    if (P * L > 32) {
        fprintf(stderr, "needs at most 32 devices\n");
        spmd_finalize();
        return SPMD_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_global_passes_through),
        cmocka_unit_test(test_other_layout_is_resharded),
        cmocka_unit_test(test_device_put_check),
        cmocka_unit_test(test_device_put_who_takes_part),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
