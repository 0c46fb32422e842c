/* Bad input to every public function of mesh.h, spec.h, sharding.h, array.h and runtime.h: each
 * call must return its documented status with a message that says what is wrong, leave *out
 * NULL, leak nothing (the suite also runs under AddressSanitizer) and not crash. One process,
 * four CPU devices. Calls that might crash run in a child process (this program re-executed).
 * The number of (function, bad input) pairs exercised is printed at the end. */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int pairs; /* (function, bad input) pairs exercised */

static char sentinel_byte;
/* A non-NULL value that a failing constructor must overwrite with NULL. */
#define SENTINEL(T) ((T *)(void *)&sentinel_byte)

/* One bad call: its status and message fragments. */
#define BAD(expr, status, ...)                                                                     \
    do {                                                                                           \
        pairs++;                                                                                   \
        assert_status((expr), (status), __VA_ARGS__);                                              \
    } while (0)

/* One bad call of a constructor writing `var` (declared here): it must also leave var NULL. */
#define BAD_CTOR(T, var, expr, status, ...)                                                        \
    do {                                                                                           \
        T *var = SENTINEL(T);                                                                      \
        pairs++;                                                                                   \
        assert_status((expr), (status), __VA_ARGS__);                                              \
        if (var != NULL)                                                                           \
            fail_msg("%s failed but left *out = %p instead of NULL", #expr, (void *)var);          \
    } while (0)

/* A query given bad input returns its documented sentinel. */
#define BAD_INT(expr, want)                                                                        \
    do {                                                                                           \
        pairs++;                                                                                   \
        assert_int_equal((expr), (want));                                                          \
    } while (0)
#define BAD_NULL(expr)                                                                             \
    do {                                                                                           \
        pairs++;                                                                                   \
        assert_null(expr);                                                                         \
    } while (0)
#define BAD_STR(expr, want)                                                                        \
    do {                                                                                           \
        pairs++;                                                                                   \
        assert_string_equal((expr), (want));                                                       \
    } while (0)
/* A void call (destroy) that must simply not crash. */
#define BAD_VOID(expr)                                                                             \
    do {                                                                                           \
        pairs++;                                                                                   \
        expr;                                                                                      \
    } while (0)

static const char *self_path;

/* Four CPU devices, whatever the environment says and even where a GPU is usable. */
static spmd_status init_four_cpu_devices(void)
{
    spmd_init_options opts = SPMD_INIT_OPTIONS_INIT;
    opts.num_cpu_devices = 4;
    opts.platform = SPMD_PLATFORM_CPU;
    return spmd_init(&opts);
}

/* ---- fixture: a 2x2 mesh ('x', 'y') over the four devices, shardings, one array --------- */

static float host[64];
static const int64_t s44[2] = {4, 4};
static const int64_t s22[2] = {2, 2};
static spmd_mesh *g_mesh;                           /* Mesh('x': 2, 'y': 2) */
static spmd_spec *g_spec;                           /* P('x', 'y') */
static spmd_sharding *g_xy, *g_x, *g_rep, *g_tuple; /* P('x','y'), P('x'), P(), P(('x','y')) */
static spmd_array *g_array;                         /* (4, 4) float32 on g_xy */
static spmd_array *g_single[4];                     /* (2, 2) float32 on device k */

static int fixture_setup(void **state)
{
    (void)state;
    for (int i = 0; i < 64; i++)
        host[i] = (float)i;
    int shape[2] = {2, 2};
    const char *names[2] = {"x", "y"};
    spmd_status st = spmd_mesh_create(2, shape, names, NULL, 0, &g_mesh);
    if (st == SPMD_OK)
        st = spmd_spec_parse("'x', 'y'", &g_spec);
    if (st == SPMD_OK)
        st = spmd_sharding_create(g_mesh, g_spec, &g_xy);
    if (st == SPMD_OK)
        st = spmd_sharding_create_parse(g_mesh, "'x'", &g_x);
    if (st == SPMD_OK)
        st = spmd_sharding_create_parse(g_mesh, "", &g_rep);
    if (st == SPMD_OK)
        st = spmd_sharding_create_parse(g_mesh, "('x', 'y')", &g_tuple);
    if (st == SPMD_OK)
        st = spmd_device_put(host, 2, s44, SPMD_DTYPE_F32, g_xy, &g_array);
    for (int k = 0; k < 4 && st == SPMD_OK; k++)
        st = spmd_array_create_on_device(k, host, 2, s22, SPMD_DTYPE_F32, &g_single[k]);
    if (st != SPMD_OK) {
        fprintf(stderr, "fixture: %s: %s\n", spmd_status_name(st), spmd_last_error());
        return -1;
    }
    return 0;
}

static int fixture_teardown(void **state)
{
    (void)state;
    for (int k = 0; k < 4; k++)
        spmd_array_destroy(g_single[k]);
    spmd_array_destroy(g_array);
    spmd_sharding_destroy(g_tuple);
    spmd_sharding_destroy(g_rep);
    spmd_sharding_destroy(g_x);
    spmd_sharding_destroy(g_xy);
    spmd_spec_destroy(g_spec);
    spmd_mesh_destroy(g_mesh);
    return 0;
}

/* ---- child processes: calls that may crash ----------------------------------------------- */

static int child_expect(spmd_status got, spmd_status want, const char *fragment, const char *what)
{
    const char *msg = spmd_last_error();
    if (got == want && strstr(msg, fragment))
        return 0;
    fprintf(stderr, "child: %s returned %s (message: %s); expected %s with \"%s\"\n", what,
            spmd_status_name(got), msg, spmd_status_name(want), fragment);
    return 1;
}

static spmd_status fill_callback(const spmd_box *index, void *dst, void *user)
{
    (void)user;
    int64_t n = 1;
    for (int j = 0; j < index->ndim; j++)
        n *= index->stop[j] - index->start[j];
    memset(dst, 0, (size_t)n * sizeof(float));
    return SPMD_OK;
}

/* Objects made while initialized, then used after the last spmd_finalize. */
static int child_main(const char *mode)
{
    int bad = 0;
    int shape[1] = {4};
    const char *names[1] = {"x"};
    spmd_mesh *mesh = NULL;
    spmd_sharding *sh = NULL;
    spmd_array *array = NULL;
    if (init_four_cpu_devices() != SPMD_OK ||
        spmd_mesh_create(1, shape, names, NULL, 0, &mesh) != SPMD_OK ||
        spmd_sharding_create_parse(mesh, "'x'", &sh) != SPMD_OK ||
        spmd_device_put(host, 1, (const int64_t[]){8}, SPMD_DTYPE_F32, sh, &array) != SPMD_OK) {
        fprintf(stderr, "child: setup failed: %s\n", spmd_last_error());
        return 2;
    }
    if (spmd_finalize() != SPMD_OK)
        return 2;
    float dst[8];
    if (strcmp(mode, "after-finalize") == 0) {
        spmd_mesh *m2 = NULL;
        spmd_array *a2 = NULL;
        bad |= child_expect(spmd_mesh_create(1, shape, names, NULL, 0, &m2),
                            SPMD_ERR_INVALID_ARGUMENT, "spmd_init", "spmd_mesh_create");
        bad |= child_expect(spmd_device_put(host, 1, (const int64_t[]){8}, SPMD_DTYPE_F32, sh, &a2),
                            SPMD_ERR_INVALID_ARGUMENT, "spmd_init", "spmd_device_put");
        bad |= child_expect(spmd_array_from_callback(1, (const int64_t[]){8}, SPMD_DTYPE_F32, sh,
                                                     fill_callback, NULL, &a2),
                            SPMD_ERR_INVALID_ARGUMENT, "spmd_init", "spmd_array_from_callback");
        spmd_device_info info;
        bad |= child_expect(spmd_device_get_info(0, &info), SPMD_ERR_INVALID_ARGUMENT, "spmd_init",
                            "spmd_device_get_info");
        bad |= m2 != NULL || a2 != NULL;
    } else if (strcmp(mode, "after-finalize-to-host") == 0) {
        bad |= child_expect(spmd_array_to_host(array, dst, sizeof dst), SPMD_ERR_INVALID_ARGUMENT,
                            "spmd_init", "spmd_array_to_host after spmd_finalize");
    } else if (strcmp(mode, "after-finalize-shard-to-host") == 0) {
        bad |= child_expect(spmd_array_shard_to_host(array, 0, dst, sizeof dst),
                            SPMD_ERR_INVALID_ARGUMENT, "spmd_init",
                            "spmd_array_shard_to_host after spmd_finalize");
    } else {
        fprintf(stderr, "child: unknown mode %s\n", mode);
        bad = 1;
    }
    spmd_array_destroy(array);
    spmd_sharding_destroy(sh);
    spmd_mesh_destroy(mesh);
    return bad;
}

/* Prints the lines of a child's stderr that say what went wrong (not a sanitizer's full dump). */
static void print_child_report(char *text)
{
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, "child:", 6) == 0 || strstr(line, "SUMMARY:") ||
            strstr(line, "ERROR: AddressSanitizer") || strstr(line, "runtime error"))
            print_error("    %s\n", line);
}

/* Runs this program again with `mode`; returns its exit status, or 128 + signal. */
static int run_child(const char *mode)
{
    fflush(stdout);
    fflush(stderr);
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        execl("/proc/self/exe", self_path, mode, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    static char report[1 << 16];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fds[0], report + len, sizeof report - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == sizeof report - 1) { /* keep draining so that the child never blocks */
            char sink[4096];
            while (read(fds[0], sink, sizeof sink) > 0)
                ;
            break;
        }
    }
    report[len] = '\0';
    close(fds[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) < 0)
        return -1;
    int rc = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    if (rc != 0)
        print_child_report(report);
    return rc;
}

static void test_after_finalize(void **state)
{
    (void)state;
    static const struct {
        const char *mode;
        int pairs;
    } modes[] = {
        {"after-finalize", 4},
        {"after-finalize-to-host", 1},
        {"after-finalize-shard-to-host", 1},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        pairs += modes[i].pairs;
        int rc = run_child(modes[i].mode);
        if (rc != 0) {
            if (rc > 128)
                print_error("ERROR: child \"%s\" was killed by signal %d\n", modes[i].mode,
                            rc - 128);
            else
                print_error("ERROR: child \"%s\" exited with %d (a check failed, or a sanitizer "
                            "stopped it; its report is above)\n",
                            modes[i].mode, rc);
            failed = 1;
        }
    }
    if (failed)
        fail_msg("objects used after spmd_finalize: see the child reports above");
}

/* ---- before spmd_init -------------------------------------------------------------------- */

static void test_before_init(void **state)
{
    (void)state;
    assert_false(spmd_is_initialized());
    BAD_INT(spmd_process_index(), -1);
    BAD_INT(spmd_process_count(), 0);
    BAD_INT(spmd_device_count(), 0);
    BAD_INT(spmd_local_device_count(), 0);
    BAD_INT(spmd_local_device_id(0), -1);
    int shape[1] = {4};
    const char *names[1] = {"x"};
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(1, shape, names, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "spmd_mesh_create", "spmd_init");
    spmd_device_info info;
    BAD(spmd_device_get_info(0, &info), SPMD_ERR_INVALID_ARGUMENT, "spmd_device_get_info",
        "spmd_init");
    BAD(spmd_finalize(), SPMD_ERR_INVALID_ARGUMENT, "spmd_finalize", "not initialized");
    BAD(spmd_finalize(), SPMD_ERR_INVALID_ARGUMENT, "not initialized");
    /* Specs need no runtime. */
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'x', None", &spec));
    spmd_spec_destroy(spec);
    /* Last: its expectation is the one most likely to fail. */
    BAD_CTOR(spmd_array, out,
             spmd_array_create_on_device(0, host, 1, (const int64_t[]){4}, SPMD_DTYPE_F32, &out),
             SPMD_ERR_INVALID_ARGUMENT, "spmd_init");
    assert_false(spmd_is_initialized());
}

static void test_init_options(void **state)
{
    (void)state;
    spmd_init_options o;
    assert_ok(spmd_init_options_init(&o, SPMD_INIT_OPTIONS_VERSION));
    o.version = 0;
    BAD(spmd_init(&o), SPMD_ERR_INVALID_ARGUMENT, "options.version", "SPMD_INIT_OPTIONS_INIT");
    o.version = SPMD_INIT_OPTIONS_VERSION + 1;
    BAD(spmd_init(&o), SPMD_ERR_INVALID_ARGUMENT, "options.version");
    o.version = SPMD_INIT_OPTIONS_VERSION;
    o.num_cpu_devices = -1;
    BAD(spmd_init(&o), SPMD_ERR_INVALID_ARGUMENT, "options.num_cpu_devices", "-1");
    o.num_cpu_devices = 1 << 20;
    BAD(spmd_init(&o), SPMD_ERR_INVALID_ARGUMENT, "options.num_cpu_devices");
    o.num_cpu_devices = 0;
    o.platform = 7;
    BAD(spmd_init(&o), SPMD_ERR_INVALID_ARGUMENT, "options.platform", "7");
    o.platform = -2;
    BAD(spmd_init(&o), SPMD_ERR_INVALID_ARGUMENT, "options.platform");
    o.platform = SPMD_AUTO;
    o.use_mpi = 5;
    BAD(spmd_init(&o), SPMD_ERR_INVALID_ARGUMENT, "options.use_mpi", "5");
    o.use_mpi = -7;
    BAD(spmd_init(&o), SPMD_ERR_INVALID_ARGUMENT, "options.use_mpi");
    BAD(spmd_init_options_init(NULL, SPMD_INIT_OPTIONS_VERSION), SPMD_ERR_INVALID_ARGUMENT, "opts",
        "NULL");
    BAD(spmd_init_options_init(&o, 0), SPMD_ERR_INVALID_ARGUMENT, "version 0",
        "SPMD_INIT_OPTIONS_VERSION");
    BAD(spmd_init_options_init(&o, 99), SPMD_ERR_INVALID_ARGUMENT, "version 99");
    assert_false(spmd_is_initialized());

    /* Bad environment variables, named in the message; the environment is restored after. */
    static const struct {
        const char *name, *value, *fragment;
    } env[] = {
        {"SPMD_NUM_CPU_DEVICES", "abc", "SPMD_NUM_CPU_DEVICES=\"abc\""},
        {"SPMD_NUM_CPU_DEVICES", "0", "SPMD_NUM_CPU_DEVICES=\"0\""},
        {"SPMD_NUM_CPU_DEVICES", "-3", "SPMD_NUM_CPU_DEVICES"},
        {"SPMD_NUM_CPU_DEVICES", "4x", "SPMD_NUM_CPU_DEVICES"},
        {"SPMD_PLATFORM", "tpu", "SPMD_PLATFORM=\"tpu\""},
        {"SPMD_CUDA_DEVICES_PER_GPU", "0", "SPMD_CUDA_DEVICES_PER_GPU"},
    };
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
        const char *old = getenv(env[i].name);
        char *saved = old ? strdup(old) : NULL;
        assert_int_equal(setenv(env[i].name, env[i].value, 1), 0);
        spmd_status st = spmd_init(NULL);
        if (saved) {
            setenv(env[i].name, saved, 1);
            free(saved);
        } else {
            unsetenv(env[i].name);
        }
        if (st == SPMD_OK)
            assert_ok(spmd_finalize());
        BAD(st, SPMD_ERR_INVALID_ARGUMENT, env[i].fragment);
        assert_false(spmd_is_initialized());
    }
}

/* ---- mesh.h ------------------------------------------------------------------------------ */

static void test_mesh(void **state)
{
    (void)state;
    const char *xy[2] = {"x", "y"};
    int s4[1] = {4}, s3[1] = {3}, s2[1] = {2}, s1[1] = {1}, s22i[2] = {2, 2};
    int ids[4] = {0, 1, 2, 3}, twice[4] = {0, 1, 1, 2}, minus[1] = {-1}, four[1] = {4};

    /* mesh size != number of device ids */
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(1, s4, xy, ids, 3, &out), SPMD_ERR_INVALID_ARGUMENT,
             "4 devices", "3 device ids");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(1, s3, xy, ids, 4, &out), SPMD_ERR_INVALID_ARGUMENT,
             "device ids");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(0, NULL, NULL, ids, 2, &out),
             SPMD_ERR_INVALID_ARGUMENT, "device ids");
    /* device_ids NULL but the shape does not hold all 4 devices */
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(1, s2, xy, NULL, 0, &out), SPMD_ERR_INVALID_ARGUMENT,
             "device_ids is NULL", "all 4 devices");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(0, NULL, NULL, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "device_ids");
    /* a device twice */
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(2, s22i, xy, twice, 4, &out),
             SPMD_ERR_INVALID_ARGUMENT, "device 1", "twice");
    /* device ids out of range */
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(1, s1, xy, minus, 1, &out), SPMD_ERR_INVALID_ARGUMENT,
             "-1", "not a device", "0..3");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(1, s1, xy, four, 1, &out), SPMD_ERR_INVALID_ARGUMENT,
             "= 4", "not a device");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(0, NULL, NULL, four, 1, &out),
             SPMD_ERR_INVALID_ARGUMENT, "not a device");
    /* zero and negative axis sizes */
    int zero[1] = {0}, neg[1] = {-4}, s40[2] = {4, 0}, sneg2[2] = {-2, -2};
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(1, zero, xy, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "size 0");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(1, neg, xy, ids, 4, &out), SPMD_ERR_INVALID_ARGUMENT,
             "size -4");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(2, s40, xy, NULL, 0, &out), SPMD_ERR_INVALID_ARGUMENT,
             "'y'", "size 0");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(2, sneg2, xy, ids, 4, &out),
             SPMD_ERR_INVALID_ARGUMENT, "size -2");
    int huge[2] = {1 << 16, 1 << 16};
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(2, huge, xy, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "more than");
    /* axis names */
    const char *dup[2] = {"x", "x"}, *null_name[2] = {NULL, "y"}, *empty[2] = {"x", ""},
               *none[2] = {"None", "y"}, *comma[2] = {"x,", "y"};
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(2, s22i, dup, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'x'", "distinct");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(2, s22i, null_name, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "axis 0", "NULL");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(2, s22i, empty, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "axis 1", "empty");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(2, s22i, none, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "None");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(2, s22i, comma, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "contains ','");
    char long_name[SPMD_MAX_AXIS_NAME + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    const char *too_long[1] = {long_name};
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(1, s4, too_long, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "64 characters", "63");
    /* ndim, NULL arrays, NULL out */
    int s9[9] = {4, 1, 1, 1, 1, 1, 1, 1, 1};
    const char *nine[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(-1, s9, nine, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "ndim is -1");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(9, s9, nine, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "ndim is 9", "SPMD_MAX_MESH_AXES");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(1, NULL, xy, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'shape' is NULL");
    BAD_CTOR(spmd_mesh, out, spmd_mesh_create(1, s4, NULL, NULL, 0, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'axis_names' is NULL");
    BAD(spmd_mesh_create(1, s4, xy, NULL, 0, NULL), SPMD_ERR_INVALID_ARGUMENT, "'out' is NULL");

    /* every query with a NULL mesh, and with out-of-range arguments */
    spmd_mesh *m = g_mesh;
    int c[2], shape[2];
    char buf[64];
    BAD_NULL(spmd_mesh_retain(NULL));
    BAD_VOID(spmd_mesh_destroy(NULL));
    BAD_INT(spmd_mesh_ndim(NULL), -1);
    BAD_INT(spmd_mesh_size(NULL), 0);
    BAD_INT(spmd_mesh_axis_size(NULL, 0), -1);
    BAD_INT(spmd_mesh_axis_size(m, 2), -1);
    BAD_INT(spmd_mesh_axis_size(m, -1), -1);
    BAD_NULL(spmd_mesh_axis_name(NULL, 0));
    BAD_NULL(spmd_mesh_axis_name(m, 2));
    BAD_NULL(spmd_mesh_axis_name(m, -1));
    BAD_INT(spmd_mesh_axis_index(NULL, "x"), -1);
    BAD_INT(spmd_mesh_axis_index(m, NULL), -1);
    BAD_INT(spmd_mesh_axis_index(m, "z"), -1);
    BAD_INT(spmd_mesh_device_id(NULL, 0), -1);
    BAD_INT(spmd_mesh_device_id(m, 4), -1);
    BAD_INT(spmd_mesh_device_id(m, -1), -1);
    BAD_INT(spmd_mesh_device_position(NULL, 0), -1);
    BAD_INT(spmd_mesh_device_position(m, 4), -1);
    BAD_INT(spmd_mesh_device_position(m, -1), -1);
    BAD(spmd_mesh_device_coords(NULL, 0, c), SPMD_ERR_INVALID_ARGUMENT, "'mesh' is NULL");
    BAD(spmd_mesh_device_coords(m, 0, NULL), SPMD_ERR_INVALID_ARGUMENT, "'coords' is NULL");
    BAD(spmd_mesh_device_coords(m, 4, c), SPMD_ERR_INVALID_ARGUMENT, "device 4",
        "not in this mesh");
    BAD(spmd_mesh_device_coords(m, -1, c), SPMD_ERR_INVALID_ARGUMENT, "not in this mesh");
    BAD_INT(spmd_mesh_num_local_devices(NULL), 0);
    BAD_INT(spmd_mesh_local_device_id(NULL, 0), -1);
    BAD_INT(spmd_mesh_local_device_id(m, 4), -1);
    BAD_INT(spmd_mesh_local_device_id(m, -1), -1);
    BAD_INT(spmd_mesh_has_process(NULL, 0), 0);
    BAD_INT(spmd_mesh_has_process(m, 1), 0);
    BAD_INT(spmd_mesh_has_process(m, -1), 0);
    BAD_INT(spmd_mesh_is_contiguous(NULL), 0);
    BAD(spmd_mesh_check_contiguous(NULL), SPMD_ERR_INVALID_ARGUMENT, "'mesh' is NULL");
    BAD(spmd_mesh_local_shape(NULL, shape), SPMD_ERR_INVALID_ARGUMENT, "'mesh' is NULL");
    BAD(spmd_mesh_local_shape(m, NULL), SPMD_ERR_INVALID_ARGUMENT, "'shape' is NULL");
    BAD_INT(spmd_mesh_equal(NULL, m), 0);
    BAD_INT(spmd_mesh_equal(m, NULL), 0);
    BAD(spmd_mesh_format(NULL, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT, "'mesh' is NULL");
    BAD(spmd_mesh_format(m, NULL, sizeof buf), SPMD_ERR_INVALID_ARGUMENT, "NULL");
    BAD(spmd_mesh_format(m, buf, 0), SPMD_ERR_INVALID_ARGUMENT, "size is 0");
    /* "Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))" needs 46 bytes */
    memset(buf, '#', sizeof buf);
    BAD(spmd_mesh_format(m, buf, 45), SPMD_ERR_INVALID_ARGUMENT, "too small", "46");
    assert_string_equal(buf, "Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto)");
    BAD(spmd_mesh_format(m, buf, 1), SPMD_ERR_INVALID_ARGUMENT, "too small");
    assert_string_equal(buf, "");
    assert_ok(spmd_mesh_format(m, buf, 46));
    assert_string_equal(buf, "Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))");
}

/* ---- spec.h ------------------------------------------------------------------------------ */

static void test_spec(void **state)
{
    (void)state;
    BAD_CTOR(spmd_spec, out, spmd_spec_parse(NULL, &out), SPMD_ERR_INVALID_ARGUMENT,
             "'text' is NULL");
    BAD(spmd_spec_parse("'x'", NULL), SPMD_ERR_INVALID_ARGUMENT, "'out' is NULL");
    /* malformed strings */
    BAD_CTOR(spmd_spec, out, spmd_spec_parse("('x', 'y'", &out), SPMD_ERR_SPEC,
             "unbalanced parentheses", "position 0");
    BAD_CTOR(spmd_spec, out, spmd_spec_parse("'x')", &out), SPMD_ERR_SPEC, "unbalanced parentheses",
             "position 3");
    BAD_CTOR(spmd_spec, out, spmd_spec_parse("P('x'", &out), SPMD_ERR_SPEC,
             "unbalanced parentheses");
    BAD_CTOR(spmd_spec, out, spmd_spec_parse("'x', ''", &out), SPMD_ERR_SPEC, "empty axis name",
             "position 5");
    BAD_CTOR(spmd_spec, out, spmd_spec_parse("'x',,'y'", &out), SPMD_ERR_SPEC, "empty entry");
    BAD_CTOR(spmd_spec, out, spmd_spec_parse("(('x','y'),)", &out), SPMD_ERR_SPEC, "nested tuple");
    BAD_CTOR(spmd_spec, out, spmd_spec_parse("'x', ('y', 'x')", &out), SPMD_ERR_SPEC,
             "duplicate entries for `x`");
    BAD_CTOR(spmd_spec, out, spmd_spec_parse("'x", &out), SPMD_ERR_SPEC, "unterminated");

    BAD(spmd_spec_create(NULL), SPMD_ERR_INVALID_ARGUMENT, "'out' is NULL");
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'x', None", &spec));
    const char *x[1] = {"x"}, *empty[1] = {""};
    BAD(spmd_spec_append(NULL, 1, x), SPMD_ERR_INVALID_ARGUMENT, "'spec' is NULL");
    BAD(spmd_spec_append(spec, 1, NULL), SPMD_ERR_INVALID_ARGUMENT, "axis_names is NULL");
    BAD(spmd_spec_append(spec, -1, x), SPMD_ERR_SPEC, "naxes is -1");
    BAD(spmd_spec_append(spec, 1, x), SPMD_ERR_SPEC, "duplicate entries for `x`");
    BAD(spmd_spec_append(spec, 1, empty), SPMD_ERR_SPEC, "empty axis name");
    BAD(spmd_spec_append_axis(NULL, "y"), SPMD_ERR_INVALID_ARGUMENT, "'spec' is NULL");
    BAD(spmd_spec_append_axis(spec, "x"), SPMD_ERR_SPEC, "duplicate entries for `x`");
    BAD(spmd_spec_append_axis(spec, "None"), SPMD_ERR_SPEC, "None");
    assert_int_equal(spmd_spec_length(spec), 2); /* unchanged by the failures */
    BAD_CTOR(spmd_spec, out, spmd_spec_copy(NULL, &out), SPMD_ERR_INVALID_ARGUMENT,
             "'spec' is NULL");
    BAD(spmd_spec_copy(spec, NULL), SPMD_ERR_INVALID_ARGUMENT, "'out' is NULL");
    BAD_VOID(spmd_spec_destroy(NULL));
    BAD_INT(spmd_spec_length(NULL), -1);
    BAD_INT(spmd_spec_entry_size(NULL, 0), -1);
    BAD_INT(spmd_spec_entry_size(spec, 2), -1);
    BAD_INT(spmd_spec_entry_size(spec, -1), -1);
    BAD_NULL(spmd_spec_entry_axis(NULL, 0, 0));
    BAD_NULL(spmd_spec_entry_axis(spec, 0, 1));
    BAD_NULL(spmd_spec_entry_axis(spec, 1, 0)); /* None has no axes */
    BAD_NULL(spmd_spec_entry_axis(spec, 5, 0));
    BAD_INT(spmd_spec_is_equivalent(NULL, spec), 0);
    BAD_INT(spmd_spec_is_equivalent(spec, NULL), 0);
    char buf[32];
    BAD(spmd_spec_format(NULL, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT, "'spec' is NULL");
    BAD(spmd_spec_format(spec, NULL, sizeof buf), SPMD_ERR_INVALID_ARGUMENT, "NULL");
    BAD(spmd_spec_format(spec, buf, 0), SPMD_ERR_INVALID_ARGUMENT, "size is 0");
    /* "P('x', None)" needs 13 bytes */
    BAD(spmd_spec_format(spec, buf, 12), SPMD_ERR_INVALID_ARGUMENT, "too small", "13");
    assert_string_equal(buf, "P('x', None");
    spmd_spec_destroy(spec);
}

/* ---- sharding.h -------------------------------------------------------------------------- */

static void test_sharding(void **state)
{
    (void)state;
    spmd_mesh *m = g_mesh;
    /* NULL arguments */
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create(NULL, g_spec, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'mesh' is NULL");
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create(m, NULL, &out), SPMD_ERR_INVALID_ARGUMENT,
             "'spec' is NULL");
    BAD(spmd_sharding_create(m, g_spec, NULL), SPMD_ERR_INVALID_ARGUMENT, "'out' is NULL");
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create_parse(NULL, "'x'", &out),
             SPMD_ERR_INVALID_ARGUMENT, "'mesh' is NULL");
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create_parse(m, NULL, &out),
             SPMD_ERR_INVALID_ARGUMENT, "NULL");
    BAD(spmd_sharding_create_parse(m, "'x'", NULL), SPMD_ERR_INVALID_ARGUMENT, "'out' is NULL");

    /* an axis the mesh lacks: the message names it and lists the mesh */
    spmd_spec *z = NULL;
    assert_ok(spmd_spec_create(&z));
    assert_ok(spmd_spec_append_axis(z, "x"));
    assert_ok(spmd_spec_append_axis(z, "z"));
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create(m, z, &out), SPMD_ERR_SPEC, "'z'",
             "not found in mesh", "Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto))");
    spmd_spec_destroy(z);
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create_parse(m, "None, ('y', 'w')", &out),
             SPMD_ERR_SPEC, "'w'", "not found in mesh");
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create_parse(m, "'X'", &out), SPMD_ERR_SPEC, "'X'",
             "not found in mesh");
    /* an axis used twice */
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create_parse(m, "'x', 'x'", &out), SPMD_ERR_SPEC,
             "duplicate entries for `x`");
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create_parse(m, "('y', 'x'), 'y'", &out),
             SPMD_ERR_SPEC, "duplicate entries for `y`");
    /* malformed spec strings */
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create_parse(m, "('x'", &out), SPMD_ERR_SPEC,
             "unbalanced parentheses");
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create_parse(m, "''", &out), SPMD_ERR_SPEC,
             "empty axis name");

    BAD_NULL(spmd_sharding_retain(NULL));
    BAD_VOID(spmd_sharding_destroy(NULL));
    BAD_NULL(spmd_sharding_mesh(NULL));
    BAD_NULL(spmd_sharding_spec(NULL));

    /* shapes: rank, extents, divisibility */
    const int64_t r1[1] = {4}, zero[2] = {0, 4}, negative[2] = {4, -2}, odd[2] = {3, 4},
                  six[1] = {6}, s3d[3] = {4, 5, 0},
                  ok16[16] = {4, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    BAD(spmd_sharding_check_shape(NULL, 2, s44), SPMD_ERR_INVALID_ARGUMENT, "'sharding' is NULL");
    BAD(spmd_sharding_check_shape(g_xy, 1, r1), SPMD_ERR_SHAPE, "rank at least 2", "rank 1");
    BAD(spmd_sharding_check_shape(g_xy, 0, NULL), SPMD_ERR_SHAPE, "rank 0", "P()");
    BAD(spmd_sharding_check_shape(g_x, 0, NULL), SPMD_ERR_SHAPE, "P()");
    BAD(spmd_sharding_check_shape(g_xy, -1, ok16), SPMD_ERR_SHAPE, "rank -1");
    BAD(spmd_sharding_check_shape(g_xy, 17, ok16), SPMD_ERR_SHAPE, "rank 17", "SPMD_MAX_RANK");
    BAD(spmd_sharding_check_shape(g_xy, 2, NULL), SPMD_ERR_INVALID_ARGUMENT, "NULL");
    BAD(spmd_sharding_check_shape(g_xy, 2, zero), SPMD_ERR_SHAPE, "dimension 0", "extent 0");
    BAD(spmd_sharding_check_shape(g_xy, 2, negative), SPMD_ERR_SHAPE, "dimension 1", "extent -2");
    BAD(spmd_sharding_check_shape(g_x, 3, s3d), SPMD_ERR_SHAPE, "dimension 2", "extent 0");
    BAD(spmd_sharding_check_shape(g_rep, 2, zero), SPMD_ERR_SHAPE, "extent 0");
    BAD(spmd_sharding_check_shape(g_xy, 2, odd), SPMD_ERR_SHAPE, "partitioned 2 times",
        "dimension size is 3");
    BAD(spmd_sharding_check_shape(g_tuple, 1, six), SPMD_ERR_SHAPE, "partitioned 4 times",
        "dimension size is 6", "(6,)");
    int64_t shard[16];
    BAD(spmd_sharding_shard_shape(NULL, 2, s44, shard), SPMD_ERR_INVALID_ARGUMENT,
        "'sharding' is NULL");
    BAD(spmd_sharding_shard_shape(g_xy, 1, r1, shard), SPMD_ERR_SHAPE, "rank");
    BAD(spmd_sharding_shard_shape(g_xy, 2, zero, shard), SPMD_ERR_SHAPE, "extent 0");
    BAD(spmd_sharding_shard_shape(g_xy, 2, negative, shard), SPMD_ERR_SHAPE, "extent -2");
    BAD(spmd_sharding_shard_shape(g_rep, 2, negative, shard), SPMD_ERR_SHAPE, "extent -2");
    BAD(spmd_sharding_shard_shape(g_xy, 2, odd, shard), SPMD_ERR_SHAPE, "partitioned",
        "dimension size is 3");
    BAD(spmd_sharding_shard_shape(g_xy, 2, NULL, shard), SPMD_ERR_INVALID_ARGUMENT, "NULL");
    BAD(spmd_sharding_shard_shape(g_xy, 2, s44, NULL), SPMD_ERR_INVALID_ARGUMENT, "shard_shape");
    BAD_INT(spmd_sharding_num_blocks(NULL, 0), -1);
    BAD_INT(spmd_sharding_num_blocks(g_xy, -1), -1);
    BAD_INT(spmd_sharding_num_blocks(g_xy, SPMD_MAX_RANK), -1);
    spmd_box box;
    BAD(spmd_sharding_device_box(NULL, 2, s44, 0, &box), SPMD_ERR_INVALID_ARGUMENT,
        "'sharding' is NULL");
    BAD(spmd_sharding_device_box(g_xy, 2, s44, 0, NULL), SPMD_ERR_INVALID_ARGUMENT, "box");
    BAD(spmd_sharding_device_box(g_xy, 2, s44, 4, &box), SPMD_ERR_INVALID_ARGUMENT, "device 4",
        "not in");
    BAD(spmd_sharding_device_box(g_xy, 2, s44, -1, &box), SPMD_ERR_INVALID_ARGUMENT, "not in");
    BAD(spmd_sharding_device_box(g_xy, 1, r1, 0, &box), SPMD_ERR_SHAPE, "rank");
    BAD(spmd_sharding_device_box(g_xy, 2, odd, 0, &box), SPMD_ERR_SHAPE, "partitioned");
    BAD(spmd_sharding_device_box(g_xy, 2, NULL, 0, &box), SPMD_ERR_INVALID_ARGUMENT, "NULL");
    BAD_INT(spmd_sharding_replica_id(NULL, 0), -1);
    BAD_INT(spmd_sharding_replica_id(g_xy, 4), -1);
    BAD_INT(spmd_sharding_replica_id(g_xy, -1), -1);
    BAD_INT(spmd_sharding_num_devices(NULL), 0);
    BAD_INT(spmd_sharding_num_addressable_devices(NULL), 0);
    BAD_INT(spmd_sharding_addressable_device_id(NULL, 0), -1);
    BAD_INT(spmd_sharding_addressable_device_id(g_xy, 4), -1);
    BAD_INT(spmd_sharding_addressable_device_id(g_xy, -1), -1);
    BAD_INT(spmd_sharding_is_fully_addressable(NULL), 0);
    BAD_INT(spmd_sharding_is_fully_replicated(NULL), 0);
    BAD_INT(spmd_sharding_is_equivalent(NULL, g_xy, 2), 0);
    BAD_INT(spmd_sharding_is_equivalent(g_xy, NULL, 2), 0);
    BAD_INT(spmd_sharding_is_equivalent(g_xy, g_xy, 1), 0); /* rank below the spec's length */
    BAD_INT(spmd_sharding_is_equivalent(g_xy, g_xy, -1), 0);
    BAD_INT(spmd_sharding_is_equivalent(g_rep, g_rep, SPMD_MAX_RANK + 1), 0);
    char buf[128];
    BAD(spmd_sharding_format(NULL, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT,
        "'sharding' is NULL");
    BAD(spmd_sharding_format(g_xy, NULL, sizeof buf), SPMD_ERR_INVALID_ARGUMENT, "NULL");
    BAD(spmd_sharding_format(g_xy, buf, 0), SPMD_ERR_INVALID_ARGUMENT, "size is 0");
    const char *want =
        "NamedSharding(mesh=Mesh('x': 2, 'y': 2, axis_types=(Auto, Auto)), spec=P('x', 'y'))";
    BAD(spmd_sharding_format(g_xy, buf, strlen(want)), SPMD_ERR_INVALID_ARGUMENT, "too small");
    assert_int_equal(strlen(buf), strlen(want) - 1);
    assert_ok(spmd_sharding_format(g_xy, buf, strlen(want) + 1));
    assert_string_equal(buf, want);

    FILE *f = tmpfile();
    assert_non_null(f);
    const int64_t s3[3] = {4, 4, 4};
    BAD(spmd_visualize_sharding(NULL, g_xy, 2, s44), SPMD_ERR_INVALID_ARGUMENT, "'out' is NULL");
    BAD(spmd_visualize_sharding(f, NULL, 2, s44), SPMD_ERR_INVALID_ARGUMENT, "'sharding' is NULL");
    BAD(spmd_visualize_sharding(f, g_rep, 0, NULL), SPMD_ERR_UNSUPPORTED, "rank 0");
    BAD(spmd_visualize_sharding(f, g_xy, 3, s3), SPMD_ERR_UNSUPPORTED, "rank 3");
    BAD(spmd_visualize_sharding(f, g_xy, 1, r1), SPMD_ERR_SHAPE, "rank");
    BAD(spmd_visualize_sharding(f, g_xy, 2, odd), SPMD_ERR_SHAPE, "partitioned");
    BAD(spmd_visualize_sharding(f, g_xy, 2, zero), SPMD_ERR_SHAPE, "extent 0");
    BAD(spmd_visualize_sharding(f, g_xy, 2, NULL), SPMD_ERR_INVALID_ARGUMENT, "NULL");
    assert_ok(spmd_visualize_sharding(f, g_xy, 2, s44));
    fclose(f);
}

/* ---- array.h ----------------------------------------------------------------------------- */

static spmd_status failing_callback(const spmd_box *index, void *dst, void *user)
{
    (void)index;
    (void)dst;
    int *calls = user;
    return ++*calls == 3 ? SPMD_ERR_INVALID_ARGUMENT : SPMD_OK;
}

/* Fails with a libspmd error of its own, whose message must survive. */
static spmd_status parse_failing_callback(const spmd_box *index, void *dst, void *user)
{
    (void)index;
    (void)dst;
    (void)user;
    spmd_spec *spec = NULL;
    return spmd_spec_parse("('x'", &spec);
}

static void test_array_constructors(void **state)
{
    (void)state;
    const int64_t r1[1] = {16}, zero[2] = {0, 4}, negative[2] = {4, -2}, odd[2] = {4, 3},
                  s17[17] = {1};
    const spmd_dtype f32 = SPMD_DTYPE_F32;

    /* spmd_device_put */
    BAD_CTOR(spmd_array, out, spmd_device_put(NULL, 2, s44, f32, g_xy, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'host' is NULL");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 2, NULL, f32, g_xy, &out),
             SPMD_ERR_INVALID_ARGUMENT, "NULL");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 2, s44, f32, NULL, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'sharding' is NULL");
    BAD(spmd_device_put(host, 2, s44, f32, g_xy, NULL), SPMD_ERR_INVALID_ARGUMENT, "'out' is NULL");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 2, s44, (spmd_dtype)99, g_xy, &out),
             SPMD_ERR_INVALID_ARGUMENT, "dtype 99", "SPMD_DTYPE_");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 2, s44, SPMD_DTYPE_COUNT, g_xy, &out),
             SPMD_ERR_INVALID_ARGUMENT, "dtype");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 2, s44, (spmd_dtype)-1, g_xy, &out),
             SPMD_ERR_INVALID_ARGUMENT, "dtype");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 1, r1, f32, g_xy, &out), SPMD_ERR_SHAPE,
             "rank at least 2", "rank 1");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 0, NULL, f32, g_x, &out), SPMD_ERR_SHAPE,
             "rank 0", "P()");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 2, odd, f32, g_xy, &out), SPMD_ERR_SHAPE,
             "partitioned 2 times", "dimension size is 3");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 2, zero, f32, g_xy, &out), SPMD_ERR_SHAPE,
             "extent 0");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 2, negative, f32, g_xy, &out), SPMD_ERR_SHAPE,
             "extent -2");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 2, zero, f32, g_rep, &out), SPMD_ERR_SHAPE,
             "extent 0");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, -1, s44, f32, g_rep, &out), SPMD_ERR_SHAPE,
             "rank -1");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 17, s17, f32, g_rep, &out), SPMD_ERR_SHAPE,
             "rank 17");
    const int64_t too_many[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 2, too_many, f32, g_rep, &out), SPMD_ERR_SHAPE,
             "size_t");

    /* spmd_array_from_callback */
    int calls = 0;
    BAD_CTOR(spmd_array, out, spmd_array_from_callback(2, s44, f32, g_xy, NULL, NULL, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'callback' is NULL");
    BAD(spmd_array_from_callback(2, s44, f32, g_xy, fill_callback, NULL, NULL),
        SPMD_ERR_INVALID_ARGUMENT, "'out' is NULL");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_callback(2, s44, f32, NULL, fill_callback, NULL, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'sharding' is NULL");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_callback(2, s44, (spmd_dtype)99, g_xy, fill_callback, NULL, &out),
             SPMD_ERR_INVALID_ARGUMENT, "dtype 99");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_callback(2, s44, SPMD_DTYPE_COUNT, g_xy, fill_callback, NULL, &out),
             SPMD_ERR_INVALID_ARGUMENT, "dtype");
    BAD_CTOR(spmd_array, out, spmd_array_from_callback(1, r1, f32, g_xy, fill_callback, NULL, &out),
             SPMD_ERR_SHAPE, "rank");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_callback(2, odd, f32, g_xy, fill_callback, NULL, &out), SPMD_ERR_SHAPE,
             "partitioned", "3");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_callback(2, zero, f32, g_xy, fill_callback, NULL, &out),
             SPMD_ERR_SHAPE, "extent 0");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_callback(2, NULL, f32, g_xy, fill_callback, NULL, &out),
             SPMD_ERR_INVALID_ARGUMENT, "NULL");
    /* the callback fails on its third shard: its status comes back, nothing is kept */
    BAD_CTOR(spmd_array, out,
             spmd_array_from_callback(2, s44, f32, g_xy, failing_callback, &calls, &out),
             SPMD_ERR_INVALID_ARGUMENT, "callback failed");
    assert_int_equal(calls, 3);
    BAD_CTOR(spmd_array, out,
             spmd_array_from_callback(2, s44, f32, g_xy, parse_failing_callback, NULL, &out),
             SPMD_ERR_SPEC, "unbalanced parentheses");

    /* spmd_array_from_process_local_data */
    const int64_t l34[2] = {3, 4}, l24[2] = {2, 4}, g54[2] = {5, 4};
    BAD(spmd_array_from_process_local_data(g_xy, host, 2, s44, NULL, f32, NULL),
        SPMD_ERR_INVALID_ARGUMENT, "'out' is NULL");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(NULL, host, 2, s44, NULL, f32, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'sharding' is NULL");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, NULL, 2, s44, NULL, f32, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'local' is NULL");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, host, 2, NULL, NULL, f32, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'local_shape' is NULL");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, host, -1, s44, NULL, f32, &out),
             SPMD_ERR_SHAPE, "ndim is -1");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, host, 17, s17, NULL, f32, &out),
             SPMD_ERR_SHAPE, "ndim is 17");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, host, 2, s44, NULL, (spmd_dtype)99, &out),
             SPMD_ERR_INVALID_ARGUMENT, "dtype 99");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, host, 2, zero, NULL, f32, &out),
             SPMD_ERR_SHAPE, "extent 0");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, host, 2, negative, NULL, f32, &out),
             SPMD_ERR_SHAPE, "extent -2");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, host, 2, l34, NULL, f32, &out),
             SPMD_ERR_SHAPE, "extent 3", "global_shape");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, host, 2, l24, s44, f32, &out), SPMD_ERR_SHAPE,
             "extent 2", "global extent 4");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, host, 2, s44, g54, f32, &out), SPMD_ERR_SHAPE,
             "partitioned 2 times", "dimension size is 5");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, host, 1, r1, NULL, f32, &out), SPMD_ERR_SHAPE,
             "rank");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_process_local_data(g_xy, host, 2, s44, negative, f32, &out),
             SPMD_ERR_SHAPE, "extent -2");

    /* spmd_array_from_single_device_arrays */
    spmd_array *const *sd = g_single;
    spmd_array *twice[4] = {g_single[0], g_single[0], g_single[2], g_single[3]};
    spmd_array *with_null[4] = {g_single[0], g_single[1], NULL, g_single[3]};
    spmd_array *multi[4] = {g_array, g_single[1], g_single[2], g_single[3]};
    spmd_array *i32 = NULL;
    assert_ok(spmd_array_create_on_device(1, host, 2, s22, SPMD_DTYPE_I32, &i32));
    spmd_array *mixed[4] = {g_single[0], i32, g_single[2], g_single[3]};
    const int64_t g84[2] = {8, 4};
    BAD(spmd_array_from_single_device_arrays(2, s44, f32, g_xy, 4, sd, NULL),
        SPMD_ERR_INVALID_ARGUMENT, "'out' is NULL");
    BAD_CTOR(spmd_array, out, spmd_array_from_single_device_arrays(2, s44, f32, NULL, 4, sd, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'sharding' is NULL");
    BAD_CTOR(spmd_array, out, spmd_array_from_single_device_arrays(2, s44, f32, g_xy, 3, sd, &out),
             SPMD_ERR_INVALID_ARGUMENT, "expected 4 per-device arrays", "got 3");
    BAD_CTOR(spmd_array, out, spmd_array_from_single_device_arrays(2, s44, f32, g_xy, -1, sd, &out),
             SPMD_ERR_INVALID_ARGUMENT, "expected 4 per-device arrays");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_single_device_arrays(2, s44, f32, g_xy, 4, NULL, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'arrays' is NULL");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_single_device_arrays(2, s44, f32, g_xy, 4, with_null, &out),
             SPMD_ERR_INVALID_ARGUMENT, "arrays[2]", "NULL");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_single_device_arrays(2, s44, f32, g_xy, 4, twice, &out),
             SPMD_ERR_INVALID_ARGUMENT, "distinct devices", "device 0");
    BAD_CTOR(spmd_array, out, spmd_array_from_single_device_arrays(2, g84, f32, g_xy, 4, sd, &out),
             SPMD_ERR_SHAPE, "expected shard shape (4, 2)", "(2, 2)");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_single_device_arrays(2, s44, f32, g_xy, 4, mixed, &out),
             SPMD_ERR_INVALID_ARGUMENT, "matching dtypes", "int32");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_single_device_arrays(2, s44, SPMD_DTYPE_I32, g_xy, 4, sd, &out),
             SPMD_ERR_INVALID_ARGUMENT, "matching dtypes", "arrays[0] is float32, expected int32");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_single_device_arrays(2, s44, (spmd_dtype)99, g_xy, 4, sd, &out),
             SPMD_ERR_INVALID_ARGUMENT, "dtype 99");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_single_device_arrays(2, s44, f32, g_xy, 4, multi, &out),
             SPMD_ERR_INVALID_ARGUMENT, "one shard each");
    BAD_CTOR(spmd_array, out, spmd_array_from_single_device_arrays(1, r1, f32, g_xy, 4, sd, &out),
             SPMD_ERR_SHAPE, "rank");
    BAD_CTOR(spmd_array, out, spmd_array_from_single_device_arrays(2, zero, f32, g_xy, 4, sd, &out),
             SPMD_ERR_SHAPE, "extent 0");
    {
        /* a sharding over devices 0 and 1 given an array on device 2 */
        int s2[1] = {2}, ids01[2] = {0, 1};
        const char *x[1] = {"x"};
        spmd_mesh *m01 = NULL;
        spmd_sharding *sh01 = NULL;
        assert_ok(spmd_mesh_create(1, s2, x, ids01, 2, &m01));
        assert_ok(spmd_sharding_create_parse(m01, "'x'", &sh01));
        spmd_array *wrong_device[2] = {g_single[0], g_single[2]};
        const int64_t g42[2] = {4, 2};
        BAD_CTOR(spmd_array, out,
                 spmd_array_from_single_device_arrays(2, g42, f32, sh01, 2, wrong_device, &out),
                 SPMD_ERR_INVALID_ARGUMENT, "device 2", "not an addressable device");
        spmd_sharding_destroy(sh01);
        spmd_mesh_destroy(m01);
    }
    spmd_array_destroy(i32);
    /* the inputs are intact after all those failures */
    spmd_array *good = NULL;
    assert_ok(spmd_array_from_single_device_arrays(2, s44, f32, g_xy, 4, sd, &good));
    spmd_array_destroy(good);

    /* spmd_array_create_on_device */
    BAD_CTOR(spmd_array, out, spmd_array_create_on_device(0, NULL, 2, s22, f32, &out),
             SPMD_ERR_INVALID_ARGUMENT, "'host' is NULL");
    BAD(spmd_array_create_on_device(0, host, 2, s22, f32, NULL), SPMD_ERR_INVALID_ARGUMENT,
        "'out' is NULL");
    BAD_CTOR(spmd_array, out, spmd_array_create_on_device(4, host, 2, s22, f32, &out),
             SPMD_ERR_INVALID_ARGUMENT, "device 4 is not a device");
    BAD_CTOR(spmd_array, out, spmd_array_create_on_device(-1, host, 2, s22, f32, &out),
             SPMD_ERR_INVALID_ARGUMENT, "device -1 is not a device");
    BAD_CTOR(spmd_array, out, spmd_array_create_on_device(0, host, 2, s22, (spmd_dtype)99, &out),
             SPMD_ERR_INVALID_ARGUMENT, "dtype 99");
    BAD_CTOR(spmd_array, out, spmd_array_create_on_device(0, host, 2, zero, f32, &out),
             SPMD_ERR_SHAPE, "extent 0");
    BAD_CTOR(spmd_array, out, spmd_array_create_on_device(0, host, -1, s22, f32, &out),
             SPMD_ERR_SHAPE, "rank -1");
    BAD_CTOR(spmd_array, out, spmd_array_create_on_device(0, host, 2, NULL, f32, &out),
             SPMD_ERR_INVALID_ARGUMENT, "NULL");
}

static void test_array_access(void **state)
{
    (void)state;
    spmd_array *a = g_array; /* (4, 4) float32, 4 shards of (2, 2) = 16 bytes, 64 bytes in all */
    BAD_VOID(spmd_array_destroy(NULL));
    BAD_INT(spmd_array_ndim(NULL), -1);
    BAD_NULL(spmd_array_shape(NULL));
    BAD_INT(spmd_array_dtype(NULL), SPMD_DTYPE_COUNT);
    BAD_INT(spmd_array_size(NULL), 0);
    BAD_NULL(spmd_array_sharding(NULL));
    BAD_INT(spmd_array_is_fully_addressable(NULL), 0);
    BAD_INT(spmd_array_num_shards(NULL), 0);

    spmd_shard shard;
    BAD(spmd_array_shard(NULL, 0, &shard), SPMD_ERR_INVALID_ARGUMENT, "'array' is NULL");
    BAD(spmd_array_shard(a, -1, &shard), SPMD_ERR_INVALID_ARGUMENT, "shard index -1",
        "out of range", "4 shard");
    BAD(spmd_array_shard(a, 4, &shard), SPMD_ERR_INVALID_ARGUMENT, "shard index 4", "out of range");
    BAD(spmd_array_shard(a, 0, NULL), SPMD_ERR_INVALID_ARGUMENT, "'shard' is NULL");

    float dst[64];
    BAD(spmd_array_shard_to_host(NULL, 0, dst, sizeof dst), SPMD_ERR_INVALID_ARGUMENT,
        "'array' is NULL");
    BAD(spmd_array_shard_to_host(a, 4, dst, sizeof dst), SPMD_ERR_INVALID_ARGUMENT, "out of range");
    BAD(spmd_array_shard_to_host(a, -1, dst, sizeof dst), SPMD_ERR_INVALID_ARGUMENT,
        "out of range");
    BAD(spmd_array_shard_to_host(a, 0, NULL, sizeof dst), SPMD_ERR_INVALID_ARGUMENT,
        "'dst' is NULL");
    BAD(spmd_array_shard_to_host(a, 0, dst, 15), SPMD_ERR_INVALID_ARGUMENT, "15 bytes", "16");
    BAD(spmd_array_shard_to_host(a, 0, dst, 0), SPMD_ERR_INVALID_ARGUMENT, "0 bytes");

    BAD(spmd_array_to_host(NULL, dst, sizeof dst), SPMD_ERR_INVALID_ARGUMENT, "'array' is NULL");
    BAD(spmd_array_to_host(a, NULL, sizeof dst), SPMD_ERR_INVALID_ARGUMENT, "'dst' is NULL");
    BAD(spmd_array_to_host(a, dst, 63), SPMD_ERR_INVALID_ARGUMENT, "63 bytes", "64");
    BAD(spmd_array_to_host(a, dst, 0), SPMD_ERR_INVALID_ARGUMENT, "0 bytes");

    /* the array is intact */
    assert_ok(spmd_array_to_host(a, dst, 64));
    for (int i = 0; i < 16; i++)
        assert_true(dst[i] == (float)i);
}

/* A shape whose element count fits size_t but whose byte count does not: 2^62 float32 are
 * 2^64 bytes. P() keeps the whole shape on every device, so the bytes per shard overflow. */
static void test_byte_size_overflow(void **state)
{
    (void)state;
    const int64_t huge[1] = {(int64_t)1 << 62};
    spmd_array *out = NULL;
    pairs++;
    spmd_status st = spmd_device_put(host, 1, huge, SPMD_DTYPE_F32, g_rep, &out);
    int bad_put = st == SPMD_OK || out != NULL;
    if (bad_put)
        print_error("ERROR: spmd_device_put of float32[2^62] (2^64 bytes) returned %s with "
                    "*out = %p; expected SPMD_ERR_SHAPE (bytes overflow size_t)\n",
                    spmd_status_name(st), (void *)out);
    spmd_array_destroy(out);
    out = NULL;
    pairs++;
    st = spmd_array_from_callback(1, huge, SPMD_DTYPE_F32, g_rep, failing_callback, &(int){-1000},
                                  &out);
    int bad_cb = st == SPMD_OK || out != NULL;
    if (bad_cb)
        print_error("ERROR: spmd_array_from_callback of float32[2^62] returned %s with "
                    "*out = %p; expected SPMD_ERR_SHAPE (bytes overflow size_t)\n",
                    spmd_status_name(st), (void *)out);
    spmd_array_destroy(out);
    if (bad_put || bad_cb)
        fail_msg("a byte size that overflows size_t was accepted");
}

/* ---- runtime.h, dtype.h, status.h -------------------------------------------------------- */

static void test_runtime(void **state)
{
    (void)state;
    spmd_device_info info;
    BAD(spmd_device_get_info(0, NULL), SPMD_ERR_INVALID_ARGUMENT, "'info' is NULL");
    BAD(spmd_device_get_info(-1, &info), SPMD_ERR_INVALID_ARGUMENT, "-1", "out of range", "0..3");
    BAD(spmd_device_get_info(4, &info), SPMD_ERR_INVALID_ARGUMENT, "device id 4", "out of range");
    BAD_INT(spmd_local_device_id(-1), -1);
    BAD_INT(spmd_local_device_id(4), -1);
    /* a nested spmd_init with bad options fails and takes no reference (checked in main) */
    spmd_init_options o = SPMD_INIT_OPTIONS_INIT;
    o.version = 0;
    BAD(spmd_init(&o), SPMD_ERR_INVALID_ARGUMENT, "options.version");
    o.version = SPMD_INIT_OPTIONS_VERSION;
    o.use_mpi = 5;
    BAD(spmd_init(&o), SPMD_ERR_INVALID_ARGUMENT, "options.use_mpi");
    assert_true(spmd_is_initialized());
    assert_int_equal(spmd_device_count(), 4);
    BAD_STR(spmd_platform_name((spmd_platform)7), "invalid");
    BAD_INT(spmd_dtype_size((spmd_dtype)99), 0);
    BAD_INT(spmd_dtype_size(SPMD_DTYPE_COUNT), 0);
    BAD_STR(spmd_dtype_name((spmd_dtype)99), "invalid");
    BAD_INT(spmd_dtype_from_name(NULL), SPMD_DTYPE_COUNT);
    BAD_INT(spmd_dtype_from_name("float128"), SPMD_DTYPE_COUNT);
    BAD_INT(spmd_dtype_from_name(""), SPMD_DTYPE_COUNT);
    BAD_STR(spmd_status_string((spmd_status)-50), "unknown status");
    BAD_STR(spmd_status_name((spmd_status)-50), "SPMD_UNKNOWN_STATUS");
}

/* ---- handles of the wrong type ----------------------------------------------------------- */

static void test_wrong_type(void **state)
{
    (void)state;
    spmd_mesh *spec_as_mesh = (spmd_mesh *)(void *)g_spec;
    spmd_spec *mesh_as_spec = (spmd_spec *)(void *)g_mesh;
    spmd_sharding *mesh_as_sharding = (spmd_sharding *)(void *)g_mesh;
    spmd_sharding *array_as_sharding = (spmd_sharding *)(void *)g_array;
    spmd_array *sharding_as_array = (spmd_array *)(void *)g_xy;
    spmd_array *spec_as_array = (spmd_array *)(void *)g_spec;
    char buf[128];
    int c[2];
    float dst[16];
    spmd_shard shard;

    BAD(spmd_mesh_format(spec_as_mesh, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT,
        "not a live spmd_mesh");
    BAD(spmd_mesh_device_coords((spmd_mesh *)(void *)g_array, 0, c), SPMD_ERR_INVALID_ARGUMENT,
        "not a live spmd_mesh");
    BAD(spmd_mesh_check_contiguous(spec_as_mesh), SPMD_ERR_INVALID_ARGUMENT, "not a live");
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create(spec_as_mesh, g_spec, &out),
             SPMD_ERR_INVALID_ARGUMENT, "not a live spmd_mesh");
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create(g_mesh, mesh_as_spec, &out),
             SPMD_ERR_INVALID_ARGUMENT, "not a live spmd_spec");
    BAD_CTOR(spmd_sharding, out, spmd_sharding_create_parse(spec_as_mesh, "'x'", &out),
             SPMD_ERR_INVALID_ARGUMENT, "not a live spmd_mesh");
    BAD(spmd_spec_format((spmd_spec *)(void *)g_xy, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT,
        "not a live spmd_spec");
    BAD(spmd_spec_append(mesh_as_spec, 0, NULL), SPMD_ERR_INVALID_ARGUMENT, "not a live spmd_spec");
    BAD_CTOR(spmd_spec, out, spmd_spec_copy((spmd_spec *)(void *)g_array, &out),
             SPMD_ERR_INVALID_ARGUMENT, "not a live spmd_spec");
    BAD(spmd_sharding_check_shape(mesh_as_sharding, 2, s44), SPMD_ERR_INVALID_ARGUMENT,
        "not a live spmd_sharding");
    BAD(spmd_sharding_format(array_as_sharding, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT,
        "not a live spmd_sharding");
    BAD_CTOR(spmd_array, out, spmd_device_put(host, 2, s44, SPMD_DTYPE_F32, mesh_as_sharding, &out),
             SPMD_ERR_INVALID_ARGUMENT, "not a live spmd_sharding");
    BAD_CTOR(spmd_array, out,
             spmd_array_from_callback(2, s44, SPMD_DTYPE_F32, array_as_sharding, fill_callback,
                                      NULL, &out),
             SPMD_ERR_INVALID_ARGUMENT, "not a live spmd_sharding");
    BAD(spmd_array_to_host(sharding_as_array, dst, sizeof dst), SPMD_ERR_INVALID_ARGUMENT,
        "not a live spmd_array");
    BAD(spmd_array_shard(spec_as_array, 0, &shard), SPMD_ERR_INVALID_ARGUMENT,
        "not a live spmd_array");
    BAD(spmd_array_shard_to_host(sharding_as_array, 0, dst, sizeof dst), SPMD_ERR_INVALID_ARGUMENT,
        "not a live spmd_array");
    spmd_array *wrong[4] = {g_single[0], (spmd_array *)(void *)g_mesh, g_single[2], g_single[3]};
    BAD_CTOR(spmd_array, out,
             spmd_array_from_single_device_arrays(2, s44, SPMD_DTYPE_F32, g_xy, 4, wrong, &out),
             SPMD_ERR_INVALID_ARGUMENT, "arrays[1]", "not a live spmd_array");
    /* queries answer their sentinels */
    BAD_INT(spmd_mesh_ndim(spec_as_mesh), -1);
    BAD_INT(spmd_mesh_size(spec_as_mesh), 0);
    BAD_INT(spmd_spec_length(mesh_as_spec), -1);
    BAD_NULL(spmd_sharding_mesh(array_as_sharding));
    BAD_INT(spmd_sharding_num_devices(mesh_as_sharding), 0);
    BAD_INT(spmd_array_ndim(sharding_as_array), -1);
    BAD_INT(spmd_array_dtype(spec_as_array), SPMD_DTYPE_COUNT);
    BAD_INT(spmd_mesh_equal(g_mesh, spec_as_mesh), 0);
    BAD_INT(spmd_spec_is_equivalent(g_spec, mesh_as_spec), 0);
    BAD_INT(spmd_sharding_is_equivalent(g_xy, mesh_as_sharding, 2), 0);
    /* retain and destroy of the wrong type do nothing */
    BAD_VOID(spmd_mesh_destroy(spec_as_mesh));
    BAD_VOID(spmd_spec_destroy(mesh_as_spec));
    BAD_VOID(spmd_sharding_destroy(array_as_sharding));
    BAD_VOID(spmd_array_destroy(sharding_as_array));
    BAD_VOID(spmd_mesh_retain(spec_as_mesh));
    BAD_VOID(spmd_sharding_retain(mesh_as_sharding));
    /* everything is still alive and unchanged */
    assert_int_equal(spmd_spec_length(g_spec), 2);
    assert_int_equal(spmd_mesh_ndim(g_mesh), 2);
    assert_int_equal(spmd_sharding_num_devices(g_xy), 4);
    assert_int_equal(spmd_array_ndim(g_array), 2);
    assert_ok(spmd_array_to_host(g_array, dst, sizeof dst));
}

/* ---- extreme but legal: 8 axes with 63-character names ----------------------------------- */

static void test_long_axis_names(void **state)
{
    (void)state;
    char names[SPMD_MAX_MESH_AXES][SPMD_MAX_AXIS_NAME + 1];
    const char *ptrs[SPMD_MAX_MESH_AXES];
    int shape[SPMD_MAX_MESH_AXES];
    for (int a = 0; a < SPMD_MAX_MESH_AXES; a++) {
        memset(names[a], 'a' + a, SPMD_MAX_AXIS_NAME);
        names[a][SPMD_MAX_AXIS_NAME] = '\0';
        ptrs[a] = names[a];
        shape[a] = a == 0 ? 4 : 1;
    }
    spmd_mesh *mesh = NULL;
    spmd_sharding *sh = NULL;
    assert_ok(spmd_mesh_create(SPMD_MAX_MESH_AXES, shape, ptrs, NULL, 0, &mesh));
    static char mesh_text[4096], text[8192];
    assert_ok(spmd_mesh_format(mesh, mesh_text, sizeof mesh_text));
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_create(&spec));
    assert_ok(spmd_spec_append_axis(spec, names[0]));
    assert_ok(spmd_spec_append_axis(spec, names[1]));
    assert_ok(spmd_sharding_create(mesh, spec, &sh));
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);

    /* The sharding's text is longer than 512 bytes; the caller's buffer is large enough. */
    spmd_status st = spmd_sharding_format(sh, text, sizeof text);
    int format_failed = st != SPMD_OK || strstr(text, mesh_text) == NULL;
    if (format_failed)
        print_error("ERROR: spmd_sharding_format of a mesh with 8 axes of 63-character names "
                    "into %zu bytes returned %s: %s\n",
                    sizeof text, spmd_status_name(st), spmd_last_error());
    /* A rank error on this sharding shows the sharding in its message. */
    const int64_t r1[1] = {4};
    pairs++;
    st = spmd_sharding_check_shape(sh, 1, r1);
    const char *msg = spmd_last_error();
    int message_failed = st != SPMD_ERR_SHAPE || !strstr(msg, "rank at least 2") ||
                         !strstr(msg, "NamedSharding(mesh=Mesh('aaa");
    if (message_failed)
        print_error("ERROR: spmd_sharding_check_shape(rank 1) on that sharding returned %s with "
                    "a message that does not show the sharding: %s\n",
                    spmd_status_name(st), msg);
    spmd_sharding_destroy(sh);
    if (format_failed || message_failed)
        fail_msg("long axis names break sharding formatting");
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return child_main(argv[1]);
    self_path = argv[0];

    const struct CMUnitTest before[] = {
        cmocka_unit_test(test_before_init),
        cmocka_unit_test(test_init_options),
        cmocka_unit_test(test_after_finalize),
    };
    int failures = cmocka_run_group_tests_name("before spmd_init", before, NULL, NULL);

    spmd_status st = init_four_cpu_devices();
    if (st != SPMD_OK) {
        fprintf(stderr, "spmd_init failed: %s: %s\n", spmd_status_name(st), spmd_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mesh),
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_sharding),
        cmocka_unit_test(test_array_constructors),
        cmocka_unit_test(test_array_access),
        cmocka_unit_test(test_byte_size_overflow),
        cmocka_unit_test(test_runtime),
        cmocka_unit_test(test_wrong_type),
        cmocka_unit_test(test_long_axis_names),
    };
    failures +=
        cmocka_run_group_tests_name("after spmd_init", tests, fixture_setup, fixture_teardown);
    printf("test_bad_input: exercised %d (function, bad input) pairs\n", pairs);
    int rc = spmd_test_finish(failures);
    if (spmd_is_initialized()) {
        fprintf(stderr, "a failed nested spmd_init left a reference behind: libspmd is still "
                        "initialized after the matching spmd_finalize\n");
        rc = 1;
    }
    return rc;
}
