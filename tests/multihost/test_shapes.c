/* Host-local ⇄ global shapes on 1-D and (process, local) meshes, against the rule of
 * SEMANTICS.md: a dimension mapped to axes A scales by prod(global sizes) / prod(local sizes). */
#include <stdlib.h>

#include "testutil.h"

static int P, L; /* processes, devices per process */

/* A mesh over every device, in id order (process-major). */
static spmd_mesh *mesh_of(int ndim, const int *shape, const char **names)
{
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(ndim, shape, names, NULL, 0, &mesh));
    return mesh;
}

/* Converts both ways and checks against the expected global shape. */
static void check(const spmd_mesh *mesh, const char *spec_text, int ndim, const int64_t *local,
                  const int64_t *expected_global)
{
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse(spec_text, &spec));
    int64_t global[4] = {0}, back[4] = {0};
    assert_ok(spmd_local_to_global_shape(mesh, spec, ndim, local, global));
    for (int d = 0; d < ndim; d++)
        assert_int_equal(global[d], expected_global[d]);
    assert_ok(spmd_global_to_local_shape(mesh, spec, ndim, global, back));
    for (int d = 0; d < ndim; d++)
        assert_int_equal(back[d], local[d]);
    spmd_spec_destroy(spec);
}

static void test_one_axis_over_all_devices(void **state)
{
    (void)state;
    int n = P * L;
    const char *x = "x";
    spmd_mesh *mesh = mesh_of(1, &n, &x);
    /* P('x'): the processes' blocks are concatenated */
    check(mesh, "'x', None", 2, (int64_t[]){2 * L, 3}, (int64_t[]){2 * L * P, 3});
    check(mesh, "None, 'x'", 2, (int64_t[]){5, L}, (int64_t[]){5, L * P});
    check(mesh, "", 2, (int64_t[]){4, 7}, (int64_t[]){4, 7}); /* P(): unchanged */
    check(mesh, "", 0, NULL, NULL);                           /* scalars */
    spmd_mesh_destroy(mesh);
}

static void test_process_by_local_mesh(void **state)
{
    (void)state;
    int shape[2] = {P, L};
    const char *names[2] = {"host", "dev"};
    spmd_mesh *mesh = mesh_of(2, shape, names);
    check(mesh, "'host'", 1, (int64_t[]){4}, (int64_t[]){4 * P});
    check(mesh, "'dev'", 1, (int64_t[]){2 * L}, (int64_t[]){2 * L}); /* stays in a process */
    check(mesh, "('host', 'dev')", 1, (int64_t[]){3 * L}, (int64_t[]){3 * L * P});
    check(mesh, "('dev', 'host')", 1, (int64_t[]){L}, (int64_t[]){L * P});
    check(mesh, "None, 'host'", 2, (int64_t[]){3, 2}, (int64_t[]){3, 2 * P});
    check(mesh, "'dev', 'host'", 2, (int64_t[]){L, 1}, (int64_t[]){L, P});
    spmd_mesh_destroy(mesh);
}

static void test_errors(void **state)
{
    (void)state;
    int n = P * L;
    const char *x = "x";
    spmd_mesh *mesh = mesh_of(1, &n, &x);
    spmd_spec *spec = NULL, *bad_axis = NULL, *too_long = NULL;
    assert_ok(spmd_spec_parse("'x'", &spec));
    assert_ok(spmd_spec_parse("'y'", &bad_axis));
    assert_ok(spmd_spec_parse("'x', None", &too_long));
    int64_t in[1] = {2 * L}, out[1];
    assert_status(spmd_local_to_global_shape(NULL, spec, 1, in, out), SPMD_ERR_INVALID_ARGUMENT,
                  "mesh");
    assert_status(spmd_local_to_global_shape(mesh, NULL, 1, in, out), SPMD_ERR_INVALID_ARGUMENT,
                  "spec");
    assert_status(spmd_local_to_global_shape(mesh, spec, 1, NULL, out), SPMD_ERR_INVALID_ARGUMENT,
                  "NULL");
    assert_status(spmd_local_to_global_shape(mesh, spec, -1, in, out), SPMD_ERR_INVALID_ARGUMENT,
                  "ndim=-1");
    assert_status(spmd_local_to_global_shape(mesh, bad_axis, 1, in, out), SPMD_ERR_SPEC, "'y'");
    assert_status(spmd_local_to_global_shape(mesh, too_long, 1, in, out), SPMD_ERR_SPEC,
                  "2 entries");
    int64_t negative[1] = {-2};
    assert_status(spmd_local_to_global_shape(mesh, spec, 1, negative, out), SPMD_ERR_SHAPE,
                  "negative");
    if (L > 1) {
        int64_t odd[1] = {L + 1};
        assert_status(spmd_local_to_global_shape(mesh, spec, 1, odd, out), SPMD_ERR_SHAPE,
                      "dimension 0", "not divisible");
    }
    if (P * L > 1) {
        int64_t odd[1] = {P * L + 1};
        assert_status(spmd_global_to_local_shape(mesh, spec, 1, odd, out), SPMD_ERR_SHAPE,
                      "not divisible", "global");
    }
    spmd_spec_destroy(spec);
    spmd_spec_destroy(bad_axis);
    spmd_spec_destroy(too_long);
    spmd_mesh_destroy(mesh);
}

/* Devices interleaved across processes: no process owns a subcube. */
static void test_non_contiguous_mesh(void **state)
{
    (void)state;
    if (P < 2 || L < 2)
        skip();
    int n = P * L, *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++)
        ids[i] = (i % P) * L + i / P; /* column-major over (process, local) */
    const char *x = "x";
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, &n, &x, ids, n, &mesh));
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'x'", &spec));
    int64_t in[1] = {L}, out[1];
    assert_status(spmd_local_to_global_shape(mesh, spec, 1, in, out), SPMD_ERR_INVALID_ARGUMENT,
                  "process", "spmd_array_from_single_device_arrays");
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
    free(ids);
}

/* A mesh without this process's devices has no host-local part here. */
static void test_mesh_without_this_process(void **state)
{
    (void)state;
    if (P < 2)
        skip();
    int *ids = malloc((size_t)L * sizeof *ids);
    for (int i = 0; i < L; i++)
        ids[i] = i; /* process 0's devices */
    const char *x = "x";
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, &L, &x, ids, L, &mesh));
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'x'", &spec));
    int64_t in[1] = {L}, out[1];
    spmd_status st = spmd_local_to_global_shape(mesh, spec, 1, in, out);
    if (spmd_process_index() == 0) {
        assert_int_equal(st, SPMD_OK);
        assert_int_equal(out[0], L);
    } else {
        assert_int_equal(st, SPMD_ERR_INVALID_ARGUMENT);
    }
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
    free(ids);
}

int main(void)
{
    spmd_test_init();
    P = spmd_process_count();
    L = spmd_local_device_count();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_axis_over_all_devices),
        cmocka_unit_test(test_process_by_local_mesh),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_non_contiguous_mesh),
        cmocka_unit_test(test_mesh_without_this_process),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
