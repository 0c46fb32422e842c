/* The sweeps of status.h, version.h, dtype.h, runtime.h and mpi.h (test_api_sweep): the
 * runtime itself, its queries, errors, logging, tracing and threads. */
#define _POSIX_C_SOURCE 200809L

#include "sweep.h"

/* ==== status.h, version.h ===================================================================== */

void sweep_spmd_status_string(void)
{
    Q_STR("unknown status", spmd_status_string((spmd_status)-50));
    Q_STR("unknown status", spmd_status_string((spmd_status)1));
    Q_STR("unknown status", spmd_status_string((spmd_status)INT_MAX));
    Q_STR("unknown status", spmd_status_string((spmd_status)INT_MIN));
}

void sweep_spmd_status_name(void)
{
    Q_STR("SPMD_UNKNOWN_STATUS", spmd_status_name((spmd_status)-50));
    Q_STR("SPMD_UNKNOWN_STATUS", spmd_status_name((spmd_status)1));
    Q_STR("SPMD_UNKNOWN_STATUS", spmd_status_name((spmd_status)INT_MAX));
    Q_STR("SPMD_UNKNOWN_STATUS", spmd_status_name((spmd_status)INT_MIN));
}

/* No arguments: the bad input is the state (before spmd_init, after a failure). */
void sweep_spmd_last_error(void)
{
    const char *msg = NULL;
    Q_THAT(msg = spmd_last_error(), msg != NULL, "returned NULL before spmd_init");
    Q_THAT((spmd_clear_error(), msg = spmd_last_error()), msg && msg[0] == '\0',
           "not \"\" after spmd_clear_error");
    Q_THAT((void)(spmd_finalize() == SPMD_OK), (msg = spmd_last_error()) && msg[0] != '\0',
           "empty after a failing spmd_finalize");
}

void sweep_spmd_last_error_location(void)
{
    const char *where = NULL;
    Q_THAT((spmd_clear_error(), where = spmd_last_error_location()), where && where[0] == '\0',
           "not \"\" after spmd_clear_error");
    Q_THAT((void)(spmd_finalize() == SPMD_OK),
           (where = spmd_last_error_location()) && strstr(where, "src/") && strstr(where, ".c:"),
           "no source location after a failing spmd_finalize");
}

void sweep_spmd_clear_error(void)
{
    Q_THAT(spmd_clear_error(), spmd_last_error()[0] == '\0', "left a message (before spmd_init)");
    Q_THAT(((void)(spmd_finalize() == SPMD_OK), spmd_clear_error()), spmd_last_error()[0] == '\0',
           "did not clear the message of a failing spmd_finalize");
}

void sweep_spmd_version_number(void) { Q_INT(SPMD_VERSION_NUMBER, spmd_version_number()); }

void sweep_spmd_version_string(void) { Q_STR(SPMD_VERSION_STRING, spmd_version_string()); }

/* ==== dtype.h ================================================================================= */

void sweep_spmd_dtype_size(void)
{
    Q_INT(0, spmd_dtype_size(COUNT));
    Q_INT(0, spmd_dtype_size(MINUS1));
    Q_INT(0, spmd_dtype_size((spmd_dtype)INT_MAX));
    Q_INT(0, spmd_dtype_size((spmd_dtype)INT_MIN));
}

void sweep_spmd_dtype_name(void)
{
    Q_STR("invalid", spmd_dtype_name(COUNT));
    Q_STR("invalid", spmd_dtype_name(MINUS1));
    Q_STR("invalid", spmd_dtype_name((spmd_dtype)INT_MAX));
    Q_STR("invalid", spmd_dtype_name((spmd_dtype)INT_MIN));
}

void sweep_spmd_dtype_from_name(void)
{
    char long_name[4096];
    memset(long_name, 'f', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    Q_INT(COUNT, spmd_dtype_from_name(NULL));
    Q_INT(COUNT, spmd_dtype_from_name(""));
    Q_INT(COUNT, spmd_dtype_from_name("float128"));
    Q_INT(COUNT, spmd_dtype_from_name("FLOAT32"));
    Q_INT(COUNT, spmd_dtype_from_name("float32 "));
    Q_INT(COUNT, spmd_dtype_from_name("invalid"));
    Q_INT(COUNT, spmd_dtype_from_name(long_name));
}

static float bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static int f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
static int bf16_is_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

/* NaN stays NaN (documented); values beyond the range round to infinity. */
void sweep_spmd_f32_to_f16(void)
{
    uint16_t h = 0;
    Q_THAT(h = spmd_f32_to_f16(bits_f32(0x7f800001u)), f16_is_nan(h), "a NaN became a number");
    Q_THAT(h = spmd_f32_to_f16(bits_f32(0xffc00000u)), f16_is_nan(h), "a NaN became a number");
    Q_THAT(h = spmd_f32_to_f16(1e10f), h == 0x7c00u, "1e10 did not round to +inf");
    Q_THAT(h = spmd_f32_to_f16(-3.4e38f), h == 0xfc00u, "-3.4e38 did not round to -inf");
}

void sweep_spmd_f16_to_f32(void)
{
    float f = 0;
    Q_THAT(f = spmd_f16_to_f32(0x7c01u), isnan(f), "the NaN 0x7c01 became a number");
    Q_THAT(f = spmd_f16_to_f32(0xfe00u), isnan(f), "the NaN 0xfe00 became a number");
    Q_THAT(f = spmd_f16_to_f32(0xfc00u), isinf(f) && f < 0, "0xfc00 is not -inf");
}

void sweep_spmd_f32_to_bf16(void)
{
    uint16_t b = 0;
    Q_THAT(b = spmd_f32_to_bf16(bits_f32(0x7f800001u)), bf16_is_nan(b), "a NaN became a number");
    Q_THAT(b = spmd_f32_to_bf16(bits_f32(0x7fffffffu)), bf16_is_nan(b) && !(b & 0x8000u),
           "the NaN 0x7fffffff became a number or changed sign");
    Q_THAT(b = spmd_f32_to_bf16(bits_f32(0xff800001u)), bf16_is_nan(b) && (b & 0x8000u),
           "the NaN 0xff800001 became a number or changed sign");
    Q_THAT(b = spmd_f32_to_bf16(bits_f32(0x7f7fffffu)), b == 0x7f80u,
           "FLT_MAX did not round to +inf");
}

void sweep_spmd_bf16_to_f32(void)
{
    float f = 0;
    Q_THAT(f = spmd_bf16_to_f32(0x7f81u), isnan(f), "the NaN 0x7f81 became a number");
    Q_THAT(f = spmd_bf16_to_f32(0xffc0u), isnan(f) && (f32_bits(f) & 0x80000000u),
           "the NaN 0xffc0 became a number or lost its sign");
}

/* ==== runtime.h =============================================================================== */

void sweep_spmd_init_options_init(void)
{
    spmd_init_options o;
    BAD(INV, spmd_init_options_init(NULL, SPMD_INIT_OPTIONS_VERSION));
    BAD_KEEP(INV, o, spmd_init_options_init(&o, 0));
    BAD_KEEP(INV, o, spmd_init_options_init(&o, SPMD_INIT_OPTIONS_VERSION + 1));
    BAD_KEEP(INV, o, spmd_init_options_init(&o, UINT_MAX));
    BAD(INV, spmd_init_options_init(NULL, 0));
}

/* A failing spmd_init must take no reference (nested or not): afterwards libspmd is as before. */
#define BAD_INIT(expr, initialized_before)                                                         \
    do {                                                                                           \
        if (case_begin(#expr)) {                                                                   \
            spmd_status st_ = (expr);                                                              \
            check_status(st_, INV, INV);                                                           \
            if (st_ == SPMD_OK)                                                                    \
                (void)(spmd_finalize() == SPMD_OK);                                                \
            else if (spmd_is_initialized() != (initialized_before))                                \
                case_fail("modified", "a failed spmd_init changed whether libspmd is "             \
                                      "initialized");                                              \
            else if (initialized_before && (spmd_finalize() != SPMD_OK || spmd_is_initialized() || \
                                            init_four_cpu_devices() != SPMD_OK))                   \
                case_fail("modified", "a failed nested spmd_init took a reference");               \
            case_end();                                                                            \
        }                                                                                          \
    } while (0)

static spmd_init_options g_opts;
/* The default options with one field changed. */
#define OPT(field, value)                                                                          \
    (g_opts = (spmd_init_options)SPMD_INIT_OPTIONS_INIT, g_opts.field = (value), &g_opts)

/* spmd_init(NULL) with environment variable `name` set to `value` (restored after). */
static spmd_status init_with_env(const char *name, const char *value)
{
    const char *old = getenv(name);
    char *saved = old ? strdup(old) : NULL;
    setenv(name, value, 1);
    spmd_status st = spmd_init(NULL);
    if (saved) {
        setenv(name, saved, 1);
        free(saved);
    } else {
        unsetenv(name);
    }
    return st;
}

void sweep_spmd_init(void)
{
    BAD_INIT(spmd_init(OPT(version, 0)), 0);
    BAD_INIT(spmd_init(OPT(version, SPMD_INIT_OPTIONS_VERSION + 1)), 0);
    BAD_INIT(spmd_init(OPT(version, UINT_MAX)), 0);
    BAD_INIT(spmd_init(OPT(num_cpu_devices, -1)), 0);
    BAD_INIT(spmd_init(OPT(num_cpu_devices, SPMD_MAX_CPU_DEVICES + 1)), 0);
    BAD_INIT(spmd_init(OPT(num_cpu_devices, INT_MAX)), 0);
    BAD_INIT(spmd_init(OPT(num_cpu_devices, INT_MIN)), 0);
    BAD_INIT(spmd_init(OPT(platform, 2)), 0);
    BAD_INIT(spmd_init(OPT(platform, -2)), 0);
    BAD_INIT(spmd_init(OPT(platform, INT_MAX)), 0);
    BAD_INIT(spmd_init(OPT(platform, INT_MIN)), 0);
    BAD_INIT(spmd_init(OPT(use_mpi, 2)), 0);
    BAD_INIT(spmd_init(OPT(use_mpi, -2)), 0);
    BAD_INIT(spmd_init(OPT(use_mpi, INT_MAX)), 0);
    BAD_INIT(spmd_init(OPT(use_mpi, INT_MIN)), 0);
    BAD_INIT(init_with_env("SPMD_NUM_CPU_DEVICES", "abc"), 0);
    BAD_INIT(init_with_env("SPMD_NUM_CPU_DEVICES", "0"), 0);
    BAD_INIT(init_with_env("SPMD_NUM_CPU_DEVICES", "-3"), 0);
    BAD_INIT(init_with_env("SPMD_NUM_CPU_DEVICES", "4097"), 0);
    BAD_INIT(init_with_env("SPMD_NUM_CPU_DEVICES", "99999999999999999999999"), 0);
    BAD_INIT(init_with_env("SPMD_PLATFORM", "tpu"), 0);
    BAD_INIT(init_with_env("SPMD_COLLECTIVE_TIMEOUT", "-1"), 0);
    BAD_INIT(init_with_env("SPMD_COLLECTIVE_TIMEOUT", "soon"), 0);
    BAD_INIT(init_with_env("SPMD_INIT_TIMEOUT", "-1"), 0);
    BAD_INIT(init_with_env("SPMD_INIT_TIMEOUT", "soon"), 0);
    BAD_INIT(init_with_env("SPMD_INIT_TIMEOUT", "inf"), 0);
    BAD_INIT(init_with_env("SPMD_BUFFER_POOL_MB", "-1"), 0);
    BAD_INIT(init_with_env("SPMD_SHM", "2"), 0);
    BAD_INIT(init_with_env("SPMD_SHM", "yes"), 0);
    /* nested: the options are checked, and a failure takes no reference */
    runtime_up();
    BAD_INIT(spmd_init(OPT(version, 0)), 1);
    BAD_INIT(spmd_init(OPT(num_cpu_devices, INT_MIN)), 1);
    BAD_INIT(spmd_init(OPT(use_mpi, INT_MAX)), 1);
}

void sweep_spmd_finalize(void)
{
    BAD(INV, spmd_finalize());
    runtime_up();
    if (spmd_finalize() != SPMD_OK)
        die("spmd_finalize", SPMD_ERR_INTERNAL);
    BAD(INV, spmd_finalize());
}

void sweep_spmd_is_initialized(void)
{
    Q_INT(0, spmd_is_initialized());
    Q_INT(0, ((void)(spmd_init(OPT(version, 0)) == SPMD_OK), spmd_is_initialized()));
    Q_INT(0, ((void)(spmd_finalize() == SPMD_OK), spmd_is_initialized()));
}

void sweep_spmd_process_index(void)
{
    Q_INT(-1, spmd_process_index());
    runtime_cycle();
    Q_INT(-1, spmd_process_index());
}

void sweep_spmd_process_count(void)
{
    Q_INT(0, spmd_process_count());
    runtime_cycle();
    Q_INT(0, spmd_process_count());
}

void sweep_spmd_device_count(void)
{
    Q_INT(0, spmd_device_count());
    runtime_cycle();
    Q_INT(0, spmd_device_count());
}

void sweep_spmd_local_device_count(void)
{
    Q_INT(0, spmd_local_device_count());
    runtime_cycle();
    Q_INT(0, spmd_local_device_count());
}

void sweep_spmd_local_device_id(void)
{
    Q_INT(-1, spmd_local_device_id(0));
    runtime_up();
    Q_INT(-1, spmd_local_device_id(-1));
    Q_INT(-1, spmd_local_device_id(NDEV));
    Q_INT(-1, spmd_local_device_id(INT_MAX));
    Q_INT(-1, spmd_local_device_id(INT_MIN));
}

void sweep_spmd_runtime_platform(void)
{
    spmd_platform p = SPMD_PLATFORM_CPU;
    Q_THAT(p = spmd_runtime_platform(), p == SPMD_PLATFORM_CPU || p == SPMD_PLATFORM_CUDA,
           "not an spmd_platform value before spmd_init");
    runtime_cycle();
    Q_THAT(p = spmd_runtime_platform(), p == SPMD_PLATFORM_CPU || p == SPMD_PLATFORM_CUDA,
           "not an spmd_platform value after spmd_finalize");
}

void sweep_spmd_device_get_info(void)
{
    spmd_device_info info;
    BAD_KEEP(INV, info, spmd_device_get_info(0, &info));
    runtime_up();
    BAD(INV, spmd_device_get_info(0, NULL));
    BAD_KEEP(INV, info, spmd_device_get_info(-1, &info));
    BAD_KEEP(INV, info, spmd_device_get_info(NDEV, &info));
    BAD_KEEP(INV, info, spmd_device_get_info(INT_MAX, &info));
    BAD_KEEP(INV, info, spmd_device_get_info(INT_MIN, &info));
}

void sweep_spmd_platform_name(void)
{
    Q_STR("invalid", spmd_platform_name((spmd_platform)2));
    Q_STR("invalid", spmd_platform_name((spmd_platform)-1));
    Q_STR("invalid", spmd_platform_name((spmd_platform)INT_MAX));
    Q_STR("invalid", spmd_platform_name((spmd_platform)INT_MIN));
}

void sweep_spmd_build_features(void)
{
    unsigned f = 0;
#ifdef SPMD_HAVE_MPI
    const unsigned want_mpi = SPMD_FEATURE_MPI;
#else
    const unsigned want_mpi = 0;
#endif
    Q_THAT(f = spmd_build_features(),
           (f & ~(SPMD_FEATURE_MPI | SPMD_FEATURE_CUDA | SPMD_FEATURE_NCCL)) == 0 &&
               (f & SPMD_FEATURE_MPI) == want_mpi,
           "unknown bits, or an MPI bit that disagrees with spmd/config.h (before spmd_init)");
}

static void sweep_log_sink(spmd_log_level level, int process, const char *message, void *user)
{
    (void)level, (void)process, (void)message, (void)user;
}

void sweep_spmd_set_log_callback(void)
{
    /* every argument is valid (NULL restores stderr): it must never fail outside a callback,
     * before or after spmd_init */
    static int user;
    spmd_status st = SPMD_OK;
    Q_THAT(st = spmd_set_log_callback(sweep_log_sink, NULL), st == SPMD_OK, "refused a callback");
    Q_THAT(st = spmd_set_log_callback(NULL, &user), st == SPMD_OK, "refused NULL (restore)");
    runtime_up();
    Q_THAT(st = spmd_set_log_callback(sweep_log_sink, &user), st == SPMD_OK,
           "refused a callback after spmd_init");
    Q_THAT(st = spmd_set_log_callback(NULL, NULL), st == SPMD_OK, "refused NULL after spmd_init");
}

void sweep_spmd_trace_start(void)
{
    spmd_trace_options o = SPMD_TRACE_OPTIONS_INIT;
    BAD(INV, spmd_trace_start("/tmp", NULL)); /* before spmd_init */
    runtime_up();
    BAD(INV, spmd_trace_start(NULL, NULL));
    BAD(INV, spmd_trace_start("", NULL));
    BAD(INV, spmd_trace_start("/nonexistent-spmd-dir/trace", NULL));
    BAD(INV, spmd_trace_start("/dev/null", NULL)); /* not a directory */
    o.version = 0;
    BAD(INV, spmd_trace_start("/tmp", &o));
    o = (spmd_trace_options)SPMD_TRACE_OPTIONS_INIT;
    o.records = 63;
    BAD(INV, spmd_trace_start("/tmp", &o));
    o.records = -1;
    BAD(INV, spmd_trace_start("/tmp", &o));
    o.records = (1L << 24) + 1;
    BAD(INV, spmd_trace_start("/tmp", &o));
    o = (spmd_trace_options)SPMD_TRACE_OPTIONS_INIT;
    o.digests = 2;
    BAD(INV, spmd_trace_start("/tmp", &o));
    Q_INT(0, spmd_trace_active()); /* nothing refused started a trace */
}

void sweep_spmd_trace_stop(void)
{
    Q_INT(SPMD_OK, spmd_trace_stop()); /* none runs: nothing to do */
    Q_INT(SPMD_OK, spmd_trace_stop());
}

void sweep_spmd_trace_active(void) { Q_INT(0, spmd_trace_active()); }

void sweep_spmd_thread_set_name(void)
{
    char longest[64];
    memset(longest, 'a', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    BAD(INV, spmd_thread_set_name(longest));
    BAD(INV, spmd_thread_set_name("it's"));
    BAD(INV, spmd_thread_set_name("tab\there"));
    spmd_status st = SPMD_OK;
    Q_THAT(st = spmd_thread_set_name(NULL), st == SPMD_OK, "refused NULL (no name)");
    Q_THAT(st = spmd_thread_set_name("loader"), st == SPMD_OK, "refused a good name");
    Q_THAT(st = spmd_thread_set_name(""), st == SPMD_OK, "refused \"\" (no name)");
}

static void *sweep_guard_thread(void *arg)
{
    spmd_status *st = arg;
    *st = spmd_thread_guard(0); /* not its guard to release */
    return NULL;
}

void sweep_spmd_thread_guard(void)
{
    spmd_status st = SPMD_OK;
    Q_THAT(st = spmd_thread_guard(1), st == SPMD_OK, "refused to set the guard");
    pthread_t t;
    spmd_status other = SPMD_OK;
    if (pthread_create(&t, NULL, sweep_guard_thread, &other) == 0) {
        pthread_join(t, NULL);
        Q_THAT((void)0, other == SPMD_ERR_INVALID_ARGUMENT,
               "another thread released the guard this thread holds");
    }
    Q_THAT(st = spmd_thread_guard(0), st == SPMD_OK, "refused to release the guard");
    Q_THAT(st = spmd_thread_guard(INT_MIN), st == SPMD_OK, "refused to release again");
}

/* ==== mpi.h =================================================================================== */

#ifdef SPMD_HAVE_MPI
void sweep_spmd_init_mpi(void)
{
    /* MPI is not initialized in this process: spmd_init_mpi needs the caller to have done it */
    BAD_INIT(spmd_init_mpi(MPI_COMM_NULL, NULL), 0);
    BAD_INIT(spmd_init_mpi(MPI_COMM_WORLD, NULL), 0);
    BAD_INIT(spmd_init_mpi(MPI_COMM_WORLD, OPT(version, 0)), 0);
    BAD_INIT(spmd_init_mpi(MPI_COMM_NULL, OPT(num_cpu_devices, INT_MIN)), 0);
}

void sweep_spmd_mpi_comm(void)
{
    MPI_Comm c = MPI_COMM_WORLD;
    Q_THAT(c = spmd_mpi_comm(), c == MPI_COMM_NULL, "not MPI_COMM_NULL before spmd_init");
    runtime_up(); /* one process, no launcher: no MPI */
    Q_THAT(c = spmd_mpi_comm(), c == MPI_COMM_NULL, "not MPI_COMM_NULL in a run without MPI");
}
#endif
