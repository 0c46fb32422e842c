/* spmd_init under mpirun: processes, the process-major device list, reference counting, and
 * concurrent use of the device workers. Expected values come from the launcher's environment. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static int env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

static void test_processes_and_devices(void **state)
{
    (void)state;
    int rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    int size = env_int("OMPI_COMM_WORLD_SIZE", 1);
    /* ctest runs the suite on CUDA devices too (tests/run_cuda.sh): N logical devices on GPU 0 */
    const char *platform = getenv("SPMD_PLATFORM");
    int cuda = platform && strcmp(platform, "cuda") == 0;
    int d = env_int(cuda ? "SPMD_CUDA_DEVICES_PER_GPU" : "SPMD_NUM_CPU_DEVICES", 1);
    spmd_platform want = cuda ? SPMD_PLATFORM_CUDA : SPMD_PLATFORM_CPU;
    assert_int_equal(spmd_process_index(), rank);
    assert_int_equal(spmd_process_count(), size);
    assert_int_equal(spmd_device_count(), size * d);
    assert_int_equal(spmd_local_device_count(), d);
    assert_int_equal(spmd_runtime_platform(), want);
    for (int k = 0; k < d; k++)
        assert_int_equal(spmd_local_device_id(k), rank * d + k);
    assert_int_equal(spmd_local_device_id(-1), -1);
    assert_int_equal(spmd_local_device_id(d), -1);
    for (int id = 0; id < size * d; id++) {
        spmd_device_info info;
        assert_ok(spmd_device_get_info(id, &info));
        assert_int_equal(info.id, id);
        assert_int_equal(info.process_index, id / d);
        assert_int_equal(info.local_ordinal, id % d);
        assert_int_equal(info.hardware_ordinal, cuda ? 0 : id % d);
        assert_int_equal(info.platform, want);
    }
    spmd_device_info info;
    assert_status(spmd_device_get_info(-1, &info), SPMD_ERR_INVALID_ARGUMENT, "out of range");
    assert_status(spmd_device_get_info(size * d, &info), SPMD_ERR_INVALID_ARGUMENT, "out of range");
    assert_status(spmd_device_get_info(0, NULL), SPMD_ERR_INVALID_ARGUMENT, "info");
}

static void test_features_and_version(void **state)
{
    (void)state;
#ifdef SPMD_HAVE_MPI
    assert_true(spmd_build_features() & SPMD_FEATURE_MPI);
#else
    assert_false(spmd_build_features() & SPMD_FEATURE_MPI);
#endif
    assert_int_equal(spmd_version_number(), SPMD_VERSION_NUMBER);
    assert_string_equal(spmd_version_string(), SPMD_VERSION_STRING);
    assert_string_equal(spmd_platform_name(SPMD_PLATFORM_CPU), "cpu");
    assert_string_equal(spmd_platform_name(SPMD_PLATFORM_CUDA), "cuda");
    assert_string_equal(spmd_platform_name((spmd_platform)9), "invalid");
}

static void test_reference_counting(void **state)
{
    (void)state;
    assert_ok(spmd_init(NULL));
    assert_ok(spmd_init(NULL));
    assert_ok(spmd_finalize());
    assert_ok(spmd_finalize());
    assert_true(spmd_is_initialized()); /* main's reference remains */
    spmd_init_options bad = SPMD_INIT_OPTIONS_INIT;
    bad.version = 0;
    assert_status(spmd_init(&bad), SPMD_ERR_INVALID_ARGUMENT, "version");
    bad = (spmd_init_options)SPMD_INIT_OPTIONS_INIT;
    bad.num_cpu_devices = -1;
    assert_status(spmd_init(&bad), SPMD_ERR_INVALID_ARGUMENT, "num_cpu_devices");
    bad = (spmd_init_options)SPMD_INIT_OPTIONS_INIT;
    bad.platform = 7;
    assert_status(spmd_init(&bad), SPMD_ERR_INVALID_ARGUMENT, "platform");
    bad = (spmd_init_options)SPMD_INIT_OPTIONS_INIT;
    bad.use_mpi = 5;
    assert_status(spmd_init(&bad), SPMD_ERR_INVALID_ARGUMENT, "use_mpi");
    assert_true(spmd_is_initialized());
}

/* Two user threads put and fetch arrays at once: the device workers serve both. */
typedef struct put_loop {
    spmd_sharding *sharding;
    int seed;
    int failures;
} put_loop;

static void *put_fetch_loop(void *p)
{
    put_loop *loop = p;
    enum { N = 24 };
    int64_t shape[1] = {N};
    int32_t host[N], back[N];
    for (int iter = 0; iter < 100; iter++) {
        for (int i = 0; i < N; i++)
            host[i] = loop->seed * 100000 + iter * 100 + i;
        spmd_array *a = NULL;
        if (spmd_device_put(host, 1, shape, SPMD_DTYPE_I32, loop->sharding, &a) != SPMD_OK ||
            spmd_array_to_host(a, back, sizeof back) != SPMD_OK ||
            memcmp(host, back, sizeof host) != 0)
            loop->failures++;
        spmd_array_destroy(a);
    }
    return NULL;
}

static void test_concurrent_callers(void **state)
{
    (void)state;
    int d = spmd_local_device_count();
    int ids[64];
    for (int k = 0; k < d; k++)
        ids[k] = spmd_local_device_id(k);
    const char *name = "x";
    spmd_mesh *mesh = NULL;
    spmd_sharding *sharding = NULL;
    assert_ok(spmd_mesh_create(1, &d, &name, ids, d, &mesh));
    /* 24 is divisible by 1, 2, 3 and 4 devices; replicate otherwise */
    assert_ok(spmd_sharding_create_parse(mesh, 24 % d == 0 ? "'x'" : "", &sharding));
    put_loop loops[2] = {{sharding, 1, 0}, {sharding, 2, 0}};
    pthread_t threads[2];
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, put_fetch_loop, &loops[t]), 0);
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_join(threads[t], NULL), 0);
    assert_int_equal(loops[0].failures, 0);
    assert_int_equal(loops[1].failures, 0);
    spmd_sharding_destroy(sharding);
    spmd_mesh_destroy(mesh);
}

int main(void)
{
    spmd_test_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_processes_and_devices),
        cmocka_unit_test(test_features_and_version),
        cmocka_unit_test(test_reference_counting),
        cmocka_unit_test(test_concurrent_callers),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failures);
}
