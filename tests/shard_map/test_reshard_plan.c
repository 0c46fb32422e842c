/*
 * What planning a reshard costs each process, counted (spmd_reshard_stats: plans_built,
 * plan_pieces, plan_steps) rather than timed, so oversubscription does not matter:
 *
 * - work: for meshes over more and more devices (the first k processes' devices, or in one
 *   process the first k devices) and several layouts, each process's planning steps stay within
 *   a constant times its own pieces (plus its shards and one pass over a replicated block's
 *   devices), never the square of the device count; for a layout in which each process moves
 *   its own shards only (a mesh in reversed device order), the steps do not grow with the mesh.
 * - cache: a plan is reused by the repeated call, by shardings made anew equal to the first
 *   (new mesh, new spec, other axis names, a trailing None), by arrays of another dtype and by
 *   a batch of arrays sharing it; another device order plans again, and so does a layout whose
 *   every sharding was destroyed. Every result is checked element by element.
 * - datatypes (several processes, PMPI counters): the first call makes the MPI datatypes of its
 *   messages, a repeated call makes no box type again and at most one type per message.
 *
 * Checks never jump out of a test while a collective may follow (SPMD_TEST_CHECK): a failed
 * check is recorded and every process fails at the end together.
 *
 *   mpirun -np 4 -x SPMD_NUM_CPU_DEVICES=4 test_reshard_plan
 */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd/config.h>
#ifdef SPMD_HAVE_MPI
#include <mpi.h>
#include <spmd/mpi.h>
#endif

static int nproc, nlocal, me, ndev;

#define CHECK SPMD_TEST_CHECK
#define EXPECT_OK(expr) expect_ok_impl((expr), #expr, __FILE__, __LINE__)

static int expect_ok_impl(spmd_status st, const char *expr, const char *file, int line)
{
    if (st == SPMD_OK)
        return 1;
    spmd_test_check_failed(file, line, expr, "returned %s: %s", spmd_status_name(st),
                           spmd_last_error());
    return 0;
}

static uint64_t max_u64(uint64_t v)
{
#ifdef SPMD_HAVE_MPI
    if (nproc > 1) {
        uint64_t m = 0;
        PMPI_Allreduce(&v, &m, 1, MPI_UINT64_T, MPI_MAX, spmd_mpi_comm());
        return m;
    }
#endif
    return v;
}

/* ---- MPI datatype constructors made by libspmd (PMPI), per process ---- */

#ifdef SPMD_HAVE_MPI
static atomic_long boxes_made, structs_made;

int MPI_Type_create_subarray(int ndims, const int sizes[], const int subsizes[], const int starts[],
                             int order, MPI_Datatype oldtype, MPI_Datatype *newtype)
{
    atomic_fetch_add(&boxes_made, 1);
    return PMPI_Type_create_subarray(ndims, sizes, subsizes, starts, order, oldtype, newtype);
}

int MPI_Type_create_struct(int count, const int blocklengths[], const MPI_Aint displacements[],
                           const MPI_Datatype types[], MPI_Datatype *newtype)
{
    atomic_fetch_add(&structs_made, 1);
    return PMPI_Type_create_struct(count, blocklengths, displacements, types, newtype);
}
#endif

/* ---- arrays whose element (i, j) is i * N + j ---- */

typedef struct fill_arg {
    int64_t n;
    spmd_dtype dtype;
} fill_arg;

static spmd_status fill(const spmd_box *index, void *dst, void *user)
{
    const fill_arg *f = user;
    int64_t k = 0;
    for (int64_t i = index->start[0]; i < index->stop[0]; i++)
        for (int64_t j = index->start[1]; j < index->stop[1]; j++)
            spmd_test_store(f->dtype, dst, k++, (double)(i * f->n + j));
    return SPMD_OK;
}

static spmd_array *make_array(const spmd_sharding *sh, int64_t n, spmd_dtype dtype)
{
    int64_t shape[2] = {n, n};
    fill_arg f = {n, dtype};
    spmd_array *x = NULL;
    EXPECT_OK(spmd_array_from_callback(2, shape, dtype, sh, fill, &f, &x));
    return x;
}

/* Every element of every addressable shard of y against i * N + j. */
static void check_values(const spmd_array *y, int64_t n, const char *what)
{
    if (!y)
        return;
    int64_t wrong = 0;
    for (int k = 0; k < spmd_array_num_shards(y); k++) {
        spmd_shard sh;
        if (!EXPECT_OK(spmd_array_shard(y, k, &sh)))
            continue;
        void *host = malloc(sh.nbytes ? sh.nbytes : 1);
        if (!host || !EXPECT_OK(spmd_array_shard_to_host(y, k, host, sh.nbytes))) {
            free(host);
            continue;
        }
        int64_t e = 0;
        for (int64_t i = sh.index.start[0]; i < sh.index.stop[0]; i++)
            for (int64_t j = sh.index.start[1]; j < sh.index.stop[1]; j++)
                wrong += spmd_test_load(spmd_array_dtype(y), host, e++) != (double)(i * n + j);
        free(host);
    }
    CHECK(wrong == 0, "%s: %lld wrong elements", what, (long long)wrong);
}

/* One reshard with stats; the result is checked, then destroyed (NULL stats: not wanted). */
static void reshard(spmd_array *x, const spmd_sharding *to, int64_t n, const char *what,
                    spmd_reshard_stats *stats)
{
    spmd_reshard_stats st;
    memset(&st, 0, sizeof st);
    spmd_reshard_options opts = SPMD_RESHARD_OPTIONS_INIT;
    opts.stats = &st;
    spmd_array *y = NULL;
    if (x && to && EXPECT_OK(spmd_reshard(x, to, &opts, &y)))
        check_values(y, n, what);
    spmd_array_destroy(y);
    if (stats)
        *stats = st;
}

static spmd_mesh *mesh_of(int ndim, const int *shape, const char *const *names, const int *ids,
                          int nids)
{
    spmd_mesh *m = NULL;
    EXPECT_OK(spmd_mesh_create(ndim, shape, names, ids, nids, &m));
    return m;
}

static spmd_sharding *sharding_of(spmd_mesh *m, const char *spec)
{
    spmd_sharding *s = NULL;
    if (m)
        EXPECT_OK(spmd_sharding_create_parse(m, spec, &s));
    return s;
}

static int local_count(const spmd_sharding *s)
{
    return s ? spmd_sharding_num_addressable_devices(s) : 0;
}

/* ---- work: planning steps against the process's own pieces ---- */

typedef enum {
    ROWS_TO_COLS,
    REVERSED,
    REPLICATED_TO_ROWS,
    ROWS_TO_REPLICATED,
    TRANSPOSE,
    HALVES,
    LAYOUTS
} layout_kind;
static const char *const layout_text[LAYOUTS] = {
    "P('a')->P(None,'a')",    "P('a')->P('a') reversed devices",      "P()->P('a')", "P('a')->P()",
    "P('a','b')->P('b','a')", "P('a') first half->P('a') second half"};

/* The layout over the first `d` devices; 0 when d does not allow it. */
static int layout_make(layout_kind kind, int d, spmd_sharding **src, spmd_sharding **dst)
{
    static const char *const a[1] = {"a"}, *const ab[2] = {"a", "b"};
    int ids[SPMD_TEST_MAX_DEVICES], rev[SPMD_TEST_MAX_DEVICES];
    for (int i = 0; i < d; i++) {
        ids[i] = i;
        rev[i] = d - 1 - i;
    }
    *src = *dst = NULL;
    spmd_mesh *m1 = NULL, *m2 = NULL;
    switch (kind) {
    case ROWS_TO_COLS:
    case REPLICATED_TO_ROWS:
    case ROWS_TO_REPLICATED:
        m1 = mesh_of(1, &d, a, ids, d);
        *src = sharding_of(m1, kind == REPLICATED_TO_ROWS ? "" : "'a'");
        *dst = sharding_of(m1, kind == ROWS_TO_COLS         ? "None, 'a'"
                               : kind == REPLICATED_TO_ROWS ? "'a'"
                                                            : "");
        break;
    case REVERSED:
        m1 = mesh_of(1, &d, a, ids, d);
        m2 = mesh_of(1, &d, a, rev, d);
        *src = sharding_of(m1, "'a'");
        *dst = sharding_of(m2, "'a'");
        break;
    case TRANSPOSE: {
        if (d < 4 || d % 2 != 0)
            return 0;
        int shape[2] = {2, d / 2};
        m1 = mesh_of(2, shape, ab, ids, d);
        *src = sharding_of(m1, "'a', 'b'");
        *dst = sharding_of(m1, "'b', 'a'");
        break;
    }
    case HALVES: {
        if (d < 2 || d % 2 != 0)
            return 0;
        int h = d / 2;
        m1 = mesh_of(1, &h, a, ids, h);
        m2 = mesh_of(1, &h, a, ids + h, h);
        *src = sharding_of(m1, "'a'");
        *dst = sharding_of(m2, "'a'");
        break;
    }
    default:
        return 0;
    }
    spmd_mesh_destroy(m1);
    spmd_mesh_destroy(m2);
    return *src && *dst;
}

static void test_work(void **state)
{
    (void)state;
    int64_t n = 4 * ndev; /* divisible by every mesh size below and its halves */
    if (me == 0)
        printf("# %-40s %7s %9s %9s %9s (busiest process)\n", "layout", "devices", "pieces",
               "steps", "devices^2");
    for (int kind = 0; kind < LAYOUTS; kind++) {
        int sizes = 0;
        /* meshes over the first d devices: every process's devices, then fewer processes; in
         * one process, fewer devices */
        for (int d = ndev; d >= 2 && sizes < 8; d /= 2, sizes++) {
            if (nproc > 1 && d < nlocal)
                break;
            spmd_sharding *src, *dst;
            if (!layout_make((layout_kind)kind, d, &src, &dst)) {
                spmd_sharding_destroy(src);
                spmd_sharding_destroy(dst);
                continue;
            }
            char what[128];
            snprintf(what, sizeof what, "%s over %d devices", layout_text[kind], d);
            spmd_array *x = make_array(src, n, SPMD_DTYPE_F32);
            spmd_reshard_stats st;
            reshard(x, dst, n, what, &st);
            int ls = local_count(src), ld = local_count(dst);
            CHECK(st.plans_built == 1, "%s: %d plans built, expected 1", what, st.plans_built);
            /* pieces, the process's shards, and one pass over a replicated block's devices */
            uint64_t bound = 4 * st.plan_pieces + 4 * (uint64_t)(ls + ld) + 2 * (uint64_t)d + 16;
            CHECK(st.plan_steps <= bound,
                  "%s: %llu planning steps for %llu pieces (%d + %d local shards): more than %llu",
                  what, (unsigned long long)st.plan_steps, (unsigned long long)st.plan_pieces, ls,
                  ld, (unsigned long long)bound);
            if (kind == REVERSED) {
                /* each process moves only its own shards: the mesh's size does not matter */
                uint64_t own = 8 * (uint64_t)(ls > ld ? ls : ld) + 16;
                CHECK(st.plan_steps <= own,
                      "%s: %llu planning steps with %d local shards: more than %llu", what,
                      (unsigned long long)st.plan_steps, ls > ld ? ls : ld,
                      (unsigned long long)own);
            }
            uint64_t pieces = max_u64(st.plan_pieces), steps = max_u64(st.plan_steps);
            if (me == 0)
                printf("  %-40s %7d %9llu %9llu %9d\n", layout_text[kind], d,
                       (unsigned long long)pieces, (unsigned long long)steps, d * d);
            spmd_array_destroy(x);
            spmd_sharding_destroy(src);
            spmd_sharding_destroy(dst);
        }
    }
    fflush(stdout);
}

/* ---- cache: equal shardings share plans ---- */

static void test_cache(void **state)
{
    (void)state;
    static const char *const a[1] = {"a"}, *const z[1] = {"z"};
    int64_t n = 4 * ndev;
    int ids[SPMD_TEST_MAX_DEVICES], rev[SPMD_TEST_MAX_DEVICES];
    for (int i = 0; i < ndev; i++) {
        ids[i] = i;
        rev[i] = ndev - 1 - i;
    }
    spmd_mesh *m = mesh_of(1, &ndev, a, ids, ndev);
    spmd_sharding *src = sharding_of(m, "'a'"), *dst = sharding_of(m, "None, 'a'");
    spmd_array *x = make_array(src, n, SPMD_DTYPE_F32);
    spmd_reshard_stats st;
    reshard(x, dst, n, "first", &st);
    CHECK(st.plans_built == 1, "first call: %d plans built, expected 1", st.plans_built);
    uint64_t pieces = st.plan_pieces;
    reshard(x, dst, n, "repeated", &st);
    CHECK(st.plans_built == 0 && st.plan_steps == 0 && st.plan_pieces == pieces,
          "repeated call: %d plans built, %llu steps, %llu pieces (first: %llu)", st.plans_built,
          (unsigned long long)st.plan_steps, (unsigned long long)st.plan_pieces,
          (unsigned long long)pieces);

    /* equal shardings made anew: new mesh, new spec, other axis names, a trailing None */
    spmd_mesh *m2 = mesh_of(1, &ndev, a, ids, ndev), *mz = mesh_of(1, &ndev, z, ids, ndev);
    spmd_sharding *dst2 = sharding_of(m2, "None, 'a'"), *dstz = sharding_of(mz, "None, 'z'");
    spmd_sharding *src2 = sharding_of(m2, "'a', None");
    reshard(x, dst2, n, "fresh equal destination", &st);
    CHECK(st.plans_built == 0, "fresh equal destination: %d plans built, expected 0",
          st.plans_built);
    reshard(x, dstz, n, "equal destination, other axis name", &st);
    CHECK(st.plans_built == 0, "equal destination with another axis name: %d plans built",
          st.plans_built);
    spmd_array *x2 = make_array(src2, n, SPMD_DTYPE_F32);
    reshard(x2, dst, n, "fresh equal source (trailing None)", &st);
    CHECK(st.plans_built == 0, "fresh equal source: %d plans built, expected 0", st.plans_built);

    /* other dtypes through the same plan (their own MPI datatypes) */
    static const spmd_dtype dtypes[] = {SPMD_DTYPE_F64, SPMD_DTYPE_I32, SPMD_DTYPE_U8,
                                        SPMD_DTYPE_BF16, SPMD_DTYPE_F32};
    for (size_t t = 0; t < sizeof dtypes / sizeof *dtypes; t++) {
        /* i * N + j exact in the dtype: below 256 for uint8 and bfloat16 */
        int narrow = dtypes[t] == SPMD_DTYPE_U8 || dtypes[t] == SPMD_DTYPE_BF16;
        int64_t nt = narrow ? ndev : n;
        if (nt * nt > 256 && narrow)
            continue;
        spmd_array *xt = make_array(src2, nt, dtypes[t]);
        char what[64];
        snprintf(what, sizeof what, "dtype %s", spmd_dtype_name(dtypes[t]));
        reshard(xt, dst2, nt, what, &st);
        spmd_array_destroy(xt);
    }

    /* a batch whose arrays share one plan, in two dtypes */
    spmd_array *xb[3] = {x, x2, make_array(src, n, SPMD_DTYPE_F64)}, *yb[3] = {NULL, NULL, NULL};
    const spmd_sharding *tb[3] = {dst, dst2, dstz};
    spmd_reshard_options opts = SPMD_RESHARD_OPTIONS_INIT;
    opts.stats = &st;
    if (xb[2] && EXPECT_OK(spmd_reshard_batch(3, xb, tb, &opts, yb))) {
        CHECK(st.plans_built == 0, "batch of equal layouts: %d plans built", st.plans_built);
        for (int i = 0; i < 3; i++)
            check_values(yb[i], n, "batch sharing a plan");
    }
    for (int i = 0; i < 3; i++)
        spmd_array_destroy(yb[i]);
    spmd_array_destroy(xb[2]);

    /* another device order is another layout */
    spmd_mesh *mr = mesh_of(1, &ndev, a, rev, ndev);
    spmd_sharding *dstr = sharding_of(mr, "None, 'a'");
    reshard(x, dstr, n, "reversed destination", &st);
    CHECK(st.plans_built == (ndev > 1), "another device order: %d plans built, expected %d",
          st.plans_built, ndev > 1);

    /* a layout whose every sharding is gone takes its plans along */
    spmd_array_destroy(x);
    spmd_array_destroy(x2);
    spmd_sharding_destroy(src);
    spmd_sharding_destroy(src2);
    spmd_mesh *m3 = mesh_of(1, &ndev, a, ids, ndev);
    spmd_sharding *src3 = sharding_of(m3, "'a'");
    spmd_array *x3 = make_array(src3, n, SPMD_DTYPE_F32);
    reshard(x3, dst, n, "source layout made again", &st);
    CHECK(st.plans_built == 1,
          "a source layout made again after all its shardings died: %d "
          "plans built, expected 1",
          st.plans_built);
    spmd_array_destroy(x3);
    spmd_sharding_destroy(src3);
    spmd_sharding_destroy(dst);
    spmd_sharding_destroy(dst2);
    spmd_sharding_destroy(dstz);
    spmd_sharding_destroy(dstr);
    spmd_mesh_destroy(m);
    spmd_mesh_destroy(m2);
    spmd_mesh_destroy(mz);
    spmd_mesh_destroy(mr);
    spmd_mesh_destroy(m3);
}

/* ---- datatypes: made with the plan, not per call ---- */

static void test_datatypes(void **state)
{
    (void)state;
#ifdef SPMD_HAVE_MPI
    if (nproc < 2) {
        skip();
        return;
    }
    static const char *const a[1] = {"a"};
    int64_t n = 4 * ndev;
    spmd_mesh *m = mesh_of(1, &ndev, a, NULL, 0);
    spmd_sharding *src = sharding_of(m, "'a'"), *dst = sharding_of(m, "None, 'a'");
    spmd_array *x = make_array(src, n, SPMD_DTYPE_F32);
    spmd_reshard_stats st;
    long boxes0 = atomic_load(&boxes_made);
    reshard(x, dst, n, "first call", &st);
    long first_boxes = atomic_load(&boxes_made) - boxes0;
    uint64_t moved = (uint64_t)(st.messages_sent + st.messages_received);
    CHECK(st.plans_built == 1 && (uint64_t)first_boxes <= st.plan_pieces,
          "first call: %d plans, %ld box datatypes for %llu pieces", st.plans_built, first_boxes,
          (unsigned long long)st.plan_pieces);
    for (int call = 0; call < 3; call++) {
        long b0 = atomic_load(&boxes_made), s0 = atomic_load(&structs_made);
        reshard(x, dst, n, "repeated call", &st);
        long boxes = atomic_load(&boxes_made) - b0, structs = atomic_load(&structs_made) - s0;
        CHECK(boxes == 0, "repeated call %d made %ld box datatypes (expected none)", call, boxes);
        CHECK((uint64_t)structs <= moved,
              "repeated call %d made %ld message datatypes for %llu messages", call, structs,
              (unsigned long long)moved);
        if (me == 0 && call == 0)
            printf("# datatypes: first call %ld box types (%llu pieces); repeated call %ld box "
                   "types, %ld message types for %llu messages\n",
                   first_boxes, (unsigned long long)st.plan_pieces, boxes, structs,
                   (unsigned long long)moved);
    }
    spmd_array_destroy(x);
    spmd_sharding_destroy(src);
    spmd_sharding_destroy(dst);
    spmd_mesh_destroy(m);
#else
    skip();
#endif
}

int main(void)
{
    spmd_test_init();
    me = spmd_process_index();
    nproc = spmd_process_count();
    ndev = spmd_device_count();
    nlocal = ndev / nproc;
    if (ndev > SPMD_TEST_MAX_DEVICES) {
        fprintf(stderr, "test_reshard_plan: needs at most %d devices\n", SPMD_TEST_MAX_DEVICES);
        return spmd_test_finish(1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_work),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_datatypes),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failures + spmd_test_failed_checks());
}
