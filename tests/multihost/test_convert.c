/* Host-local ⇄ global arrays, against SEMANTICS.md's worked values: arange(4)·p on a 1-D mesh
 * with P('x'), on a (host, dev) mesh with P('host') and with P(); the (process, local) mesh
 * with P('x', 'y'); zero-copy where the shards already sit right, one copy otherwise. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static int P, L, me;

static spmd_mesh *make_mesh(int ndim, const int *shape, const char **names, const int *ids, int n)
{
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(ndim, shape, names, ids, n, &mesh));
    return mesh;
}

/* The mesh of this process's devices with the given local shape. */
static spmd_mesh *local_mesh(int ndim, const int *shape, const char **names)
{
    int ids[64];
    for (int i = 0; i < L; i++)
        ids[i] = spmd_local_device_id(i);
    return make_mesh(ndim, shape, names, ids, L);
}

static spmd_array *put(const void *host, int ndim, const int64_t *shape, spmd_dtype dtype,
                       spmd_mesh *mesh, const char *spec)
{
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create_parse(mesh, spec, &sh));
    spmd_array *a = NULL;
    assert_ok(spmd_device_put(host, ndim, shape, dtype, sh, &a));
    spmd_sharding_destroy(sh);
    return a;
}

/* The whole global value on this host. */
static void global_value(const spmd_array *g, void *out, size_t bytes)
{
    if (spmd_array_is_fully_addressable(g))
        assert_ok(spmd_array_to_host(g, out, bytes));
    else
        assert_ok(spmd_process_allgather(g, 1, out, bytes));
}

/* 1 when every shard of a is the buffer of b's shard on the same device. */
static int shares_buffers(const spmd_array *a, const spmd_array *b)
{
    if (spmd_array_num_shards(a) != spmd_array_num_shards(b))
        return 0;
    for (int i = 0; i < spmd_array_num_shards(a); i++) {
        spmd_shard sa, sb;
        assert_ok(spmd_array_shard(a, i, &sa));
        int found = 0;
        for (int j = 0; j < spmd_array_num_shards(b); j++) {
            assert_ok(spmd_array_shard(b, j, &sb));
            if (sb.device_id == sa.device_id)
                found = sb.data == sa.data;
        }
        if (!found)
            return 0;
    }
    return 1;
}

/* Converts, checks the global value and shape, converts back and checks bit-exactness. */
static void round_trip(spmd_array *local, spmd_mesh *mesh, const char *spec_text,
                       const float *expected, int ndim, const int64_t *global_shape, int zero_copy)
{
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse(spec_text, &spec));
    spmd_array *g = NULL, *back = NULL;
    assert_ok(spmd_host_local_to_global(local, mesh, spec, &g));
    assert_int_equal(spmd_array_ndim(g), ndim);
    int64_t count = 1;
    for (int d = 0; d < ndim; d++) {
        assert_int_equal(spmd_array_shape(g)[d], global_shape[d]);
        count *= global_shape[d];
    }
    float *value = malloc((size_t)count * sizeof *value);
    global_value(g, value, (size_t)count * sizeof *value);
    assert_memory_equal(value, expected, (size_t)count * sizeof *value);
    assert_int_equal(shares_buffers(g, local), zero_copy);

    assert_ok(spmd_global_to_host_local(g, mesh, spec, &back));
    int64_t n = spmd_array_size(local);
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    assert_ok(spmd_array_to_host(local, a, (size_t)n * sizeof *a));
    assert_ok(spmd_array_to_host(back, b, (size_t)n * sizeof *b));
    assert_memory_equal(a, b, (size_t)n * sizeof *a);
    assert_true(shares_buffers(back, g)); /* the way back never copies */
    /* and global -> host-local -> global again: bit-exact, still the same buffers */
    spmd_array *again = NULL;
    assert_ok(spmd_host_local_to_global(back, mesh, spec, &again));
    float *value2 = malloc((size_t)count * sizeof *value2);
    global_value(again, value2, (size_t)count * sizeof *value2);
    assert_memory_equal(value2, value, (size_t)count * sizeof *value);
    assert_true(shares_buffers(again, g));
    free(value2);
    spmd_array_destroy(again);
    free(a);
    free(b);
    free(value);
    spmd_array_destroy(back);
    spmd_array_destroy(g);
    spmd_spec_destroy(spec);
}

static void test_one_axis(void **state)
{
    (void)state;
    int n = P * L;
    const char *x = "x";
    spmd_mesh *mesh = make_mesh(1, &n, &x, NULL, 0), *lm = local_mesh(1, &L, &x);
    float mine[4], *expected = malloc((size_t)(4 * P) * sizeof *expected);
    for (int i = 0; i < 4; i++)
        mine[i] = (float)(i * me);
    for (int p = 0; p < P; p++)
        for (int i = 0; i < 4; i++)
            expected[4 * p + i] = (float)(i * p); /* [0 0 0 0, 0 1 2 3, 0 2 4 6, ...] */
    int64_t shape[1] = {4}, global_shape[1] = {4 * P};
    spmd_array *local = put(mine, 1, shape, SPMD_DTYPE_F32, lm, "'x'");
    round_trip(local, mesh, "'x'", expected, 1, global_shape, 1);
    /* device p·L + j holds the j-th 1/L block of process p's data */
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create_parse(mesh, "'x'", &sh));
    for (int j = 0; j < L; j++) {
        spmd_box box;
        assert_ok(spmd_sharding_device_box(sh, 1, global_shape, me * L + j, &box));
        assert_int_equal(box.start[0], me * 4 + j * (4 / L));
    }
    spmd_sharding_destroy(sh);
    spmd_array_destroy(local);
    if (L > 1) { /* the shards sit elsewhere (all on one device): one copy, same value */
        local = NULL;
        assert_ok(spmd_array_create_on_device(spmd_local_device_id(0), mine, 1, shape,
                                              SPMD_DTYPE_F32, &local));
        round_trip(local, mesh, "'x'", expected, 1, global_shape, 0);
        spmd_array_destroy(local);
    }
    free(expected);
    spmd_mesh_destroy(lm);
    spmd_mesh_destroy(mesh);
}

static void test_host_dev_mesh(void **state)
{
    (void)state;
    int shape2[2] = {P, L}, local2[2] = {1, L};
    const char *names[2] = {"host", "dev"};
    spmd_mesh *mesh = make_mesh(2, shape2, names, NULL, 0), *lm = local_mesh(2, local2, names);
    float mine[4], expected[64];
    for (int i = 0; i < 4; i++)
        mine[i] = (float)(i * me);
    for (int p = 0; p < P; p++)
        for (int i = 0; i < 4; i++)
            expected[4 * p + i] = (float)(i * p);
    int64_t shape[1] = {4}, global_shape[1] = {4 * P};
    /* P('host'): the same value, each process's part replicated over its devices */
    spmd_array *local = put(mine, 1, shape, SPMD_DTYPE_F32, lm, "'host'");
    round_trip(local, mesh, "'host'", expected, 1, global_shape, 1);
    spmd_array_destroy(local);
    /* P(): (4,) replicated everywhere; every process passes the same data */
    float same[4] = {0, 1, 2, 3};
    local = put(same, 1, shape, SPMD_DTYPE_F32, lm, "");
    round_trip(local, mesh, "", same, 1, shape, 1);
    spmd_array_destroy(local);
    spmd_mesh_destroy(lm);
    spmd_mesh_destroy(mesh);
}

/* SEMANTICS.md: mesh (P, L) ('x', 'y'), local (2, L) = arange(2L) + 2Lp with P('x', 'y') gives
 * global (2P, L) = arange(2PL). */
static void test_two_axes(void **state)
{
    (void)state;
    int shape2[2] = {P, L}, local2[2] = {1, L};
    const char *names[2] = {"x", "y"};
    spmd_mesh *mesh = make_mesh(2, shape2, names, NULL, 0), *lm = local_mesh(2, local2, names);
    float mine[8], expected[128];
    for (int i = 0; i < 2 * L; i++)
        mine[i] = (float)(i + 2 * L * me);
    for (int i = 0; i < 2 * L * P; i++)
        expected[i] = (float)i;
    int64_t shape[2] = {2, L}, global_shape[2] = {2 * P, L};
    spmd_array *local = put(mine, 2, shape, SPMD_DTYPE_F32, lm, "'x', 'y'");
    round_trip(local, mesh, "'x', 'y'", expected, 2, global_shape, 1);
    spmd_array_destroy(local);
    spmd_mesh_destroy(lm);
    spmd_mesh_destroy(mesh);
}

static void test_errors(void **state)
{
    (void)state;
    int n = P * L;
    const char *x = "x";
    spmd_mesh *mesh = make_mesh(1, &n, &x, NULL, 0), *lm = local_mesh(1, &L, &x);
    spmd_spec *spec = NULL, *replicated = NULL;
    assert_ok(spmd_spec_parse("'x'", &spec));
    assert_ok(spmd_spec_parse("", &replicated));
    float data[4] = {(float)me, 1, 2, 3};
    int64_t shape[1] = {4};
    spmd_array *local = put(data, 1, shape, SPMD_DTYPE_F32, lm, "'x'"), *out = local;
    assert_status(spmd_host_local_to_global(NULL, mesh, spec, &out), SPMD_ERR_INVALID_ARGUMENT,
                  "local");
    assert_null(out);
    assert_status(spmd_host_local_to_global(local, mesh, spec, NULL), SPMD_ERR_INVALID_ARGUMENT,
                  "global");
    spmd_array *g = NULL;
    assert_ok(spmd_host_local_to_global(local, mesh, spec, &g));
    /* the way back to another layout reshards first (a collective): the part of P() is the
     * whole value, process p's (p, 1, 2, 3) in process order; in one process, unchanged */
    out = NULL;
    assert_ok(spmd_global_to_host_local(g, mesh, replicated, &out));
    assert_int_equal(spmd_array_shape(out)[0], 4 * P);
    float whole[4 * 64];
    assert_ok(spmd_array_to_host(out, whole, sizeof whole));
    for (int p = 0; p < P; p++) {
        const float want[4] = {(float)p, 1, 2, 3};
        assert_memory_equal(whole + 4 * p, want, sizeof want);
    }
    spmd_array_destroy(out);
    spmd_spec *other = NULL;
    assert_ok(spmd_spec_parse("None, 'x'", &other));
    assert_status(spmd_global_to_host_local(g, mesh, other, &out), SPMD_ERR_SPEC, "2 entries");
    spmd_array_destroy(g);
    /* data declared replicated that differs between processes, under the check */
    spmd_array *rep = put(data, 1, shape, SPMD_DTYPE_F32, lm, "");
    setenv("SPMD_CHECK_REPLICATED_INPUTS", "1", 1);
    spmd_status st = spmd_host_local_to_global(rep, mesh, replicated, &g);
    unsetenv("SPMD_CHECK_REPLICATED_INPUTS");
    if (P > 1) {
        assert_int_equal(st, SPMD_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(spmd_last_error(), "replicated across processes"));
    } else {
        assert_int_equal(st, SPMD_OK);
        spmd_array_destroy(g);
    }
    spmd_array_destroy(rep);
    spmd_array_destroy(local);
    spmd_spec_destroy(other);
    spmd_spec_destroy(spec);
    spmd_spec_destroy(replicated);
    spmd_mesh_destroy(lm);
    spmd_mesh_destroy(mesh);
}

int main(void)
{
    spmd_test_init();
    P = spmd_process_count();
    L = spmd_local_device_count();
    me = spmd_process_index();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_axis),
        cmocka_unit_test(test_host_dev_mesh),
        cmocka_unit_test(test_two_axes),
        cmocka_unit_test(test_errors),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
