/* JAX's local pmap, pmap(f, devices=jax.local_devices()), under several processes: each process
 * runs its own pmap over its own devices, with no communication with the others. Each process
 * here makes a different number of calls with its own data (any exchange between processes
 * would then mismatch or time out), and checks each result against a host reference: a psum
 * over this process's devices only, axis_index 0..L-1 everywhere, out_axes NONE verified. Also
 * a shard_map on a mesh of this process's devices, and the errors of a local pmap. Then every
 * process meets at a barrier: they are still in step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static int P, L, me;
static int local_ids[64];

enum { C = 3 }; /* each device's row has C elements */

/* out[0] = x + psum(x) over the pmap's devices; out[1] = psum(x) (the same everywhere,
 * out_axes NONE); out[2] = axis_index. */
static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)nout, (void)user;
    int index = -1;
    spmd_status st = spmd_psum(ctx, &in[0], &out[1], "i");
    if (st == SPMD_OK)
        st = spmd_axis_index(ctx, "i", &index);
    if (st != SPMD_OK)
        return st;
    const float *x = in[0].data, *sum = out[1].data;
    float *y = out[0].data;
    for (int c = 0; c < C; c++)
        y[c] = x[c] + sum[c];
    *(int32_t *)out[2].data = index;
    return SPMD_OK;
}

/* An (L, C) array on this process's devices, row i on local device i. */
static spmd_array *local_rows(const float *host)
{
    const char *name = "i";
    spmd_mesh *mesh = NULL;
    spmd_sharding *rows = NULL;
    spmd_array *x = NULL;
    int64_t shape[2] = {L, C};
    assert_ok(spmd_mesh_create(1, &L, &name, local_ids, L, &mesh));
    assert_ok(spmd_sharding_create_parse(mesh, "'i'", &rows));
    assert_ok(spmd_device_put(host, 2, shape, SPMD_DTYPE_F32, rows, &x));
    spmd_sharding_destroy(rows);
    spmd_mesh_destroy(mesh);
    return x;
}

static void test_independent_pmaps(void **state)
{
    (void)state;
    const spmd_out_desc descs[3] = {
        {1, {C}, SPMD_DTYPE_F32}, {1, {C}, SPMD_DTYPE_F32}, {0, {0}, SPMD_DTYPE_I32}};
    const int out_axes[3] = {0, SPMD_NONE, 0};
    int calls = 1 + 2 * me; /* a different number on every process */
    for (int k = 0; k < calls; k++) {
        float xs[64 * C];
        for (int i = 0; i < L * C; i++)
            xs[i] = (float)(1000 * me + 100 * k + i); /* this process's own data */
        spmd_array *x = local_rows(xs), *out[3] = {NULL, NULL, NULL};
        assert_ok(
            spmd_pmap(body, NULL, 1, &x, NULL, 3, descs, out_axes, "i", local_ids, L, NULL, out));
        /* the host reference: sums over this process's rows only */
        float sum[C] = {0}, y[64 * C], s[C];
        int32_t index[64];
        for (int i = 0; i < L; i++)
            for (int c = 0; c < C; c++)
                sum[c] += xs[i * C + c];
        /* plain arrays of this process's devices: (L, C), (C,), (L,) */
        for (int j = 0; j < 3; j++)
            assert_true(spmd_array_is_fully_addressable(out[j]));
        assert_int_equal(spmd_array_shape(out[0])[0], L);
        assert_int_equal(spmd_array_ndim(out[1]), 1);
        assert_ok(spmd_array_to_host(out[0], y, sizeof y));
        assert_ok(spmd_array_to_host(out[1], s, sizeof s));
        assert_ok(spmd_array_to_host(out[2], index, sizeof index));
        for (int i = 0; i < L; i++) {
            for (int c = 0; c < C; c++)
                assert_float_equal(y[i * C + c], xs[i * C + c] + sum[c], 0);
            assert_int_equal(index[i], i);
        }
        for (int c = 0; c < C; c++)
            assert_float_equal(s[c], sum[c], 0);
        /* row i on local device i */
        for (int i = 0; i < L; i++) {
            spmd_shard sh;
            assert_ok(spmd_array_shard(out[0], i, &sh));
            assert_int_equal(sh.device_id, local_ids[i]);
        }
        for (int j = 0; j < 3; j++)
            spmd_array_destroy(out[j]);
        spmd_array_destroy(x);
    }
    assert_ok(spmd_sync_global_devices("after the local pmaps"));
}

/* The devices in another order: index i runs on devices[i], still this process alone. */
static void test_reversed_local_devices(void **state)
{
    (void)state;
    int reversed[64];
    for (int i = 0; i < L; i++)
        reversed[i] = local_ids[L - 1 - i];
    float xs[64 * C];
    for (int i = 0; i < L * C; i++)
        xs[i] = (float)(7 * me + i);
    spmd_array *x = local_rows(xs), *out[3] = {NULL, NULL, NULL};
    const spmd_out_desc descs[3] = {
        {1, {C}, SPMD_DTYPE_F32}, {1, {C}, SPMD_DTYPE_F32}, {0, {0}, SPMD_DTYPE_I32}};
    const int out_axes[3] = {0, SPMD_NONE, 0};
    int rounds = me == 0 ? 2 : 1;
    for (int k = 0; k < rounds; k++) { /* the input is resharded onto the reversed devices */
        assert_ok(
            spmd_pmap(body, NULL, 1, &x, NULL, 3, descs, out_axes, "i", reversed, L, NULL, out));
        int32_t index[64];
        assert_ok(spmd_array_to_host(out[2], index, sizeof index));
        for (int i = 0; i < L; i++)
            assert_int_equal(index[i], i);
        spmd_shard sh;
        assert_ok(spmd_array_shard(out[2], 0, &sh)); /* mesh order: index 0 on devices[0] */
        assert_int_equal(sh.device_id, reversed[0]);
        for (int j = 0; j < 3; j++)
            spmd_array_destroy(out[j]);
    }
    spmd_array_destroy(x);
    assert_ok(spmd_sync_global_devices("after the reversed local pmaps"));
}

/* spmd_shard_map on a mesh of this process's devices: also this process alone. */
static spmd_status block_psum(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "i");
}

static void test_local_shard_map(void **state)
{
    (void)state;
    spmd_spec *rows = NULL, *replicated = NULL;
    assert_ok(spmd_spec_parse("'i'", &rows));
    assert_ok(spmd_spec_parse("", &replicated));
    const char *name = "i";
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, &L, &name, local_ids, L, &mesh));
    const spmd_out_desc desc = {2, {1, C}, SPMD_DTYPE_F32};
    for (int k = 0; k < 2 + me; k++) {
        float xs[64 * C], sum[C] = {0}, got[C];
        for (int i = 0; i < L * C; i++) {
            xs[i] = (float)(31 * me + 5 * k + i);
            sum[i % C] += xs[i];
        }
        spmd_array *x = local_rows(xs), *y = NULL;
        assert_ok(spmd_shard_map(mesh, block_psum, NULL, 1, &x, (const spmd_spec *[]){rows}, 1,
                                 &desc, (const spmd_spec *[]){replicated}, NULL, &y));
        assert_ok(spmd_array_to_host(y, got, sizeof got));
        for (int c = 0; c < C; c++)
            assert_float_equal(got[c], sum[c], 0);
        spmd_array_destroy(y);
        spmd_array_destroy(x);
    }
    spmd_mesh_destroy(mesh);
    spmd_spec_destroy(rows);
    spmd_spec_destroy(replicated);
    assert_ok(spmd_sync_global_devices("after the local shard_maps"));
}

/* out[0] = psum of the row over the axis named by user. */
static spmd_status named_psum(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nin, (void)nout;
    return spmd_psum(ctx, &in[0], &out[0], user);
}

/* Local pmaps, as many as each process likes, must not evict a pmap over every process on one
 * process only: remade there, it would set up its mesh again while the others run the old. */
static void test_local_pmaps_keep_global_ones(void **state)
{
    (void)state;
    float host[64 * C], sums[64 * C];
    for (int i = 0; i < L; i++)
        for (int c = 0; c < C; c++)
            host[i * C + c] = (float)((me * L + i) * 10 + c);
    const spmd_out_desc desc = {1, {C}, SPMD_DTYPE_F32};
    int N = spmd_device_count();
    for (int round = 0; round < 2; round++) {
        spmd_array *x = local_rows(host), *y = NULL;
        assert_ok(spmd_pmap(named_psum, "g", 1, &x, NULL, 1, &desc, NULL, "g", NULL, 0, NULL, &y));
        assert_ok(spmd_array_to_host(y, sums, (size_t)L * C * sizeof(float)));
        for (int i = 0; i < L; i++)
            for (int c = 0; c < C; c++) {
                float want = 0;
                for (int d = 0; d < N; d++)
                    want += (float)(d * 10 + c);
                assert_true(sums[i * C + c] == want);
            }
        spmd_array_destroy(x);
        spmd_array_destroy(y);
        /* process 0 runs more distinct local pmaps than the cache holds, the others two */
        int many = me == 0 ? 40 : 2;
        for (int k = 0; k < many; k++) {
            char name[16];
            snprintf(name, sizeof name, "l%d", k);
            spmd_array *lx = local_rows(host), *ly = NULL;
            assert_ok(spmd_pmap(named_psum, name, 1, &lx, NULL, 1, &desc, NULL, name, local_ids, L,
                                NULL, &ly));
            spmd_array_destroy(lx);
            spmd_array_destroy(ly);
        }
    }
}

static void test_errors(void **state)
{
    (void)state;
    const spmd_out_desc descs[3] = {
        {1, {C}, SPMD_DTYPE_F32}, {1, {C}, SPMD_DTYPE_F32}, {0, {0}, SPMD_DTYPE_I32}};
    const int out_axes[3] = {0, SPMD_NONE, 0};
    float xs[64 * C] = {0};
    spmd_array *out[3] = {NULL, NULL, NULL};
    /* an input that spans processes: moving it would need them, so a local pmap refuses it */
    int n = P * L;
    const char *name = "i";
    spmd_mesh *all = NULL;
    spmd_sharding *rows = NULL;
    spmd_array *global = NULL;
    int64_t gshape[2] = {L, C}; /* the mapped size of a local pmap, but on every device */
    assert_ok(spmd_mesh_create(1, &n, &name, NULL, 0, &all));
    assert_ok(spmd_sharding_create_parse(all, "", &rows));
    assert_ok(spmd_device_put(xs, 2, gshape, SPMD_DTYPE_F32, rows, &global));
    assert_status(
        spmd_pmap(body, NULL, 1, &global, NULL, 3, descs, out_axes, "i", local_ids, L, NULL, out),
        SPMD_ERR_INCOMPATIBLE_DEVICES, "inputs[0] spans other processes", "local pmap");
    assert_null(out[0]);
    spmd_array_destroy(global);
    spmd_sharding_destroy(rows);
    spmd_mesh_destroy(all);
    /* a mapped size other than the number of devices given */
    if (L > 1) {
        spmd_array *x = local_rows(xs);
        assert_status(spmd_pmap(body, NULL, 1, &x, NULL, 3, descs, out_axes, "i", local_ids, L - 1,
                                NULL, out),
                      SPMD_ERR_INVALID_ARGUMENT, "were given but the mapped size is");
        spmd_array_destroy(x);
    }
    /* devices of several processes with host-local inputs: the mapped size counts them all */
    if (L * P != 2) {
        int mixed[2] = {local_ids[0], (local_ids[0] + L) % n};
        spmd_array *x = local_rows(xs);
        assert_status(
            spmd_pmap(body, NULL, 1, &x, NULL, 3, descs, out_axes, "i", mixed, 2, NULL, out),
            SPMD_ERR_INVALID_ARGUMENT, "were given but the mapped size is",
            "pass only its devices");
        spmd_array_destroy(x);
    }
    assert_ok(spmd_sync_global_devices("after the errors"));
}

int main(void)
{
    spmd_test_init();
    P = spmd_process_count();
    L = spmd_local_device_count();
    me = spmd_process_index();
    if (P < 2 || L > 64 || P * L > 64) {
        printf("needs several processes (a local pmap is the usual pmap in one); skipped\n");
        spmd_finalize();
        return SPMD_TEST_SKIP;
    }
    for (int i = 0; i < L; i++)
        local_ids[i] = spmd_local_device_id(i);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_independent_pmaps),
        cmocka_unit_test(test_reversed_local_devices),
        cmocka_unit_test(test_local_shard_map),
        cmocka_unit_test(test_local_pmaps_keep_global_ones),
        cmocka_unit_test(test_errors),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
