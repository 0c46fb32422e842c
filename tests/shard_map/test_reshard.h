/* What the sources of test_reshard share: the run's geometry, the non-fatal checks, the reference
 * model and the checked reshard (run_case) of test_reshard.c, and the cases. */
#ifndef SPMD_TEST_RESHARD_H
#define SPMD_TEST_RESHARD_H

#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd/config.h>
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

#define MAX_DEV 64  /* most global devices a run may have */
#define MAX_PROC 64 /* most processes (holder sets are 64-bit masks) */
#define MAX_AXES 3
#define MAX_TUPLE 3
#define MAX_BATCH 4

/* The run's geometry; global device ids are process-major. */
extern int nproc, nlocal, me, ndev;

/* ---- non-fatal checks ------------------------------------------------------------------ */

extern int nfail;

void check_failed(const char *file, int line, const char *cond, const char *fmt, ...);

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            check_failed(__FILE__, __LINE__, #cond, __VA_ARGS__);                                  \
    } while (0)

/* Status and message fragments, like assert_status, but recorded instead of jumping. A fragment
 * "a|b" accepts a message that contains a or b. */
int expect_status_impl(spmd_status got, spmd_status want, const char *expr, const char *file,
                       int line, ...);

#define EXPECT_STATUS(expr, want, ...)                                                             \
    expect_status_impl((expr), (want), #expr, __FILE__, __LINE__, __VA_ARGS__, (char *)NULL)
#define EXPECT_OK(expr) EXPECT_STATUS(expr, SPMD_OK, "")

/* The sum over every process (MPI_Allreduce on libspmd's communicator). */
uint64_t sum_u64(uint64_t v);
/* Fails the current cmocka test on every process if a check failed on any since `before`. */
void end_test(int before);

extern char sentinel_byte;
#define SENTINEL ((spmd_array *)(void *)&sentinel_byte)

/* ---- reference model: meshes, specs, layouts ------------------------------------------- */

typedef spmd_test_mesh rmesh;

/* A spec as mesh axis indices, the major axis of each entry first. */
typedef struct rspec {
    int len;
    int naxes[SPMD_MAX_RANK];
    int axes[SPMD_MAX_RANK][MAX_TUPLE];
} rspec;

/* rs(2, "0", "") is P(axis 0, None); "10" is the tuple (axis 1, axis 0). */
rspec rs(int len, ...);
spmd_sharding *sharding_make(const rmesh *m, const rspec *s);
int64_t num_elems(int ndim, const int64_t *shape);
/* Bytes per element, written out here rather than asked of the library. */
size_t esize(spmd_dtype t);

/* Where every device of a sharding's mesh sits for an array of one shape. */
typedef struct rlayout {
    const rmesh *m;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int64_t shard_shape[SPMD_MAX_RANK];
    int64_t shard_elems;
    spmd_box box[MAX_DEV]; /* per mesh flat position */
    int64_t key[MAX_DEV];  /* the block's number in the row-major grid of blocks */
    int replica[MAX_DEV];  /* row-major rank of the coordinates on the unused axes */
} rlayout;

int box_equal(const spmd_box *a, const spmd_box *b);
/* Compares n elements; reports the first difference. Returns 1 when equal. */
int compare_elems(const void *want, const void *got, int64_t n, spmd_dtype t, const char *what,
                  const char *where);

/* The traffic a reshard must cause (traffic_compute). */
typedef struct rtraffic {
    int src_unique;               /* no element of the source is held by two processes */
    uint64_t recv[MAX_PROC];      /* elements each process must receive, at least */
    uint64_t recv_total;          /* their sum */
    uint64_t sends_to[MAX_PROC];  /* src_unique: elements this process sends to each process */
    uint64_t recv_from[MAX_PROC]; /* src_unique: elements this process receives from each */
    uint64_t send_me;             /* src_unique: elements this process sends */
    int msgs_sent, msgs_recv;     /* src_unique: processes this one sends to / receives from */
    /* this process's destination shards: which reuse the source buffer of their device */
    int shared_src[MAX_DEV];        /* per local destination shard: source shard index or -1 */
    int64_t shared_offset[MAX_DEV]; /* elements into that source shard (a view) */
    uint64_t shared_elems;          /* elements of the shards that reuse a source buffer */
    uint64_t local_elems;           /* elements of all this process's destination shards */
    uint64_t copy_min;              /* elements of the other shards that a local source holds */
} rtraffic;

/* ---- the array checker ------------------------------------------------------------------ */

/* Checks `a` against layout L of sharding `want` whose global value is `host`. */
void verify_array(const spmd_array *a, const rlayout *L, const spmd_sharding *want, spmd_dtype t,
                  const void *host, const char *what);
/* A donated (deleted) array: every use fails, naming the deletion. */
void check_deleted(spmd_array *x, size_t bytes, const spmd_sharding *some_sharding,
                   const char *what);

/* ---- one reshard, checked ------------------------------------------------------------------ */

typedef struct xcase {
    const rmesh *sm, *dm; /* source and destination meshes */
    rspec ss, ds;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    spmd_dtype t;
    int seed;
    char what[320];
} xcase;

xcase xc(const rmesh *sm, rspec ss, const rmesh *dm, rspec ds, spmd_dtype t, int ndim,
         const int64_t *shape);

typedef struct run_opts {
    int donate;
    int same_sharding;  /* pass x's own sharding object as the new sharding */
    int identical;      /* the layouts agree: assert no traffic and every buffer shared */
    int outsiders_skip; /* processes owning no device of either mesh do not call */
} run_opts;

/* Everything a reshard produced, for the batch comparison. */
typedef struct xrun {
    rlayout S, D;
    rtraffic T;
    spmd_sharding *ssh, *dsh;
    void *host;
    spmd_array *x, *y;
    void *src_ptr[MAX_DEV];
} xrun;

void xrun_prepare(xrun *r, const xcase *c);
void xrun_release(xrun *r);
/* Destination shards that are one run of their device's source shard are views of it. */
void check_sharing(const xrun *r, const char *what);
/* One reshard, checked: ssh, dsh are shardings to use (retained) instead of new ones built from
 * the case; may be NULL (run_case). */
void run_case_on(const xcase *c, const run_opts *o, spmd_sharding *ssh, spmd_sharding *dsh);
void run_case(const xcase *c, const run_opts *o);

/* ---- the meshes ------------------------------------------------------------------------ */

typedef struct mesh_set {
    rmesh m1; /* 1-D 'a' over every device in id order */
    rmesh m2; /* 2-D ('a', 'b') = (A, B), transposed: position (i, j) holds device j*A + i */
    rmesh g2; /* 2-D ('a', 'b') = (A, B) over every device in id order */
    rmesh h0; /* 1-D 'a' over the first half of the devices (ndev >= 2) */
    rmesh h1; /* 1-D 'a' over the second half of the devices (ndev >= 2) */
    rmesh p0; /* 1-D 'a' over process 0's devices, reversed */
    rmesh ph; /* 1-D 'a' over the devices of the first half of the processes (nproc >= 2) */
    int A, B;
    int halves, procs_half;
} mesh_set;

void meshes_create(mesh_set *s);
void meshes_destroy(mesh_set *s);

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

/* ---- the cases (test_reshard_cases.c) --------------------------------------------------- */

void test_layouts(void **state);
void test_identical(void **state);
void test_batch(void **state);
void test_donate(void **state);
void test_copy(void **state);
void test_errors(void **state);
void test_sharding_reuse(void **state);
void test_random(void **state);
void test_outsiders(void **state);

#endif /* SPMD_TEST_RESHARD_H */
