/* spmd_mesh_create_hybrid (mesh_utils.create_hybrid_device_mesh): for every way to split the
 * per-process and the per-run device counts over 1 to 3 axes, the exact device at every mesh
 * position against a reference built the other way round (process k's j-th device placed at
 * its coordinate), the subcube rule and the local shape; SEMANTICS.md's worked example; a
 * shard_map on the mesh (psum inside each process and across them); and every error. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 64

static int P, L;
static int by_process[MAX_DEVICES]; /* process k's devices, ascending ids, at [k * L ...] */
static const char *const names[3] = {"a", "b", "c"};

/* Process k's devices from the device list alone (no assumption about how ids are numbered). */
static int collect_devices(void)
{
    int filled[MAX_DEVICES] = {0};
    for (int id = 0; id < P * L; id++) { /* ascending ids: each process's in local order */
        spmd_device_info info;
        if (spmd_device_get_info(id, &info) != SPMD_OK || filled[info.process_index] >= L) {
            fprintf(stderr, "device %d: %s\n", id, spmd_last_error());
            return 0;
        }
        by_process[info.process_index * L + filled[info.process_index]++] = id;
    }
    return 1;
}

static void unravel(int index, int ndim, const int *shape, int *coords)
{
    for (int a = ndim - 1; a >= 0; a--) {
        coords[a] = index % shape[a];
        index /= shape[a];
    }
}

static int ravel(const int *coords, int ndim, const int *shape)
{
    int flat = 0;
    for (int a = 0; a < ndim; a++)
        flat = flat * shape[a] + coords[a];
    return flat;
}

/* The reference: device j of process k sits at coordinate q * per + r, where q is k unravelled
 * in `across` and r is j unravelled in `per`. */
static void reference(int ndim, const int *per, const int *across, int *ids)
{
    int shape[3], q[3], r[3], c[3];
    for (int a = 0; a < ndim; a++)
        shape[a] = per[a] * across[a];
    for (int k = 0; k < P; k++)
        for (int j = 0; j < L; j++) {
            unravel(k, ndim, across, q);
            unravel(j, ndim, per, r);
            for (int a = 0; a < ndim; a++)
                c[a] = q[a] * per[a] + r[a];
            ids[ravel(c, ndim, shape)] = by_process[k * L + j];
        }
}

static void check_one(int ndim, const int *per, const int *across)
{
    char label[128];
    int at = snprintf(label, sizeof label, "per");
    for (int a = 0; a < ndim; a++)
        at += snprintf(label + at, sizeof label - (size_t)at, " %d", per[a]);
    at += snprintf(label + at, sizeof label - (size_t)at, " across");
    for (int a = 0; a < ndim; a++)
        at += snprintf(label + at, sizeof label - (size_t)at, " %d", across[a]);
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create_hybrid(ndim, per, across, names, &mesh));
    int expected[MAX_DEVICES];
    reference(ndim, per, across, expected);
    assert_int_equal(spmd_mesh_ndim(mesh), ndim);
    assert_int_equal(spmd_mesh_size(mesh), P * L);
    for (int a = 0; a < ndim; a++) {
        assert_int_equal(spmd_mesh_axis_size(mesh, a), per[a] * across[a]);
        assert_string_equal(spmd_mesh_axis_name(mesh, a), names[a]);
    }
    for (int f = 0; f < P * L; f++)
        if (spmd_mesh_device_id(mesh, f) != expected[f])
            fail_msg("%s: position %d holds device %d, expected %d", label, f,
                     spmd_mesh_device_id(mesh, f), expected[f]);
    /* each process owns a block of shape per: contiguous, and its local mesh is that block */
    assert_ok(spmd_mesh_check_contiguous(mesh));
    int local[3];
    assert_ok(spmd_mesh_local_shape(mesh, local));
    for (int a = 0; a < ndim; a++)
        assert_int_equal(local[a], per[a]);
    assert_int_equal(spmd_mesh_num_local_devices(mesh), L);
    spmd_mesh_destroy(mesh);
}

/* Every split of n into `ndim` ordered factors, one after the other in `out`; returns the count. */
static int factorizations(int n, int ndim, int (*out)[3], int max)
{
    int count = 0, f[3] = {1, 1, 1};
    for (f[0] = 1; f[0] <= n; f[0]++)
        for (f[1] = 1; f[1] <= (ndim > 1 ? n : 1); f[1]++)
            for (f[2] = 1; f[2] <= (ndim > 2 ? n : 1); f[2]++)
                if (f[0] * f[1] * f[2] == n && count < max) {
                    memcpy(out[count], f, sizeof f);
                    count++;
                }
    return count;
}

static void test_every_split(void **state)
{
    (void)state;
    int pers[64][3], acrosses[64][3], checked = 0;
    for (int ndim = 1; ndim <= 3; ndim++) {
        int np = factorizations(L, ndim, pers, 64), na = factorizations(P, ndim, acrosses, 64);
        for (int i = 0; i < np; i++)
            for (int j = 0; j < na; j++, checked++)
                check_one(ndim, pers[i], acrosses[j]);
    }
    assert_true(checked >= 3);
}

/* SEMANTICS.md (a): 4 processes x 2 devices, per (1, 2), across (4, 1): row p = process p's
 * devices. In general, per (1, L), across (P, 1) puts process p's devices on row p; in one
 * process it is create_device_mesh: the devices in id order, reshaped. */
static void test_worked_example(void **state)
{
    (void)state;
    const int per[2] = {1, L}, across[2] = {P, 1};
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create_hybrid(2, per, across, names, &mesh));
    assert_int_equal(spmd_mesh_axis_size(mesh, 0), P);
    assert_int_equal(spmd_mesh_axis_size(mesh, 1), L);
    for (int p = 0; p < P; p++)
        for (int j = 0; j < L; j++) {
            spmd_device_info info;
            assert_ok(spmd_device_get_info(spmd_mesh_device_id(mesh, p * L + j), &info));
            assert_int_equal(info.process_index, p);
            assert_int_equal(info.local_ordinal, j);
        }
    if (P == 4 && L == 2) {
        const int rows[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        for (int f = 0; f < 8; f++)
            assert_int_equal(spmd_mesh_device_id(mesh, f), rows[f]);
    }
    spmd_mesh_destroy(mesh);
    if (P == 1) {
        int shape[2] = {2, L / 2};
        if (L % 2 == 0) {
            assert_ok(spmd_mesh_create_hybrid(2, shape, (const int[]){1, 1}, names, &mesh));
            for (int f = 0; f < L; f++)
                assert_int_equal(spmd_mesh_device_id(mesh, f), spmd_local_device_id(f));
            spmd_mesh_destroy(mesh);
        }
    }
}

/* Each device contributes its global id + 1: 'b' stays inside a process, 'a' spans them. */
static spmd_status sums(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    spmd_block mine;
    spmd_status st = spmd_ctx_alloc(ctx, 2, out[0].shape, SPMD_DTYPE_F32, &mine);
    if (st == SPMD_OK)
        st = spmd_op_fill(ctx, &mine, spmd_ctx_device(ctx) + 1);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &mine, &out[0], "b");
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &mine, &out[1], "a");
    return st;
}

static void test_shard_map_on_it(void **state)
{
    (void)state;
    const int per[2] = {1, L}, across[2] = {P, 1};
    spmd_mesh *mesh = NULL;
    spmd_spec *spec = NULL;
    assert_ok(spmd_mesh_create_hybrid(2, per, across, names, &mesh));
    assert_ok(spmd_spec_parse("'a', 'b'", &spec));
    const spmd_out_desc desc[2] = {{2, {P, L}, SPMD_DTYPE_F32}, {2, {P, L}, SPMD_DTYPE_F32}};
    const spmd_spec *specs[2] = {spec, spec};
    spmd_array *out[2] = {NULL, NULL};
    assert_ok(spmd_shard_map(mesh, sums, NULL, 0, NULL, NULL, 2, desc, specs, NULL, out));
    float within[MAX_DEVICES], across_sum[MAX_DEVICES];
    assert_ok(spmd_process_allgather(out[0], 1, within, sizeof within));
    assert_ok(spmd_process_allgather(out[1], 1, across_sum, sizeof across_sum));
    for (int p = 0; p < P; p++)
        for (int j = 0; j < L; j++) {
            float row = 0, column = 0; /* the host reference from the device list */
            for (int k = 0; k < L; k++)
                row += (float)(by_process[p * L + k] + 1);
            for (int q = 0; q < P; q++)
                column += (float)(by_process[q * L + j] + 1);
            assert_float_equal(within[p * L + j], row, 0);
            assert_float_equal(across_sum[p * L + j], column, 0);
        }
    spmd_array_destroy(out[0]);
    spmd_array_destroy(out[1]);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
}

static void test_errors(void **state)
{
    (void)state;
    const int per[2] = {1, L}, across[2] = {P, 1};
    spmd_mesh *mesh = (spmd_mesh *)&mesh; /* a failure must write NULL over it */
    assert_status(spmd_mesh_create_hybrid(2, per, across, names, NULL), SPMD_ERR_INVALID_ARGUMENT,
                  "spmd_mesh_create_hybrid", "'out' is NULL");
    assert_status(spmd_mesh_create_hybrid(2, NULL, across, names, &mesh), SPMD_ERR_INVALID_ARGUMENT,
                  "'per_process_shape' is NULL");
    assert_null(mesh);
    assert_status(spmd_mesh_create_hybrid(2, per, NULL, names, &mesh), SPMD_ERR_INVALID_ARGUMENT,
                  "'across_process_shape' is NULL");
    assert_status(spmd_mesh_create_hybrid(2, per, across, NULL, &mesh), SPMD_ERR_INVALID_ARGUMENT,
                  "'axis_names' is NULL");
    assert_status(spmd_mesh_create_hybrid(0, per, across, names, &mesh), SPMD_ERR_INVALID_ARGUMENT,
                  "ndim is 0", "1 to 8 axes");
    assert_status(spmd_mesh_create_hybrid(SPMD_MAX_MESH_AXES + 1, per, across, names, &mesh),
                  SPMD_ERR_INVALID_ARGUMENT, "ndim is 9");
    assert_status(spmd_mesh_create_hybrid(2, (const int[]){0, L}, across, names, &mesh),
                  SPMD_ERR_INVALID_ARGUMENT, "per_process_shape[0] is 0", ">= 1");
    assert_status(spmd_mesh_create_hybrid(2, per, (const int[]){P, -1}, names, &mesh),
                  SPMD_ERR_INVALID_ARGUMENT, "across_process_shape[1] is -1", ">= 1");
    assert_null(mesh);

    /* a per-process block of 2 L devices: JAX's "Number of devices ... mesh_shape" */
    char want_count[64], want_per[64], want_across[64];
    snprintf(want_count, sizeof want_count, "Number of devices %d (on each process)", L);
    snprintf(want_per, sizeof want_per, "per_process_shape (2, %d) holds %d", L, 2 * L);
    snprintf(want_across, sizeof want_across, "across_process_shape (%d, 1) the %d processes", P,
             P);
    assert_status(spmd_mesh_create_hybrid(2, (const int[]){2, L}, across, names, &mesh),
                  SPMD_ERR_INVALID_ARGUMENT, want_count, "must equal the product of mesh_shape",
                  want_per, want_across);
    assert_null(mesh);

    /* a grid of 2 P blocks: JAX's "Number of slices ... dcn_mesh_shape" */
    char want_slices[64], want_grid[64], want_block[64];
    snprintf(want_slices, sizeof want_slices, "Number of slices %d (processes)", P);
    snprintf(want_grid, sizeof want_grid, "across_process_shape (%d, 2) holds %d", P, 2 * P);
    snprintf(want_block, sizeof want_block, "per_process_shape (1, %d) each process's %d devices",
             L, L);
    assert_status(spmd_mesh_create_hybrid(2, per, (const int[]){P, 2}, names, &mesh),
                  SPMD_ERR_INVALID_ARGUMENT, want_slices,
                  "must equal the product of dcn_mesh_shape", want_grid, want_block);
    assert_null(mesh);

    /* names as spmd_mesh_create checks them */
    assert_status(spmd_mesh_create_hybrid(2, per, across, (const char *const[]){"x", "x"}, &mesh),
                  SPMD_ERR_INVALID_ARGUMENT, "spmd_mesh_create_hybrid", "both named 'x'");
    assert_status(spmd_mesh_create_hybrid(2, per, across, (const char *const[]){"x", NULL}, &mesh),
                  SPMD_ERR_INVALID_ARGUMENT, "spmd_mesh_create_hybrid");
    assert_null(mesh);
}

int main(void)
{
    spmd_test_init();
    P = spmd_process_count();
    L = spmd_local_device_count();
    if (P * L > MAX_DEVICES) {
        fprintf(stderr, "needs at most %d devices\n", MAX_DEVICES);
        spmd_finalize();
        return SPMD_TEST_SKIP;
    }
    if (!collect_devices()) {
        spmd_finalize();
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_split),
        cmocka_unit_test(test_worked_example),
        cmocka_unit_test(test_shard_map_on_it),
        cmocka_unit_test(test_errors),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
