/* Shared helpers for libspmd tests: cmocka plus status assertions and MPI-aware exit codes. */
#ifndef SPMD_TESTUTIL_H
#define SPMD_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <spmd.h>

#define SPMD_TEST_SKIP 77

/* 1 in a build with AddressSanitizer (gcc's macro, clang's feature), else 0. */
#if defined(__SANITIZE_ADDRESS__)
#define SPMD_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPMD_TEST_ASAN 1
#endif
#endif
#ifndef SPMD_TEST_ASAN
#define SPMD_TEST_ASAN 0
#endif

/** Fails the current test, printing the status name and spmd_last_error(), unless OK. */
#define assert_ok(expr)                                                                            \
    do {                                                                                           \
        spmd_status st_ = (expr);                                                                  \
        if (st_ != SPMD_OK)                                                                        \
            fail_msg("%s returned %s: %s", #expr, spmd_status_name(st_), spmd_last_error());       \
    } while (0)

/** In fn (or anything returning a status): returns `expr`'s status from it unless OK. */
#define SPMD_TEST_TRY(expr)                                                                        \
    do {                                                                                           \
        spmd_status try_ = (expr);                                                                 \
        if (try_ != SPMD_OK)                                                                       \
            return try_;                                                                           \
    } while (0)

/**
 * Asserts that `expr` returns `expected` and that spmd_last_error() contains every
 * NULL-terminated substring given after it.
 */
#define assert_status(expr, expected, ...)                                                         \
    spmd_test_check_status((expr), (expected), #expr, __FILE__, __LINE__, __VA_ARGS__, (char *)NULL)

void spmd_test_check_status(spmd_status got, spmd_status expected, const char *expr,
                            const char *file, int line, ...);

#ifdef SPMD_TEST_SHARDING_ONLY
/* Tests linked with the sharding math alone (src/sharding and the basics, no runtime): nothing
 * to start or finish, and meshes are abstract (the same index math, without devices). */
static inline void spmd_test_init(void) {}
static inline int spmd_test_finish(int failures) { return failures != 0; }
#define spmd_test_mesh_create spmd_mesh_create_abstract
#else
/** spmd_init with defaults; exits with status 1 (after printing why) on failure. */
void spmd_test_init(void);

/**
 * Combines `failures` over every process (so they all agree), finalizes libspmd and returns
 * the exit code: 0 when no process failed, 1 otherwise.
 */
int spmd_test_finish(int failures);
#define spmd_test_mesh_create spmd_mesh_create
#endif

/**
 * Non-fatal checks, for tests whose processes must keep making the same collective calls (a
 * failed assertion would leave the others waiting): a failed check prints where and why, with
 * the process index, and is counted; pass spmd_test_failed_checks() on to spmd_test_finish.
 * Any thread may check.
 */
#define SPMD_TEST_CHECK(cond, ...)                                                                 \
    do {                                                                                           \
        if (!(cond))                                                                               \
            spmd_test_check_failed(__FILE__, __LINE__, #cond, __VA_ARGS__);                        \
    } while (0)

void spmd_test_check_failed(const char *file, int line, const char *cond, const char *fmt, ...);
int spmd_test_failed_checks(void);

#ifndef SPMD_TEST_SHARDING_ONLY
/** A line of every device: mesh 'i', the specs 'i' and P(), and a float32 array of
 * `per_device` elements per device made from `host`, split over 'i'. Exits on failure. */
typedef struct spmd_test_line {
    spmd_mesh *mesh;
    spmd_spec *split, *replicated;
    spmd_array *x;
} spmd_test_line;
spmd_test_line spmd_test_line_create(int per_device, const float *host);
/** Runs fn on every device of a line mesh with no input and one output of `bytes` bytes per
 * device (out[0], uint8); returns that output, or NULL after a failed check. */
spmd_array *spmd_test_each_device(spmd_fn fn, void *user, size_t bytes);
/**
 * A block op's test on the host and on the devices: run(NULL, NULL) checks the host path and
 * returns its failures; then run(ctx, results) on every device writes `bytes` of results into
 * its block, and check(results, shard) sees each shard's on the host. Returns run's failures.
 */
typedef int (*spmd_test_op_run)(spmd_ctx *ctx, unsigned char *results);
typedef void (*spmd_test_op_check)(const unsigned char *results, int shard);
int spmd_test_block_op(spmd_test_op_run run, size_t bytes, spmd_test_op_check check);
/** spmd_test_init, then the device count; a run of more than `most` devices is skipped (the
 * process exits with SPMD_TEST_SKIP). */
int spmd_test_init_devices(int most);
void spmd_test_line_destroy(spmd_test_line *line);
/** 1 where the kernel gives transparent huge pages (its setting is not `never`). */
int spmd_test_kernel_gives_huge_pages(void);
/** The mapping that holds an address, from /proc/self/smaps: its bounds and whether it asks for
 * huge pages (VmFlags "hg"). */
typedef struct spmd_test_mapping {
    uintptr_t lo, hi;
    int huge;
} spmd_test_mapping;
/** 1 with *out filled; 0 where smaps does not say (no such file, a kernel without transparent
 * huge pages, no mapping there). */
int spmd_test_mapping_of(const void *p, spmd_test_mapping *out);
#endif

/** Most global devices a test run may have. */
#define SPMD_TEST_MAX_DEVICES 64

/* A mesh beside what the test references need: the device at each flat position, this
 * process's positions, and a label for messages. */
typedef struct spmd_test_mesh {
    int ndim;
    int shape[SPMD_MAX_MESH_AXES];
    const char *names[SPMD_MAX_MESH_AXES];
    int size;
    int ids[SPMD_TEST_MAX_DEVICES]; /* global id of the device at each flat position */
    int num_local;
    int local_flat[SPMD_TEST_MAX_DEVICES]; /* this process's devices, mesh flat order */
    char label[96];                        /* "label(a=4,b=2)", or empty */
    spmd_mesh *mesh;
} spmd_test_mesh;

/**
 * Creates the mesh (ids NULL: every device in id order, spmd_mesh_create's default) and fills
 * its reference; `label` may be NULL. Device ids are process-major, every process holding
 * spmd_local_device_count() of them.
 */
void spmd_test_mesh_build(spmd_test_mesh *m, const char *label, int ndim, const int *shape,
                          const char *const *names, const int *ids);

/**
 * Element i of a dense buffer of dtype t as a double (f16/bf16 through libspmd's conversions,
 * int64 beyond 2^53 rounded), and the reverse (C's conversions; f16/bf16 round to nearest even).
 * For the test references that need no conversion of their own.
 */
double spmd_test_load(spmd_dtype t, const void *p, int64_t i);
void spmd_test_store(spmd_dtype t, void *p, int64_t i, double v);

/** Deterministic pseudo-random numbers (xorshift64*), independent of the C library. */
typedef struct spmd_test_rng {
    uint64_t state;
} spmd_test_rng;
uint64_t spmd_test_rng_next(spmd_test_rng *rng);
/** Uniform integer in [0, n). */
int spmd_test_rng_below(spmd_test_rng *rng, int n);

#endif /* SPMD_TESTUTIL_H */
