/* device_put_sharded / device_put_replicated / unreplicate / replicate against their
 * definitions (stack the slices, then shard the stacked axis; slice 0 without the leading axis),
 * for several dtypes and device subsets, one and several processes. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

enum { MAX_DEVICES = 64, ROWS = 3, COLS = 5 };

static int P, me, N;

static int is_local(int id)
{
    spmd_device_info info;
    assert_ok(spmd_device_get_info(id, &info));
    return info.process_index == me;
}

/* Device subsets: all in order, reversed, the even ids, one device of the last process. */
static int subset(int which, int *ids)
{
    int n = 0;
    for (int i = 0; i < N; i++) {
        if (which == 0)
            ids[n++] = i;
        else if (which == 1)
            ids[n++] = N - 1 - i;
        else if (which == 2 && i % 2 == 0)
            ids[n++] = i;
    }
    if (which == 3)
        ids[n++] = N - 1;
    return n;
}

/* Slice i's bytes: distinct per slice and element, whatever the dtype. */
static void fill_slice(unsigned char *dst, size_t bytes, int i)
{
    for (size_t b = 0; b < bytes; b++)
        dst[b] = (unsigned char)(17 * i + 3 * b + 1);
}

/* Checks every addressable shard of x (stacked over ids) against the slices. */
static void check_shards(const spmd_array *x, const int *ids, int n, unsigned char *const *host,
                         size_t bytes)
{
    int local = 0;
    for (int i = 0; i < n; i++)
        local += is_local(ids[i]);
    assert_int_equal(spmd_array_num_shards(x), local);
    unsigned char *buf = malloc(bytes);
    for (int s = 0; s < spmd_array_num_shards(x); s++) {
        spmd_shard shard;
        assert_ok(spmd_array_shard(x, s, &shard));
        int pos = -1;
        for (int i = 0; i < n; i++)
            if (ids[i] == shard.device_id)
                pos = i;
        assert_true(pos >= 0);
        assert_int_equal(shard.index.start[0], pos); /* device ids[i] holds slice i */
        assert_int_equal(shard.index.stop[0], pos + 1);
        assert_ok(spmd_array_shard_to_host(x, s, buf, bytes));
        assert_memory_equal(buf, host[pos], bytes);
    }
    free(buf);
}

static void test_put_sharded_and_replicated(void **state)
{
    (void)state;
    const spmd_dtype dtypes[] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_I32,
                                 SPMD_DTYPE_I64, SPMD_DTYPE_U8,  SPMD_DTYPE_BF16};
    int64_t shape[2] = {ROWS, COLS};
    for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++) {
        size_t bytes = ROWS * COLS * spmd_dtype_size(dtypes[t]);
        for (int which = 0; which < 4; which++) {
            int ids[MAX_DEVICES];
            int n = subset(which, ids);
            unsigned char *slices[MAX_DEVICES];
            const void *given[MAX_DEVICES];
            for (int i = 0; i < n; i++) {
                slices[i] = malloc(bytes);
                fill_slice(slices[i], bytes, i);
                given[i] = is_local(ids[i]) ? slices[i] : NULL; /* others' are not read */
            }
            spmd_array *x = NULL;
            assert_ok(spmd_device_put_sharded(n, given, 2, shape, dtypes[t], ids, &x));
            assert_int_equal(spmd_array_ndim(x), 3);
            assert_int_equal(spmd_array_shape(x)[0], n);
            assert_false(spmd_array_has_stacked_replicas(x));
            check_shards(x, ids, n, slices, bytes);
            if (spmd_array_is_fully_addressable(x)) { /* the global value is the stack */
                unsigned char *all = malloc(bytes * (size_t)n);
                assert_ok(spmd_array_to_host(x, all, bytes * (size_t)n));
                for (int i = 0; i < n; i++)
                    assert_memory_equal(all + bytes * (size_t)i, slices[i], bytes);
                free(all);
            }
            spmd_array_destroy(x);

            spmd_array *r = NULL;
            assert_ok(spmd_device_put_replicated(slices[0], 2, shape, dtypes[t], ids, n, &r));
            assert_true(spmd_array_has_stacked_replicas(r));
            unsigned char *same[MAX_DEVICES];
            for (int i = 0; i < n; i++)
                same[i] = slices[0];
            check_shards(r, ids, n, same, bytes);
            spmd_array_destroy(r);
            for (int i = 0; i < n; i++)
                free(slices[i]);
        }
    }
}

static void test_unreplicate(void **state)
{
    (void)state;
    int64_t shape[2] = {ROWS, COLS};
    float value[ROWS * COLS], back[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        value[i] = 0.5f * (float)i - 2.0f;
    for (int which = 0; which < 4; which++) {
        int ids[MAX_DEVICES];
        int n = subset(which, ids);
        spmd_array *r = NULL, *u = NULL;
        assert_ok(spmd_device_put_replicated(value, 2, shape, SPMD_DTYPE_F32, ids, n, &r));
        if (spmd_array_num_shards(r) == 0) { /* no device of this process in the subset */
            assert_status(spmd_unreplicate(r, &u), SPMD_ERR_NOT_ADDRESSABLE, "no shard");
            assert_null(u);
            spmd_array_destroy(r);
            continue;
        }
        assert_ok(spmd_unreplicate(r, &u));
        assert_int_equal(spmd_array_ndim(u), 2);
        assert_int_equal(spmd_array_shape(u)[0], ROWS);
        assert_int_equal(spmd_array_shape(u)[1], COLS);
        spmd_shard first, got;
        assert_ok(spmd_array_shard(r, 0, &first));
        assert_ok(spmd_array_shard(u, 0, &got));
        assert_int_equal(got.device_id, first.device_id);
        assert_ptr_equal(got.data, first.data); /* nothing moved */
        assert_ok(spmd_array_to_host(u, back, sizeof back));
        assert_memory_equal(back, value, sizeof back);
        memset(back, 0, sizeof back);
        assert_ok(spmd_unreplicate_to_host(r, back, sizeof back));
        assert_memory_equal(back, value, sizeof back);
        /* the result outlives the stacked array */
        spmd_array_destroy(r);
        assert_ok(spmd_array_to_host(u, back, sizeof back));
        assert_memory_equal(back, value, sizeof back);

        spmd_array *again = NULL;
        assert_ok(spmd_replicate(u, ids, n, &again));
        assert_true(spmd_array_has_stacked_replicas(again));
        float *stack[MAX_DEVICES];
        for (int i = 0; i < n; i++)
            stack[i] = value;
        check_shards(again, ids, n, (unsigned char *const *)stack, sizeof value);
        spmd_array_destroy(again);
        spmd_array_destroy(u);
    }
}

static void test_bad_input(void **state)
{
    (void)state;
    int ids[MAX_DEVICES];
    int n = subset(0, ids);
    int64_t shape[1] = {4};
    float v[4] = {1, 2, 3, 4};
    const void *given[MAX_DEVICES];
    for (int i = 0; i < n; i++)
        given[i] = v;
    spmd_array *x = NULL;
    assert_status(spmd_device_put_sharded(0, given, 1, shape, SPMD_DTYPE_F32, ids, &x),
                  SPMD_ERR_INVALID_ARGUMENT, "n=0");
    assert_status(spmd_device_put_sharded(n, NULL, 1, shape, SPMD_DTYPE_F32, ids, &x),
                  SPMD_ERR_INVALID_ARGUMENT, "host_shards");
    assert_status(spmd_device_put_replicated(v, 1, shape, SPMD_DTYPE_F32, NULL, n, &x),
                  SPMD_ERR_INVALID_ARGUMENT, "devices");
    assert_status(spmd_device_put_replicated(v, 1, shape, (spmd_dtype)99, ids, n, &x),
                  SPMD_ERR_INVALID_ARGUMENT, "dtype");
    int64_t negative[1] = {-1};
    assert_status(spmd_device_put_replicated(v, 1, negative, SPMD_DTYPE_F32, ids, n, &x),
                  SPMD_ERR_SHAPE, "negative");
    int twice[2] = {ids[0], ids[0]};
    assert_status(spmd_device_put_replicated(v, 1, shape, SPMD_DTYPE_F32, twice, 2, &x),
                  SPMD_ERR_INVALID_ARGUMENT, "twice");
    const void *missing[1] = {NULL};
    int mine[1] = {spmd_local_device_id(0)};
    assert_status(spmd_device_put_sharded(1, missing, 1, shape, SPMD_DTYPE_F32, mine, &x),
                  SPMD_ERR_INVALID_ARGUMENT, "entry 0", "belongs to this process");
    assert_null(x);
    /* unreplicate needs a stacked layout and an axis to drop */
    spmd_array *scalar = NULL, *u = NULL;
    assert_ok(spmd_array_create_on_device(mine[0], v, 0, NULL, SPMD_DTYPE_F32, &scalar));
    assert_status(spmd_unreplicate(scalar, &u), SPMD_ERR_SHAPE, "scalar");
    assert_status(spmd_unreplicate(NULL, &u), SPMD_ERR_INVALID_ARGUMENT, "'x'");
    spmd_array_destroy(scalar);
    if (spmd_local_device_count() > 1) {
        int local_ids[2] = {spmd_local_device_id(0), spmd_local_device_id(1)};
        int two = 2;
        const char *axis = "a";
        spmd_mesh *mesh = NULL;
        spmd_sharding *columns = NULL;
        assert_ok(spmd_mesh_create(1, &two, &axis, local_ids, 2, &mesh));
        assert_ok(spmd_sharding_create_parse(mesh, "None, 'a'", &columns));
        int64_t s2[2] = {2, 2};
        spmd_array *c = NULL;
        assert_ok(spmd_device_put(v, 2, s2, SPMD_DTYPE_F32, columns, &c));
        assert_status(spmd_unreplicate(c, &u), SPMD_ERR_SHAPE, "stacked layout");
        float small[1];
        assert_status(spmd_unreplicate_to_host(c, small, sizeof small), SPMD_ERR_SHAPE,
                      "stacked layout");
        spmd_array_destroy(c);
        spmd_sharding_destroy(columns);
        spmd_mesh_destroy(mesh);
    }
}

int main(void)
{
    spmd_test_init();
    P = spmd_process_count();
    me = spmd_process_index();
    N = spmd_device_count();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_sharded_and_replicated),
        cmocka_unit_test(test_unreplicate),
        cmocka_unit_test(test_bad_input),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
