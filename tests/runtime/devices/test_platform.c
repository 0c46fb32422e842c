/* Platform and device-count selection from options and SPMD_* variables; clean failures. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdlib.h>

#include "testutil.h"

static void finalize_ok(void) { assert_ok(spmd_finalize()); }

static void test_cuda_request(void **state)
{
    (void)state;
    setenv("SPMD_PLATFORM", "cuda", 1);
    spmd_status st = spmd_init(NULL);
    unsetenv("SPMD_PLATFORM");
    if (!(spmd_build_features() & SPMD_FEATURE_CUDA)) {
        assert_int_equal(st, SPMD_ERR_UNSUPPORTED);
        assert_non_null(strstr(spmd_last_error(), "built without CUDA"));
    } else if (st == SPMD_OK) { /* a machine with a GPU */
        assert_int_equal(spmd_runtime_platform(), SPMD_PLATFORM_CUDA);
        spmd_device_info info;
        assert_ok(spmd_device_get_info(spmd_local_device_id(0), &info));
        assert_int_equal(info.platform, SPMD_PLATFORM_CUDA);
        finalize_ok();
    } else {
        assert_int_equal(st, SPMD_ERR_BACKEND);
        assert_non_null(strstr(spmd_last_error(), "no usable GPU"));
        assert_non_null(strstr(spmd_last_error(), "SPMD_PLATFORM=cpu"));
    }
    assert_false(spmd_is_initialized());
}

static void test_cpu_after_failure(void **state)
{
    (void)state;
    setenv("SPMD_PLATFORM", "bogus", 1);
    assert_status(spmd_init(NULL), SPMD_ERR_INVALID_ARGUMENT, "SPMD_PLATFORM", "cpu or cuda");
    assert_false(spmd_is_initialized());
    assert_int_equal(spmd_process_index(), -1);
    assert_int_equal(spmd_device_count(), 0);
    setenv("SPMD_PLATFORM", "cpu", 1);
    setenv("SPMD_NUM_CPU_DEVICES", "3", 1);
    assert_ok(spmd_init(NULL));
    assert_int_equal(spmd_runtime_platform(), SPMD_PLATFORM_CPU);
    assert_int_equal(spmd_local_device_count(), 3);
    assert_int_equal(spmd_device_count(), 3);
    finalize_ok();
    unsetenv("SPMD_PLATFORM");
}

static void test_bad_device_counts(void **state)
{
    (void)state;
    /* digits alone: strtol would take " 7" and "+7" but not "7 " */
    static const char *const bad[] = {"0", "-2", "abc", "3x", "100000", " 7", "+7", "7 ", "\t7"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("SPMD_NUM_CPU_DEVICES", bad[i], 1);
        assert_status(spmd_init(NULL), SPMD_ERR_INVALID_ARGUMENT, "SPMD_NUM_CPU_DEVICES", bad[i]);
        assert_false(spmd_is_initialized());
    }
    setenv("SPMD_NUM_CPU_DEVICES", "2", 1);
    setenv("SPMD_CUDA_DEVICES_PER_GPU", "0", 1);
    assert_status(spmd_init(NULL), SPMD_ERR_INVALID_ARGUMENT, "SPMD_CUDA_DEVICES_PER_GPU");
    unsetenv("SPMD_CUDA_DEVICES_PER_GPU");
}

/* SPMD_BLAS_THREADS: every BLAS call runs with that many threads (1 unless set), whatever the
 * machine's cores; a bad value is refused by name. With 1, OpenBLAS's idle pool is stopped (its
 * threads spin 0.1 s after they start or work); with more, it comes back and computes alike. */
extern int openblas_get_num_threads(void) __attribute__((weak));
extern int blas_server_avail __attribute__((weak)); /* OpenBLAS: its pool is up */
extern int blas_num_threads
    __attribute__((weak)); /* ... with this many threads, the caller's included */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111 };
extern void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc) __attribute__((weak));

/* A product large enough for OpenBLAS to share out among its threads, of small integers (every
 * sum exact in float), against a loop on the host. */
static void check_sgemm(void)
{
    enum { N = 256 };
    float *a = malloc(N * N * sizeof *a), *b = malloc(N * N * sizeof *b);
    float *c = malloc(N * N * sizeof *c);
    assert_true(a && b && c);
    for (int i = 0; i < N * N; i++) {
        a[i] = (float)(i % 5 - 2);
        b[i] = (float)((i * 7) % 3 - 1);
    }
    cblas_sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, N, N, N, 1.0f, a, N, b, N, 0.0f, c,
                N);
    for (int i = 0; i < N; i += 17)
        for (int j = 0; j < N; j += 13) {
            float want = 0;
            for (int k = 0; k < N; k++)
                want += a[i * N + k] * b[k * N + j];
            assert_true(c[i * N + j] == want);
        }
    free(a);
    free(b);
    free(c);
}

static void test_blas_threads(void **state)
{
    (void)state;
    static const char *const bad[] = {"0", "-1", "x", "2000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("SPMD_BLAS_THREADS", bad[i], 1);
        assert_status(spmd_init(NULL), SPMD_ERR_INVALID_ARGUMENT, "SPMD_BLAS_THREADS", bad[i]);
    }
    unsetenv("SPMD_BLAS_THREADS");
    if (!openblas_get_num_threads) {
        print_message("the BLAS is not OpenBLAS: its thread count is not read back here\n");
        return;
    }
    /* the pthread build has a pool where the machine has 2 cores or more */
    int pool = &blas_server_avail && &blas_num_threads && blas_num_threads > 1;
    assert_ok(spmd_init(NULL));
    assert_int_equal(openblas_get_num_threads(), 1);
    if (pool)
        assert_int_equal(blas_server_avail, 0);
    if (cblas_sgemm)
        check_sgemm();
    finalize_ok();
    setenv("SPMD_BLAS_THREADS", "3", 1);
    assert_ok(spmd_init(NULL));
    assert_int_equal(openblas_get_num_threads(), 3);
    if (pool)
        assert_int_equal(blas_server_avail, 1);
    if (cblas_sgemm)
        check_sgemm(); /* 3 threads: the pool stopped at the last start-up, back and grown */
    finalize_ok();
    unsetenv("SPMD_BLAS_THREADS");
    assert_ok(spmd_init(NULL)); /* and stopped again */
    if (pool)
        assert_int_equal(blas_server_avail, 0);
    if (cblas_sgemm)
        check_sgemm();
    finalize_ok();
}

/* An option set in code wins over the environment. */
static void test_options_override_environment(void **state)
{
    (void)state;
    setenv("SPMD_NUM_CPU_DEVICES", "2", 1);
    spmd_init_options o;
    assert_ok(spmd_init_options_init(&o, SPMD_INIT_OPTIONS_VERSION));
    assert_int_equal(o.num_cpu_devices, 0);
    assert_int_equal(o.platform, SPMD_AUTO);
    o.num_cpu_devices = 5;
    o.platform = SPMD_PLATFORM_CPU;
    o.use_mpi = 0;
    assert_ok(spmd_init(&o));
    assert_int_equal(spmd_local_device_count(), 5);
    assert_int_equal(spmd_process_count(), 1);
    finalize_ok();
    unsetenv("SPMD_NUM_CPU_DEVICES");
    assert_ok(spmd_init(NULL));
    assert_int_equal(spmd_local_device_count(), 1); /* the documented default */
    finalize_ok();
    assert_status(spmd_init_options_init(&o, 99), SPMD_ERR_INVALID_ARGUMENT, "version");
}

static void test_finalize_without_init(void **state)
{
    (void)state;
    assert_status(spmd_finalize(), SPMD_ERR_INVALID_ARGUMENT, "not initialized");
}

/* SPMD_LOG_LEVEL is checked like every other variable; level names in any case. */
static void test_log_level(void **state)
{
    (void)state;
    setenv("SPMD_LOG_LEVEL", "verbose", 1);
    assert_status(spmd_init(NULL), SPMD_ERR_INVALID_ARGUMENT, "SPMD_LOG_LEVEL", "\"verbose\"",
                  "error, warning, info or debug");
    assert_false(spmd_is_initialized());
    const char *good[] = {"DEBUG", "Info", "warning", "error", ""};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        setenv("SPMD_LOG_LEVEL", good[i], 1);
        assert_ok(spmd_init(NULL));
        finalize_ok();
    }
    unsetenv("SPMD_LOG_LEVEL");
}

/* SPMD_INIT_TIMEOUT and SPMD_COLLECTIVE_TIMEOUT take the same values and refuse the same ones
 * by name: a number of seconds in (0, 1e7]; set but empty means unset, as for every variable. */
static void test_bad_timeouts(void **state)
{
    (void)state;
    static const char *const variables[] = {"SPMD_INIT_TIMEOUT", "SPMD_COLLECTIVE_TIMEOUT"};
    static const char *const bad[] = {"abc", "-1",  "0",  "inf", "nan", "1e8",
                                      "5s",  " 2 ", " 2", "+2",  "2 ",  "0x10"};
    for (size_t v = 0; v < 2; v++) {
        const char *var = variables[v];
        char *saved = getenv(var) ? strdup(getenv(var)) : NULL;
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            char quoted[64];
            snprintf(quoted, sizeof quoted, "%s=\"%s\"", var, bad[i]);
            setenv(var, bad[i], 1);
            assert_status(spmd_init(NULL), SPMD_ERR_INVALID_ARGUMENT, quoted,
                          "is not a number of seconds in (0, 1e7]", "or unset it");
            assert_false(spmd_is_initialized());
        }
        setenv(var, "", 1); /* set but empty means unset, as for every variable */
        assert_ok(spmd_init(NULL));
        finalize_ok();
        setenv(var, "0.25", 1);
        assert_ok(spmd_init(NULL));
        finalize_ok();
        if (saved)
            setenv(var, saved, 1);
        else
            unsetenv(var);
        free(saved);
    }
}

/* A platform list as in JAX_PLATFORMS: devices from the first entry, every entry usable. */
static void expect_cuda_listed_after_cpu(const char *variable, const char *value)
{
    setenv(variable, value, 1);
    spmd_status st = spmd_init(NULL);
    if (!(spmd_build_features() & SPMD_FEATURE_CUDA)) {
        assert_int_equal(st, SPMD_ERR_UNSUPPORTED);
        assert_non_null(strstr(spmd_last_error(), "built without CUDA"));
    } else if (st == SPMD_OK) { /* a GPU: usable, but the devices come from cpu */
        assert_int_equal(spmd_runtime_platform(), SPMD_PLATFORM_CPU);
        finalize_ok();
    } else {
        assert_int_equal(st, SPMD_ERR_BACKEND);
    }
    unsetenv(variable);
}

/* JAX's variables stand in for unset SPMD_* ones; SPMD_* wins; bad values are named. */
static void test_jax_variables(void **state)
{
    (void)state;
    /* JAX_NUM_CPU_DEVICES sizes CPU devices: pin the platform (ctest sets cuda on a GPU run) */
    setenv("SPMD_PLATFORM", "cpu", 1);
    unsetenv("SPMD_NUM_CPU_DEVICES");
    setenv("JAX_NUM_CPU_DEVICES", "3", 1);
    assert_ok(spmd_init(NULL));
    assert_int_equal(spmd_local_device_count(), 3);
    finalize_ok();
    setenv("SPMD_NUM_CPU_DEVICES", "2", 1);
    assert_ok(spmd_init(NULL));
    assert_int_equal(spmd_local_device_count(), 2);
    finalize_ok();
    unsetenv("SPMD_NUM_CPU_DEVICES");
    setenv("JAX_NUM_CPU_DEVICES", "many", 1);
    assert_status(spmd_init(NULL), SPMD_ERR_INVALID_ARGUMENT, "JAX_NUM_CPU_DEVICES", "\"many\"");
    unsetenv("JAX_NUM_CPU_DEVICES");

    unsetenv("SPMD_PLATFORM"); /* else it wins over JAX_PLATFORMS */
    setenv("JAX_PLATFORMS", "cpu", 1);
    assert_ok(spmd_init(NULL));
    assert_int_equal(spmd_runtime_platform(), SPMD_PLATFORM_CPU);
    finalize_ok();
    static const char *const bad[][2] = {
        {"tpu", "\"tpu\""}, {"cpu,,cuda", "\"\""}, {"cpu,rocm", "\"rocm\""}, {",", "\"\""}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("JAX_PLATFORMS", bad[i][0], 1);
        assert_status(spmd_init(NULL), SPMD_ERR_INVALID_ARGUMENT, "JAX_PLATFORMS", bad[i][1],
                      "cpu or cuda");
        assert_false(spmd_is_initialized());
    }
    setenv("SPMD_PLATFORM", "cpu", 1); /* wins: JAX_PLATFORMS=, is not even read */
    assert_ok(spmd_init(NULL));
    finalize_ok();
    unsetenv("SPMD_PLATFORM");
    unsetenv("JAX_PLATFORMS");
    expect_cuda_listed_after_cpu("JAX_PLATFORMS", " cpu , cuda ");
    expect_cuda_listed_after_cpu("SPMD_PLATFORM", "cpu,gpu");
    setenv("SPMD_PLATFORM", "cpu,cpu", 1);
    assert_ok(spmd_init(NULL));
    assert_int_equal(spmd_runtime_platform(), SPMD_PLATFORM_CPU);
    finalize_ok();
    unsetenv("SPMD_PLATFORM");
}

/* Objects made before the last spmd_finalize are refused where new ones are made from them. */
static void test_objects_from_an_earlier_start_up(void **state)
{
    (void)state;
    assert_ok(spmd_init(NULL));
    int n = spmd_device_count();
    const char *names[1] = {"i"};
    spmd_mesh *mesh = NULL;
    spmd_sharding *sharding = NULL, *again = NULL;
    assert_ok(spmd_mesh_create(1, &n, names, NULL, 0, &mesh));
    assert_ok(spmd_sharding_create_parse(mesh, "'i'", &sharding));
    finalize_ok();
    assert_ok(spmd_init(NULL));
    assert_false(spmd_mesh_is_current(mesh));
    assert_status(spmd_sharding_create_parse(mesh, "'i'", &again), SPMD_ERR_INVALID_ARGUMENT,
                  "spmd_sharding_create", "'mesh'", "before the last spmd_finalize");
    assert_null(again);
    float host[4] = {0};
    int64_t shape[1] = {n};
    spmd_array *x = NULL;
    assert_status(spmd_device_put(host, 1, shape, SPMD_DTYPE_F32, sharding, &x),
                  SPMD_ERR_INVALID_ARGUMENT, "before the last spmd_finalize");
    assert_null(x);
    spmd_sharding_destroy(sharding);
    spmd_mesh_destroy(mesh);
    finalize_ok();
}

/* With MPI built, use_mpi=1 outside mpirun starts a one-process MPI (a singleton); MPI cannot
 * start twice in one process, which the second attempt must say. Runs last for that reason. */
static void test_forced_mpi(void **state)
{
    (void)state;
    spmd_init_options o = SPMD_INIT_OPTIONS_INIT;
    o.use_mpi = 1;
    if (!(spmd_build_features() & SPMD_FEATURE_MPI)) {
        assert_status(spmd_init(&o), SPMD_ERR_UNSUPPORTED, "without MPI");
        return;
    }
    assert_ok(spmd_init(&o));
    assert_int_equal(spmd_process_count(), 1);
    finalize_ok();
    assert_status(spmd_init(&o), SPMD_ERR_DISTRIBUTED, "finalized");
    o.use_mpi = SPMD_AUTO; /* no launcher: a plain single process still works */
    assert_ok(spmd_init(&o));
    finalize_ok();
}

int main(void)
{
    unsetenv("SPMD_PLATFORM");
    unsetenv("JAX_PLATFORMS");
    unsetenv("JAX_NUM_CPU_DEVICES");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_request),
        cmocka_unit_test(test_cpu_after_failure),
        cmocka_unit_test(test_bad_device_counts),
        cmocka_unit_test(test_blas_threads),
        cmocka_unit_test(test_options_override_environment),
        cmocka_unit_test(test_finalize_without_init),
        cmocka_unit_test(test_log_level),
        cmocka_unit_test(test_bad_timeouts),
        cmocka_unit_test(test_jax_variables),
        cmocka_unit_test(test_objects_from_an_earlier_start_up),
        cmocka_unit_test(test_forced_mpi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
