/* What the sources of test_shard_map share: the run's geometry, the non-fatal checks and the
 * reference model (meshes, specs, inputs, verify_array) of test_shard_map.c, and the tests. */
#ifndef SPMD_TEST_SHARD_MAP_H
#define SPMD_TEST_SHARD_MAP_H

#include "testutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <spmd/config.h>
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

#define MAX_DEV 64 /* most global devices a run may have */
#define MAX_AXES 3
#define MAX_TUPLE 3

/* The run's geometry; global device ids are process-major. */
extern int nproc, nlocal, me, ndev;

/* ---- non-fatal checks ------------------------------------------------------------------ */

extern atomic_int nfail;

void check_failed(const char *file, int line, const char *cond, const char *fmt, ...);

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            check_failed(__FILE__, __LINE__, #cond, __VA_ARGS__);                                  \
    } while (0)

/* Inside fn: also marks the device's result as bad. */
#define FN_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            check_failed(__FILE__, __LINE__, #cond, __VA_ARGS__);                                  \
            bad = 1;                                                                               \
        }                                                                                          \
    } while (0)

/* Status and message fragments, like assert_status, but recorded instead of jumping. */
int expect_status_impl(spmd_status got, spmd_status want, const char *expr, const char *file,
                       int line, ...);

#define EXPECT_STATUS(expr, want, ...)                                                             \
    expect_status_impl((expr), (want), #expr, __FILE__, __LINE__, __VA_ARGS__, (char *)NULL)
#define EXPECT_OK(expr) EXPECT_STATUS(expr, SPMD_OK, "")

/* Fails the current cmocka test if any check failed since `before`. */
void end_test(int before);
double now_s(void);
/* 1 when every process passed the same value (always 1 in one process). */
int same_on_all_processes(int v);

extern char sentinel_byte;
#define SENTINEL ((spmd_array *)(void *)&sentinel_byte)

/* ---- reference model: meshes, specs, blocks -------------------------------------------- */

typedef spmd_test_mesh rmesh;

int owner(int device_id);
void rmesh_fini(rmesh *m);
int rmesh_flat_of(const rmesh *m, int device_id);
/* 1-D 'x' over every device, in id order. */
void mesh_x(rmesh *m);
/* (process_count, local_count) named ('p', 'l'). */
void mesh_pl(rmesh *m);

/* A spec as mesh axis indices, the major axis of each entry first. */
typedef struct rspec {
    int len;
    int naxes[SPMD_MAX_RANK];
    int axes[SPMD_MAX_RANK][MAX_TUPLE];
} rspec;

/* rs(2, "0", "") is P(axis 0, None); "10" is the tuple (axis 1, axis 0). */
rspec rs(int len, ...);
spmd_spec *spec_parse(const char *text);
spmd_sharding *sharding_make(const rmesh *m, const rspec *s);

/* The global test data: element with row-major index g is seed + g (exact in every dtype). */
double gval(int seed, int64_t g);
spmd_array *make_input(const rmesh *m, const rspec *s, int ndim, const int64_t *shape, spmd_dtype t,
                       int seed);

/* Expected value of a global element of an output, from its global multi-index. */
typedef double (*expect_fn)(const int64_t *gidx, const void *user);

typedef struct seed_expect {
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int seed;
    double scale, offset; /* value = (seed + g) * scale + offset */
} seed_expect;

double expect_seeded(const int64_t *gidx, const void *user);
double expect_const(const int64_t *gidx, const void *user);

/* Checks an output array against the reference (see test_shard_map.c). */
void verify_array(const spmd_array *a, const rmesh *m, const rspec *s, int ndim,
                  const int64_t *shape, spmd_dtype t, expect_fn expect, const void *user,
                  const char *what);

/* ---- the tests of the other sources ------------------------------------------------------ */

/* test_shard_map_errors.c */
void test_validation(void **state);
void test_fn_failure(void **state);
/* Copies every input to the same output and fills the outputs beyond them with 0. */
spmd_status fn_copy_all(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user);

/* test_shard_map_plans.c */
void test_plan(void **state);
void test_donation(void **state);
void test_context(void **state);
void test_subset_meshes(void **state);

#endif /* SPMD_TEST_SHARD_MAP_H */
