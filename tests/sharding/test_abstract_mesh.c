/* spmd_mesh_create_abstract: the sharding math of a mesh without devices (before spmd_init, of
 * any size), equal to a real mesh's where both exist; arrays refuse it. */
#include <stdlib.h>

#include "testutil.h"

static spmd_sharding *sharding_of(spmd_mesh *mesh, const char *spec)
{
    spmd_sharding *s = NULL;
    assert_ok(spmd_sharding_create_parse(mesh, spec, &s));
    return s;
}

/* A pod-sized mesh before spmd_init: boxes and replica ids from the definition. */
static void test_pod_mesh_without_devices(void **state)
{
    (void)state;
    assert_false(spmd_is_initialized());
    const int shape[2] = {1024, 8};
    const char *names[2] = {"a", "b"};
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create_abstract(2, shape, names, NULL, 0, &mesh));
    assert_true(spmd_mesh_is_abstract(mesh));
    assert_int_equal(spmd_mesh_size(mesh), 8192);
    spmd_sharding *ab = sharding_of(mesh, "'a', 'b'"), *a_only = sharding_of(mesh, "'a'");
    const int64_t global[2] = {8192, 8192};
    int64_t shard[2];
    assert_ok(spmd_sharding_shard_shape(ab, 2, global, shard));
    assert_int_equal(shard[0], 8);
    assert_int_equal(shard[1], 1024);
    for (int id = 0; id < 8192; id += 37) {
        spmd_box box;
        int a = id / 8, b = id % 8;
        assert_ok(spmd_sharding_device_box(ab, 2, global, id, &box));
        assert_int_equal(box.start[0], 8 * a);
        assert_int_equal(box.stop[0], 8 * a + 8);
        assert_int_equal(box.start[1], 1024 * b);
        assert_int_equal(box.stop[1], 1024 * b + 1024);
        assert_int_equal(spmd_sharding_replica_id(ab, id), 0);
        assert_int_equal(spmd_sharding_replica_id(a_only, id), b); /* 'b' replicates */
    }
    assert_int_equal(spmd_sharding_num_addressable_devices(ab), 0);
    /* before spmd_init too, the abstract mesh is the reason an array cannot be made */
    float host[4] = {0};
    spmd_array *x = NULL;
    assert_status(spmd_array_from_process_local_data(ab, host, 2, global, NULL, SPMD_DTYPE_F32, &x),
                  SPMD_ERR_INVALID_ARGUMENT, "argument 'sharding' is on an abstract mesh");
    assert_null(x);
    spmd_sharding_destroy(ab);
    spmd_sharding_destroy(a_only);
    spmd_mesh_destroy(mesh);
}

/* Where a real mesh exists too: the same boxes and replica ids, device by device, custom ids. */
static void test_equal_to_real_mesh(void **state)
{
    (void)state;
    spmd_test_init(); /* 8 CPU devices (ctest) */
    const int shape[2] = {4, 2}, ids[8] = {7, 0, 5, 2, 3, 6, 1, 4};
    const char *names[2] = {"x", "y"};
    spmd_mesh *real = NULL, *abstract = NULL;
    assert_ok(spmd_mesh_create(2, shape, names, ids, 8, &real));
    assert_ok(spmd_mesh_create_abstract(2, shape, names, ids, 8, &abstract));
    assert_false(spmd_mesh_is_abstract(real));
    static const char *const specs[] = {"'x', 'y'", "('y', 'x'), None", "None, 'x'", "'y'", ""};
    const int64_t global[2] = {16, 6};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        spmd_sharding *r = sharding_of(real, specs[k]), *a = sharding_of(abstract, specs[k]);
        for (int i = 0; i < 8; i++) {
            spmd_box br, ba;
            memset(&br, 0, sizeof br); /* entries past ndim are not written */
            memset(&ba, 0, sizeof ba);
            spmd_status sr = spmd_sharding_device_box(r, 2, global, ids[i], &br),
                        sa = spmd_sharding_device_box(a, 2, global, ids[i], &ba);
            assert_int_equal(sr, sa);
            if (sr == SPMD_OK)
                assert_memory_equal(&br, &ba, sizeof br);
            assert_int_equal(spmd_sharding_replica_id(r, ids[i]),
                             spmd_sharding_replica_id(a, ids[i]));
        }
        char tr[512], ta[512];
        assert_ok(spmd_sharding_format(r, tr, sizeof tr));
        assert_ok(spmd_sharding_format(a, ta, sizeof ta));
        assert_string_equal(tr, ta);
        /* arrays refuse the abstract sharding, saying why */
        float host[96] = {0};
        spmd_array *x = NULL;
        assert_status(spmd_device_put(host, 2, global, SPMD_DTYPE_F32, a, &x),
                      SPMD_ERR_INVALID_ARGUMENT, "abstract mesh", "spmd_mesh_create");
        assert_null(x);
        /* the real reason first, with global_shape or without (it cannot be inferred either) */
        for (int given = 0; given < 2; given++) {
            x = (spmd_array *)host; /* set to NULL on failure */
            assert_status(spmd_array_from_process_local_data(
                              a, host, 2, global, given ? global : NULL, SPMD_DTYPE_F32, &x),
                          SPMD_ERR_INVALID_ARGUMENT, "spmd_array_from_process_local_data",
                          "argument 'sharding' is on an abstract mesh", "spmd_mesh_create");
            assert_null(strstr(spmd_last_error(), "global_shape"));
            assert_null(x);
        }
        /* the same for a host-local array made global on the abstract mesh */
        if (k == 0) { /* a spec that divides the shape on the real mesh */
            assert_ok(spmd_device_put(host, 2, global, SPMD_DTYPE_F32, r, &x));
            spmd_array *g = (spmd_array *)host; /* set to NULL on failure */
            assert_status(spmd_host_local_to_global(x, abstract, spmd_sharding_spec(a), &g),
                          SPMD_ERR_INVALID_ARGUMENT, "spmd_host_local_to_global",
                          "argument 'mesh' is on an abstract mesh", "spmd_mesh_create");
            assert_null(g);
            spmd_array_destroy(x);
        }
        spmd_sharding_destroy(r);
        spmd_sharding_destroy(a);
    }
    spmd_mesh_destroy(real);
    spmd_mesh_destroy(abstract);
    assert_ok(spmd_finalize());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod_mesh_without_devices),
        cmocka_unit_test(test_equal_to_real_mesh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
