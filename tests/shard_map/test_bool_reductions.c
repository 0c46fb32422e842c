/*
 * psum and pmean of bool, as JAX: psum counts the true values into int32, pmean averages them
 * into float32 (psum([True, False]) over 2 devices -> [1, 1], pmean -> [0.5, 0.5]). Checked
 * against a host count over every device, over the whole mesh and over each axis of a 2-D mesh
 * when the devices allow one; then the errors (an out of another dtype, a shared buffer).
 */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

#define ELEMS 5

/* Device d's value at element k (d: position in the mesh, flat). */
static int truth(int d, int k) { return (d * 7 + k * 3) % 4 == 0 || k == ELEMS - 1; }

typedef struct job {
    const char *axes;
    int fail_kind; /* 0: none; 1: psum into float32; 2: psum in place */
} job;

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout;
    const job *j = user;
    int pos = spmd_mesh_device_position(spmd_ctx_mesh(ctx), spmd_ctx_device(ctx));
    int64_t shape[1] = {ELEMS};
    spmd_block flags, wrong;
    spmd_status st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_BOOL, &flags);
    if (st != SPMD_OK)
        return st;
    for (int k = 0; k < ELEMS; k++)
        ((unsigned char *)flags.data)[k] = (unsigned char)truth(pos, k);
    if (j->fail_kind == 1) {
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_F32, &wrong);
        return st == SPMD_OK ? spmd_psum(ctx, &flags, &wrong, j->axes) : st;
    }
    if (j->fail_kind == 2) {
        wrong = flags;
        wrong.dtype = SPMD_DTYPE_I32;
        wrong.data = flags.data;
        return spmd_psum(ctx, &flags, &wrong, j->axes);
    }
    st = spmd_psum(ctx, &flags, &out[0], j->axes);
    if (st == SPMD_OK)
        st = spmd_pmean(ctx, &flags, &out[1], j->axes);
    return st;
}

/* Runs the body on `mesh` and checks both outputs on every device's block against the counts
 * over the group of devices sharing every coordinate but those of `axes` (one axis index or
 * all). */
static void check_on(spmd_mesh *mesh, const char *axes, int group_axis)
{
    int n = spmd_mesh_size(mesh);
    spmd_spec *spec = NULL;
    char text[64];
    snprintf(text, sizeof text, spmd_mesh_ndim(mesh) == 1 ? "'%s'" : "('%s', '%s')",
             spmd_mesh_axis_name(mesh, 0), spmd_mesh_axis_name(mesh, 1));
    assert_ok(spmd_spec_parse(text, &spec));
    const spmd_spec *specs[2] = {spec, spec};
    spmd_out_desc descs[2] = {{1, {(int64_t)n * ELEMS}, SPMD_DTYPE_I32},
                              {1, {(int64_t)n * ELEMS}, SPMD_DTYPE_F32}};
    job j = {axes, 0};
    spmd_array *outs[2] = {NULL, NULL};
    assert_ok(spmd_shard_map(mesh, body, &j, 0, NULL, NULL, 2, descs, specs, NULL, outs));
    int32_t *counts = malloc((size_t)n * ELEMS * sizeof *counts);
    float *means = malloc((size_t)n * ELEMS * sizeof *means);
    assert_non_null(counts);
    assert_non_null(means);
    assert_ok(spmd_process_allgather(outs[0], 1, counts, (size_t)n * ELEMS * sizeof *counts));
    assert_ok(spmd_process_allgather(outs[1], 1, means, (size_t)n * ELEMS * sizeof *means));
    int cols = spmd_mesh_ndim(mesh) == 1 ? 1 : spmd_mesh_axis_size(mesh, 1);
    for (int d = 0; d < n; d++) {
        int row = d / cols, col = d % cols;
        for (int k = 0; k < ELEMS; k++) {
            int want = 0, members = 0;
            for (int e = 0; e < n; e++) {
                int same = group_axis < 0 || (group_axis == 0 ? e % cols == col : e / cols == row);
                if (same) {
                    want += truth(e, k);
                    members++;
                }
            }
            assert_int_equal(counts[d * ELEMS + k], want);
            assert_float_equal(means[d * ELEMS + k], (float)want / (float)members, 1e-6);
        }
    }
    free(counts);
    free(means);
    spmd_array_destroy(outs[0]);
    spmd_array_destroy(outs[1]);
    spmd_spec_destroy(spec);
}

static void test_bool_psum_pmean(void **state)
{
    (void)state;
    int n = spmd_device_count();
    const char *one[1] = {"i"};
    spmd_mesh *line = NULL;
    assert_ok(spmd_mesh_create(1, &n, one, NULL, 0, &line));
    check_on(line, "i", -1);
    spmd_mesh_destroy(line);
    if (n % 2 == 0 && n > 2) {
        int shape[2] = {2, n / 2};
        const char *two[2] = {"a", "b"};
        spmd_mesh *grid = NULL;
        assert_ok(spmd_mesh_create(2, shape, two, NULL, 0, &grid));
        check_on(grid, "a", 0);
        check_on(grid, "b", 1);
        check_on(grid, "a,b", -1);
        spmd_mesh_destroy(grid);
    }
}

static void test_bool_errors(void **state)
{
    (void)state;
    int n = spmd_device_count();
    const char *one[1] = {"i"};
    spmd_mesh *line = NULL;
    assert_ok(spmd_mesh_create(1, &n, one, NULL, 0, &line));
    job j = {"i", 1};
    assert_status(spmd_shard_map(line, body, &j, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL),
                  SPMD_ERR_SHAPE, "psum", "float32", "int32");
    j.fail_kind = 2;
    assert_status(spmd_shard_map(line, body, &j, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL),
                  SPMD_ERR_INVALID_ARGUMENT, "share memory");
    spmd_mesh_destroy(line);
}

int main(void)
{
    spmd_test_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bool_psum_pmean),
        cmocka_unit_test(test_bool_errors),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
