/* spmd_shard_map itself, in 1, 2 and 4 processes x 1, 2 and 4 CPU devices: what fn sees (its
 * rank-preserving block of every input, its device, its mesh, temporaries), how outputs are
 * assembled from out_specs (the (4,2) examples of the shard_map docs), the replication check,
 * argument validation, a failing fn, plans, donation and meshes over a subset of the devices.
 *
 * Every expected value is computed here from the global index and the sharding rule of
 * SEMANTICS.md (c)/(e), never read back from the library. fn runs concurrently on one worker
 * thread per local device, so the checks inside it only count failures (atomically) and make fn
 * return an error. Checks never jump out of a test: every process must keep issuing the same
 * collective calls in the same order, so a failed check is recorded and the test fails at its
 * end. */
#define _POSIX_C_SOURCE 200809L

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
#define MAX_IN 4

/* The run's geometry; global device ids are process-major. */
static int nproc, nlocal, me, ndev;

/* ---- non-fatal checks ------------------------------------------------------------------ */

static atomic_int nfail;

static void check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[process %d] %s:%d: check failed: %s: %s\n", me, file, line, cond, msg);
    fflush(stderr);
    atomic_fetch_add(&nfail, 1);
}

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
static int expect_status_impl(spmd_status got, spmd_status want, const char *expr, const char *file,
                              int line, ...)
{
    const char *msg = spmd_last_error();
    int ok = 1;
    if (got != want) {
        check_failed(file, line, expr, "returned %s, expected %s (message: %s)",
                     spmd_status_name(got), spmd_status_name(want), msg);
        return 0;
    }
    if (want == SPMD_OK)
        return 1;
    if (msg[0] == '\0') {
        check_failed(file, line, expr, "failed with %s but left no message", spmd_status_name(got));
        return 0;
    }
    va_list ap;
    va_start(ap, line);
    for (const char *frag = va_arg(ap, const char *); frag; frag = va_arg(ap, const char *))
        if (!strstr(msg, frag)) {
            check_failed(file, line, expr, "message lacks \"%s\": %s", frag, msg);
            ok = 0;
        }
    va_end(ap);
    return ok;
}

#define EXPECT_STATUS(expr, want, ...)                                                             \
    expect_status_impl((expr), (want), #expr, __FILE__, __LINE__, __VA_ARGS__, (char *)NULL)
#define EXPECT_OK(expr) EXPECT_STATUS(expr, SPMD_OK, "")

/* Fails the current cmocka test if any check failed since `before`. */
static void end_test(int before)
{
    int n = atomic_load(&nfail) - before;
    if (n)
        fail_msg("%d check(s) failed on process %d (see above)", n, me);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1 when every process passed the same value (always 1 in one process). */
static int same_on_all_processes(int v)
{
#ifdef SPMD_HAVE_MPI
    if (nproc > 1) {
        int lo = v, hi = v;
        MPI_Allreduce(&v, &lo, 1, MPI_INT, MPI_MIN, spmd_mpi_comm());
        MPI_Allreduce(&v, &hi, 1, MPI_INT, MPI_MAX, spmd_mpi_comm());
        return lo == hi;
    }
#endif
    (void)v;
    return 1;
}

static char sentinel_byte;
#define SENTINEL ((spmd_array *)(void *)&sentinel_byte)

/* ---- reference model: meshes, specs, blocks -------------------------------------------- */

typedef spmd_test_mesh rmesh;

static int owner(int device_id) { return device_id / nlocal; }

static void rmesh_fini(rmesh *m)
{
    spmd_mesh_destroy(m->mesh);
    m->mesh = NULL;
}

static void rmesh_coords(const rmesh *m, int flat, int *coords)
{
    for (int k = m->ndim - 1; k >= 0; k--) {
        coords[k] = flat % m->shape[k];
        flat /= m->shape[k];
    }
}

static int rmesh_flat_of(const rmesh *m, int device_id)
{
    for (int f = 0; f < m->size; f++)
        if (m->ids[f] == device_id)
            return f;
    return -1;
}

/* 1-D 'x' over every device, in id order. */
static void mesh_x(rmesh *m)
{
    const char *x[] = {"x"};
    spmd_test_mesh_build(m, NULL, 1, (int[]){ndev}, x, NULL);
}

/* (process_count, local_count) named ('p', 'l'). */
static void mesh_pl(rmesh *m)
{
    const char *pl[] = {"p", "l"};
    spmd_test_mesh_build(m, NULL, 2, (int[]){nproc, nlocal}, pl, NULL);
}

/* A spec as mesh axis indices, the major axis of each entry first. */
typedef struct rspec {
    int len;
    int naxes[SPMD_MAX_RANK];
    int axes[SPMD_MAX_RANK][MAX_TUPLE];
} rspec;

/* rs(2, "0", "") is P(axis 0, None); "10" is the tuple (axis 1, axis 0). */
static rspec rs(int len, ...)
{
    rspec s;
    memset(&s, 0, sizeof s);
    s.len = len;
    va_list ap;
    va_start(ap, len);
    for (int j = 0; j < len; j++) {
        const char *e = va_arg(ap, const char *);
        for (int k = 0; e[k]; k++)
            s.axes[j][s.naxes[j]++] = e[k] - '0';
    }
    va_end(ap);
    return s;
}

/* The Python spelling without the P(...) wrapper: "'p', None", "('p', 'l')". */
static void spec_text(const rmesh *m, const rspec *s, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int j = 0; j < s->len; j++) {
        n += (size_t)snprintf(buf + n, size - n, "%s", j ? ", " : "");
        if (s->naxes[j] == 0)
            n += (size_t)snprintf(buf + n, size - n, "None");
        if (s->naxes[j] > 1)
            n += (size_t)snprintf(buf + n, size - n, "(");
        for (int k = 0; k < s->naxes[j]; k++)
            n += (size_t)snprintf(buf + n, size - n, "%s'%s'", k ? ", " : "",
                                  m->names[s->axes[j][k]]);
        if (s->naxes[j] > 1)
            n += (size_t)snprintf(buf + n, size - n, ")");
    }
}

static spmd_spec *spec_make(const rmesh *m, const rspec *s)
{
    char text[256];
    spec_text(m, s, text, sizeof text);
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse(text, &spec));
    return spec;
}

static spmd_spec *spec_parse(const char *text)
{
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse(text, &spec));
    return spec;
}

static spmd_sharding *sharding_make(const rmesh *m, const rspec *s)
{
    spmd_spec *spec = spec_make(m, s);
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create(m->mesh, spec, &sh));
    spmd_spec_destroy(spec);
    return sh;
}

/* The block of device at mesh position `flat` (SEMANTICS.md (c)): start and extent per
 * dimension, and the block's number in the row-major grid of blocks. */
static int64_t ref_block(const rmesh *m, const rspec *s, int ndim, const int64_t *shape, int flat,
                         int64_t *start, int64_t *ext)
{
    int c[MAX_AXES];
    rmesh_coords(m, flat, c);
    int64_t key = 0;
    for (int j = 0; j < ndim; j++) {
        int64_t nb = 1, b = 0;
        for (int k = 0; j < s->len && k < s->naxes[j]; k++) {
            int a = s->axes[j][k];
            b = b * m->shape[a] + c[a];
            nb *= m->shape[a];
        }
        ext[j] = shape[j] / nb;
        start[j] = b * ext[j];
        key = key * nb + b;
    }
    return key;
}

/* This process's devices hold every distinct block (so a host fetch must succeed). */
static int ref_covers(const rmesh *m, const rspec *s, int ndim, const int64_t *shape)
{
    int held[MAX_DEV] = {0};
    int64_t start[SPMD_MAX_RANK], ext[SPMD_MAX_RANK];
    for (int i = 0; i < m->num_local; i++)
        held[ref_block(m, s, ndim, shape, m->local_flat[i], start, ext)] = 1;
    for (int f = 0; f < m->size; f++)
        if (!held[ref_block(m, s, ndim, shape, f, start, ext)])
            return 0;
    return 1;
}

static int64_t num_elems(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int j = 0; j < ndim; j++)
        n *= shape[j];
    return n;
}

/* Advances a row-major multi-index within `ext`; 0 after the last one. */
static int next_index(int ndim, const int64_t *ext, int64_t *idx)
{
    for (int j = ndim - 1; j >= 0; j--) {
        if (++idx[j] < ext[j])
            return 1;
        idx[j] = 0;
    }
    return 0;
}

static int64_t flat_index(int ndim, const int64_t *shape, const int64_t *idx)
{
    int64_t f = 0;
    for (int j = 0; j < ndim; j++)
        f = f * shape[j] + idx[j];
    return f;
}

static size_t dsize(spmd_dtype t) { return t == SPMD_DTYPE_F64 || t == SPMD_DTYPE_I64 ? 8 : 4; }

/* The global test data: element with row-major index g is seed + g (exact in every dtype). */
static double gval(int seed, int64_t g) { return (double)seed + (double)g; }

/* A host copy of the whole global array (identical on every process). */
static void *host_data(int ndim, const int64_t *shape, spmd_dtype t, int seed)
{
    int64_t n = num_elems(ndim, shape);
    void *p = malloc((size_t)n * dsize(t));
    assert_non_null(p);
    for (int64_t g = 0; g < n; g++)
        spmd_test_store(t, p, g, gval(seed, g));
    return p;
}

static spmd_array *make_input(const rmesh *m, const rspec *s, int ndim, const int64_t *shape,
                              spmd_dtype t, int seed)
{
    void *host = host_data(ndim, shape, t, seed);
    spmd_sharding *sh = sharding_make(m, s);
    spmd_array *a = NULL;
    assert_ok(spmd_device_put(host, ndim, shape, t, sh, &a));
    spmd_sharding_destroy(sh);
    free(host);
    return a;
}

/* Expected value of a global element of an output, from its global multi-index. */
typedef double (*expect_fn)(const int64_t *gidx, const void *user);

typedef struct seed_expect {
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int seed;
    double scale, offset; /* value = (seed + g) * scale + offset */
} seed_expect;

static double expect_seeded(const int64_t *gidx, const void *user)
{
    const seed_expect *e = user;
    return gval(e->seed, flat_index(e->ndim, e->shape, gidx)) * e->scale + e->offset;
}

static double expect_const(const int64_t *gidx, const void *user)
{
    (void)gidx;
    return *(const double *)user;
}

/*
 * Checks an output array against the reference: shape, dtype, spec, one shard per local mesh
 * device (in mesh flat order) with the right index box and data, and a host fetch that succeeds
 * exactly when this process's devices cover every block.
 */
static void verify_array(const spmd_array *a, const rmesh *m, const rspec *s, int ndim,
                         const int64_t *shape, spmd_dtype t, expect_fn expect, const void *user,
                         const char *what)
{
    CHECK(a != NULL, "%s: no array", what);
    if (!a)
        return;
    CHECK(spmd_array_ndim(a) == ndim, "%s: rank %d, expected %d", what, spmd_array_ndim(a), ndim);
    CHECK(spmd_array_dtype(a) == t, "%s: dtype %s, expected %s", what,
          spmd_dtype_name(spmd_array_dtype(a)), spmd_dtype_name(t));
    if (spmd_array_ndim(a) != ndim || spmd_array_dtype(a) != t)
        return;
    for (int j = 0; j < ndim; j++)
        CHECK(spmd_array_shape(a)[j] == shape[j], "%s: dimension %d is %lld, expected %lld", what,
              j, (long long)spmd_array_shape(a)[j], (long long)shape[j]);
    spmd_spec *want = spec_make(m, s);
    const spmd_sharding *sh = spmd_array_sharding(a);
    CHECK(sh && spmd_spec_is_equivalent(spmd_sharding_spec(sh), want),
          "%s: the array's spec is not the out_spec", what);
    CHECK(sh && spmd_mesh_equal(spmd_sharding_mesh(sh), m->mesh), "%s: the array's mesh differs",
          what);
    spmd_spec_destroy(want);

    CHECK(spmd_array_num_shards(a) == m->num_local, "%s: %d shards, expected %d", what,
          spmd_array_num_shards(a), m->num_local);
    int64_t start[SPMD_MAX_RANK], ext[SPMD_MAX_RANK], idx[SPMD_MAX_RANK], gidx[SPMD_MAX_RANK];
    for (int i = 0; i < m->num_local && i < spmd_array_num_shards(a); i++) {
        int f = m->local_flat[i];
        ref_block(m, s, ndim, shape, f, start, ext);
        spmd_shard shard;
        if (!EXPECT_OK(spmd_array_shard(a, i, &shard)))
            continue;
        CHECK(shard.device_id == m->ids[f], "%s: shard %d is on device %d, expected %d", what, i,
              shard.device_id, m->ids[f]);
        int box_ok = shard.index.ndim == ndim;
        for (int j = 0; box_ok && j < ndim; j++)
            box_ok = shard.index.start[j] == start[j] && shard.index.stop[j] == start[j] + ext[j];
        CHECK(box_ok, "%s: shard %d (device %d) has the wrong index box", what, i, m->ids[f]);
        int64_t n = num_elems(ndim, ext);
        void *buf = malloc((size_t)n * dsize(t));
        if (!EXPECT_OK(spmd_array_shard_to_host(a, i, buf, (size_t)n * dsize(t)))) {
            free(buf);
            continue;
        }
        int bad = 0;
        memset(idx, 0, sizeof idx);
        for (int64_t e = 0; e < n && bad < 3; e++, next_index(ndim, ext, idx)) {
            for (int j = 0; j < ndim; j++)
                gidx[j] = start[j] + idx[j];
            double want_v = expect(gidx, user), got = spmd_test_load(t, buf, e);
            if (got != want_v) {
                check_failed(__FILE__, __LINE__, "shard value",
                             "%s: device %d element %lld is %g, expected %g", what, m->ids[f],
                             (long long)e, got, want_v);
                bad++;
            }
        }
        free(buf);
    }

    int64_t n = num_elems(ndim, shape);
    void *host = malloc((size_t)n * dsize(t));
    spmd_status st = spmd_array_to_host(a, host, (size_t)n * dsize(t));
    if (ref_covers(m, s, ndim, shape)) {
        if (EXPECT_OK(st)) {
            int bad = 0;
            memset(idx, 0, sizeof idx);
            for (int64_t g = 0; g < n && bad < 3; g++, next_index(ndim, shape, idx)) {
                double want_v = expect(idx, user), got = spmd_test_load(t, host, g);
                if (got != want_v) {
                    check_failed(__FILE__, __LINE__, "host value",
                                 "%s: element %lld is %g, expected %g", what, (long long)g, got,
                                 want_v);
                    bad++;
                }
            }
        }
    } else {
        CHECK(st == SPMD_ERR_NOT_ADDRESSABLE,
              "%s: spmd_array_to_host of a partly addressable array returned %s", what,
              spmd_status_name(st));
    }
    free(host);
}

/* ---- 1. rank-preserving blocks --------------------------------------------------------- */

typedef struct in_ref {
    rspec spec;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    spmd_dtype dtype;
    int seed;
} in_ref;

typedef struct ident_job {
    const rmesh *m;
    int nin;
    in_ref in[MAX_IN];
    atomic_int calls[MAX_DEV]; /* per mesh position */
} ident_job;

/* Checks every input block against the reference, then copies it to the same output. */
static spmd_status fn_identity(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    ident_job *J = user;
    const rmesh *m = J->m;
    int bad = 0;
    int dev = spmd_ctx_device(ctx);
    int f = rmesh_flat_of(m, dev);
    FN_CHECK(f >= 0 && owner(dev) == me, "fn runs for device %d, not a local mesh device", dev);
    if (f < 0)
        return SPMD_ERR_INVALID_ARGUMENT;
    atomic_fetch_add(&J->calls[f], 1);
    FN_CHECK(nin == J->nin && nout == J->nin, "fn got nin=%d nout=%d, expected %d", nin, nout,
             J->nin);
    int c[MAX_AXES];
    rmesh_coords(m, f, c);
    for (int k = 0; k < m->ndim; k++) {
        int idx = -1, size = -1;
        FN_CHECK(spmd_axis_index(ctx, m->names[k], &idx) == SPMD_OK && idx == c[k],
                 "device %d: axis_index('%s') = %d, expected %d", dev, m->names[k], idx, c[k]);
        FN_CHECK(spmd_axis_size(ctx, m->names[k], &size) == SPMD_OK && size == m->shape[k],
                 "device %d: axis_size('%s') = %d, expected %d", dev, m->names[k], size,
                 m->shape[k]);
    }
    for (int i = 0; i < nin && i < J->nin; i++) {
        const in_ref *r = &J->in[i];
        int64_t start[SPMD_MAX_RANK], ext[SPMD_MAX_RANK], idx[SPMD_MAX_RANK] = {0};
        ref_block(m, &r->spec, r->ndim, r->shape, f, start, ext);
        int shape_ok = in[i].ndim == r->ndim && in[i].dtype == r->dtype && in[i].data != NULL;
        for (int j = 0; shape_ok && j < r->ndim; j++)
            shape_ok = in[i].shape[j] == ext[j];
        FN_CHECK(shape_ok, "device %d: input %d block has rank %d, dtype %s or a wrong shape", dev,
                 i, in[i].ndim, spmd_dtype_name(in[i].dtype));
        if (!shape_ok)
            continue;
        int64_t n = num_elems(r->ndim, ext), wrong = 0;
        for (int64_t e = 0; e < n; e++, next_index(r->ndim, ext, idx)) {
            int64_t gidx[SPMD_MAX_RANK];
            for (int j = 0; j < r->ndim; j++)
                gidx[j] = start[j] + idx[j];
            double want = gval(r->seed, flat_index(r->ndim, r->shape, gidx));
            if (spmd_test_load(r->dtype, in[i].data, e) != want)
                wrong++;
        }
        FN_CHECK(wrong == 0, "device %d: %lld elements of input %d are wrong", dev,
                 (long long)wrong, i);
        if (i < nout && out[i].ndim == in[i].ndim && out[i].dtype == in[i].dtype)
            memcpy(out[i].data, in[i].data, (size_t)n * dsize(r->dtype));
    }
    return bad ? SPMD_ERR_INVALID_ARGUMENT : SPMD_OK;
}

/* One shard_map over `m` with the given inputs, out_specs = in_specs: checks what fn saw, that
 * it ran once per local device, and the reassembled outputs. */
static void run_identity(const rmesh *m, int nin, const in_ref *refs, const char *what)
{
    ident_job *J = calloc(1, sizeof *J);
    assert_non_null(J);
    J->m = m;
    J->nin = nin;
    spmd_array *in[MAX_IN] = {0}, *out[MAX_IN] = {0};
    spmd_spec *specs[MAX_IN] = {0};
    spmd_out_desc descs[MAX_IN];
    for (int i = 0; i < nin; i++) {
        J->in[i] = refs[i];
        in[i] =
            make_input(m, &refs[i].spec, refs[i].ndim, refs[i].shape, refs[i].dtype, refs[i].seed);
        specs[i] = spec_make(m, &refs[i].spec);
        memset(&descs[i], 0, sizeof descs[i]);
        descs[i].ndim = refs[i].ndim;
        descs[i].dtype = refs[i].dtype;
        memcpy(descs[i].shape, refs[i].shape, sizeof descs[i].shape);
    }
    spmd_status st =
        spmd_shard_map(m->mesh, fn_identity, J, nin, in, (const spmd_spec *const *)specs, nin,
                       descs, (const spmd_spec *const *)specs, NULL, out);
    if (!EXPECT_OK(st))
        fprintf(stderr, "  (case: %s)\n", what);
    for (int f = 0; f < m->size; f++) {
        int local = owner(m->ids[f]) == me;
        CHECK(atomic_load(&J->calls[f]) == local, "%s: fn ran %d times for device %d", what,
              atomic_load(&J->calls[f]), m->ids[f]);
    }
    for (int i = 0; i < nin; i++) {
        if (st == SPMD_OK) {
            seed_expect e = {refs[i].ndim, {0}, refs[i].seed, 1.0, 0.0};
            memcpy(e.shape, refs[i].shape, sizeof e.shape);
            char label[300];
            snprintf(label, sizeof label, "%s, output %d", what, i);
            verify_array(out[i], m, &refs[i].spec, refs[i].ndim, refs[i].shape, refs[i].dtype,
                         expect_seeded, &e, label);
        }
        spmd_array_destroy(in[i]);
        spmd_array_destroy(out[i]);
        spmd_spec_destroy(specs[i]);
    }
    free(J);
}

static in_ref ref_of(rspec s, spmd_dtype t, int seed, int ndim, ...)
{
    in_ref r;
    memset(&r, 0, sizeof r);
    r.spec = s;
    r.dtype = t;
    r.seed = seed;
    r.ndim = ndim;
    va_list ap;
    va_start(ap, ndim);
    for (int j = 0; j < ndim; j++)
        r.shape[j] = va_arg(ap, int);
    va_end(ap);
    return r;
}

static void test_blocks(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    rmesh x, pl, rev;
    mesh_x(&x);
    mesh_pl(&pl);
    int ids[MAX_DEV];
    for (int d = 0; d < ndev; d++)
        ids[d] = ndev - 1 - d;
    const char *xn[] = {"x"};
    spmd_test_mesh_build(&rev, NULL, 1, (int[]){ndev}, xn, ids);

    in_ref r;
    r = ref_of(rs(1, "0"), SPMD_DTYPE_F32, 1, 2, 2 * ndev, 3);
    run_identity(&x, 1, &r, "mesh x, P('x'), (2n, 3) float32");
    r = ref_of(rs(2, "", "0"), SPMD_DTYPE_I32, 5, 2, 3, 2 * ndev);
    run_identity(&x, 1, &r, "mesh x, P(None, 'x'), (3, 2n) int32");
    r = ref_of(rs(0), SPMD_DTYPE_F32, 7, 2, 5, 3);
    run_identity(&x, 1, &r, "mesh x, P(), (5, 3) float32: every device sees the whole array");
    r = ref_of(rs(0), SPMD_DTYPE_F64, 2, 0);
    run_identity(&x, 1, &r, "mesh x, P(), a scalar");
    r = ref_of(rs(2, "0", "1"), SPMD_DTYPE_F64, 3, 2, 2 * nproc, 3 * nlocal);
    run_identity(&pl, 1, &r, "mesh (p, l), P('p', 'l'), float64");
    r = ref_of(rs(1, "01"), SPMD_DTYPE_F32, 4, 2, 2 * ndev, 2);
    run_identity(&pl, 1, &r, "mesh (p, l), P(('p', 'l'))");
    r = ref_of(rs(2, "10", ""), SPMD_DTYPE_I64, 6, 3, ndev, 3, 2);
    run_identity(&pl, 1, &r, "mesh (p, l), P(('l', 'p'), None), 3-D int64");
    r = ref_of(rs(2, "", "1"), SPMD_DTYPE_F32, 8, 2, 3, 2 * nlocal);
    run_identity(&pl, 1, &r, "mesh (p, l), P(None, 'l'): replicated over 'p'");
    r = ref_of(rs(1, "0"), SPMD_DTYPE_F32, 9, 2, ndev, 2);
    run_identity(&rev, 1, &r, "mesh x over the devices in reverse order, P('x')");

    in_ref many[3] = {ref_of(rs(1, "0"), SPMD_DTYPE_F32, 10, 2, 2 * ndev, 2),
                      ref_of(rs(0), SPMD_DTYPE_I32, 20, 1, 3),
                      ref_of(rs(2, "", "0"), SPMD_DTYPE_F64, 30, 2, 2, ndev)};
    run_identity(&x, 3, many, "mesh x, three inputs P('x'), P(), P(None, 'x')");

    rmesh_fini(&x);
    rmesh_fini(&pl);
    rmesh_fini(&rev);
    end_test(before);
}

/* ---- 2. output assembly ---------------------------------------------------------------- */

static spmd_status fn_fill3(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin;
    (void)in;
    (void)user;
    int bad = 0;
    FN_CHECK(nout == 1 && out[0].ndim == 2 && out[0].shape[0] == 1 && out[0].shape[1] == 1,
             "the output block is not (1, 1)%s", "");
    if (bad)
        return SPMD_ERR_INVALID_ARGUMENT;
    return spmd_op_fill(ctx, &out[0], 3.0);
}

typedef struct psum_job {
    const char *axes;
    int64_t block[2];
} psum_job;

static spmd_status fn_psum(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                           void *user)
{
    const psum_job *J = user;
    int bad = 0;
    FN_CHECK(nin == 1 && nout == 1, "nin=%d nout=%d", nin, nout);
    FN_CHECK(in[0].ndim == 2 && in[0].shape[0] == J->block[0] && in[0].shape[1] == J->block[1],
             "input block is (%lld, %lld), expected (%lld, %lld)", (long long)in[0].shape[0],
             (long long)in[0].shape[1], (long long)J->block[0], (long long)J->block[1]);
    if (bad)
        return SPMD_ERR_INVALID_ARGUMENT;
    return spmd_psum(ctx, &in[0], &out[0], J->axes);
}

/* x = arange(3A * 6B).reshape(3A, 6B) on an (A, B) mesh: x[r][c] = r * 6B + c. */
typedef struct sum_expect {
    int A, B;
    int over; /* 1: sum over axis 1 (the 'j' blocks); 2: over axis 0; 3: over both */
} sum_expect;

static double expect_sum(const int64_t *gidx, const void *user)
{
    const sum_expect *e = user;
    int64_t cols = 6 * e->B;
    double s = 0;
    for (int i = 0; i < e->A; i++)
        for (int j = 0; j < e->B; j++) {
            int64_t r = gidx[0], c = gidx[1];
            if (e->over == 1 && i > 0)
                continue;
            if (e->over == 2 && j > 0)
                continue;
            if (e->over & 2)
                r = i * 3 + gidx[0];
            if (e->over & 1)
                c = j * 6 + gidx[1];
            s += (double)(r * cols + c);
        }
    return s;
}

/* The shard_map docs' output examples on a 2-D mesh (A, B) named (a0, a1). */
static void run_assembly(const rmesh *m)
{
    int A = m->shape[0], B = m->shape[1];
    char what[128];
    double three = 3.0;
    struct {
        rspec spec;
        int64_t shape[2];
    } fills[4] = {{rs(2, "0", "1"), {A, B}},
                  {rs(2, "0", ""), {A, 1}},
                  {rs(2, "", ""), {1, 1}},
                  {rs(0), {1, 1}}};
    for (int c = 0; c < 4; c++) {
        spmd_spec *os = spec_make(m, &fills[c].spec);
        spmd_out_desc d = {2, {fills[c].shape[0], fills[c].shape[1]}, SPMD_DTYPE_F32};
        spmd_array *out = SENTINEL;
        char text[64];
        spec_text(m, &fills[c].spec, text, sizeof text);
        snprintf(what, sizeof what, "mesh (%d, %d), [[3.]] with out_specs P(%s)", A, B, text);
        if (EXPECT_OK(spmd_shard_map(m->mesh, fn_fill3, NULL, 0, NULL, NULL, 1, &d,
                                     (const spmd_spec *const *)&os, NULL, &out)))
            verify_array(out, m, &fills[c].spec, 2, fills[c].shape, SPMD_DTYPE_F32, expect_const,
                         &three, what);
        else
            CHECK(out == NULL, "%s: failed but left an output", what);
        spmd_array_destroy(out);
        spmd_spec_destroy(os);
    }

    rspec xs = rs(2, "0", "1");
    int64_t xshape[2] = {3 * A, 6 * B};
    spmd_array *x = make_input(m, &xs, 2, xshape, SPMD_DTYPE_F32, 0);
    spmd_spec *is = spec_make(m, &xs);
    char axes_both[16];
    snprintf(axes_both, sizeof axes_both, "%s,%s", m->names[0], m->names[1]);
    struct {
        const char *axes;
        rspec spec;
        int64_t shape[2];
        int over;
    } sums[3] = {{m->names[1], rs(2, "0", ""), {3 * A, 6}, 1},
                 {m->names[0], rs(2, "", "1"), {3, 6 * B}, 2},
                 {axes_both, rs(0), {3, 6}, 3}};
    for (int c = 0; c < 3; c++) {
        psum_job job = {sums[c].axes, {3, 6}};
        spmd_spec *os = spec_make(m, &sums[c].spec);
        spmd_out_desc d = {2, {sums[c].shape[0], sums[c].shape[1]}, SPMD_DTYPE_F32};
        spmd_array *out = SENTINEL;
        char text[64];
        spec_text(m, &sums[c].spec, text, sizeof text);
        snprintf(what, sizeof what, "mesh (%d, %d), x (%d, %d), psum over '%s', out P(%s)", A, B,
                 3 * A, 6 * B, sums[c].axes, text);
        sum_expect e = {A, B, sums[c].over};
        if (EXPECT_OK(spmd_shard_map(m->mesh, fn_psum, &job, 1, &x, (const spmd_spec *const *)&is,
                                     1, &d, (const spmd_spec *const *)&os, NULL, &out)))
            verify_array(out, m, &sums[c].spec, 2, sums[c].shape, SPMD_DTYPE_F32, expect_sum, &e,
                         what);
        else
            CHECK(out == NULL, "%s: failed but left an output", what);
        spmd_array_destroy(out);
        spmd_spec_destroy(os);
    }
    spmd_spec_destroy(is);
    spmd_array_destroy(x);
}

static void test_output_assembly(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    /* The docs' (4, 2) mesh ('i', 'j'), over the first 8 devices when the run has 8 or more;
     * processes without any of them must not call. */
    if (ndev >= 8) {
        rmesh m;
        const char *ij[] = {"i", "j"};
        int ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        spmd_test_mesh_build(&m, NULL, 2, (int[]){4, 2}, ij, ndev == 8 ? NULL : ids);
        if (m.num_local > 0)
            run_assembly(&m);
        rmesh_fini(&m);
    } else {
        print_message("(4, 2) mesh examples skipped: the run has %d devices, not 8\n", ndev);
    }
    /* The same examples on the (process, local) mesh of every run. */
    rmesh pl;
    mesh_pl(&pl);
    run_assembly(&pl);
    rmesh_fini(&pl);
    end_test(before);
}

/* ---- 3. the replication check ---------------------------------------------------------- */

/* out[0] (any shape, int32) = axis_index(user axes). */
static spmd_status fn_axis_index(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                 spmd_block *out, void *user)
{
    (void)nin;
    (void)in;
    (void)nout;
    int idx = -1;
    spmd_status st = spmd_axis_index(ctx, (const char *)user, &idx);
    if (st != SPMD_OK)
        return st;
    return spmd_op_fill(ctx, &out[0], (double)idx);
}

/* out[0] and out[1] = axis_index('x'). */
static spmd_status fn_axis_index2(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                  spmd_block *out, void *user)
{
    (void)nin;
    (void)in;
    (void)user;
    int idx = -1;
    spmd_status st = spmd_axis_index(ctx, "x", &idx);
    for (int j = 0; j < nout && st == SPMD_OK; j++)
        st = spmd_op_fill(ctx, &out[j], (double)idx);
    return st;
}

/* shard_map of fn_axis_index(axis) into an int32 output of `shape` with out_spec `os`. */
static spmd_status run_axis_index(const rmesh *m, const char *axis, const rspec *os, int ndim,
                                  const int64_t *shape, const spmd_shard_map_options *opts,
                                  spmd_array **out)
{
    spmd_spec *spec = spec_make(m, os);
    spmd_out_desc d = {ndim, {0}, SPMD_DTYPE_I32};
    for (int j = 0; j < ndim; j++)
        d.shape[j] = shape[j];
    *out = SENTINEL;
    spmd_status st = spmd_shard_map(m->mesh, fn_axis_index, (void *)axis, 0, NULL, NULL, 1, &d,
                                    (const spmd_spec *const *)&spec, opts, out);
    spmd_spec_destroy(spec);
    return st;
}

static double expect_coord0(const int64_t *gidx, const void *user)
{
    (void)user;
    return (double)gidx[0];
}

static void test_replication_check(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    rmesh x, pl;
    mesh_x(&x);
    mesh_pl(&pl);
    spmd_array *out = NULL;
    rspec none = rs(0);
    spmd_shard_map_options off = SPMD_SHARD_MAP_OPTIONS_INIT;
    off.check_replication = 0;
    spmd_shard_map_options on;
    assert_ok(spmd_shard_map_options_init(&on, SPMD_SHARD_MAP_OPTIONS_VERSION));
    CHECK(on.check_replication == 1 && on.donate == NULL && on.version == 1,
          "spmd_shard_map_options_init gave check_replication=%d", on.check_replication);

    /* axis_index('x') into P(): varies along 'x' whenever the mesh has more than one device. */
    const spmd_shard_map_options *variants[2] = {NULL, &on};
    for (int v = 0; v < 2; v++) {
        spmd_status st = run_axis_index(&x, "x", &none, 0, NULL, variants[v], &out);
        if (ndev > 1) {
            EXPECT_STATUS(st, SPMD_ERR_SPEC, "output 0", "'x'", "psum", "out_specs");
            CHECK(out == NULL, "a failed replication check left out_arrays[0] = %p", (void *)out);
        } else {
            int32_t value = -1;
            if (EXPECT_OK(st))
                EXPECT_OK(spmd_array_to_host(out, &value, sizeof value));
            CHECK(value == 0, "one device: axis_index('x') is %d", value);
        }
        CHECK(same_on_all_processes((int)st), "processes disagree on the status (%s here)",
              spmd_status_name(st));
        if (out != SENTINEL)
            spmd_array_destroy(out);
    }

    /* check_replication = 0: trusted; a host fetch reads the first local device's replica. */
    {
        spmd_status st = run_axis_index(&x, "x", &none, 0, NULL, &off, &out);
        int32_t value = -1;
        if (EXPECT_OK(st) && EXPECT_OK(spmd_array_to_host(out, &value, sizeof value)))
            CHECK(value == me * nlocal, "unchecked P() output reads %d here, expected %d", value,
                  me * nlocal);
        if (out != SENTINEL)
            spmd_array_destroy(out);
    }

    /* On (p, l): varies along 'l' only, out P('p'): fails iff 'l' has more than one device. */
    {
        rspec p = rs(1, "0");
        int64_t shape[1] = {nproc};
        spmd_status st = run_axis_index(&pl, "l", &p, 1, shape, NULL, &out);
        if (nlocal > 1) {
            EXPECT_STATUS(st, SPMD_ERR_SPEC, "output 0", "'l'", "psum", "out_specs");
            CHECK(out == NULL, "failed check left an output%s", "");
        } else if (EXPECT_OK(st)) {
            double zero = 0;
            verify_array(out, &pl, &p, 1, shape, SPMD_DTYPE_I32, expect_const, &zero,
                         "axis_index('l') with one local device, out P('p')");
        }
        if (out != SENTINEL)
            spmd_array_destroy(out);
    }
    /* Varies along 'p' only (across processes), out P('l'): fails iff several processes. */
    {
        rspec l = rs(1, "1");
        int64_t shape[1] = {nlocal};
        spmd_status st = run_axis_index(&pl, "p", &l, 1, shape, NULL, &out);
        if (nproc > 1) {
            EXPECT_STATUS(st, SPMD_ERR_SPEC, "output 0", "'p'", "psum", "out_specs");
            CHECK(out == NULL, "failed check left an output%s", "");
        } else if (EXPECT_OK(st)) {
            double zero = 0;
            verify_array(out, &pl, &l, 1, shape, SPMD_DTYPE_I32, expect_const, &zero,
                         "axis_index('p') in one process, out P('l')");
        }
        CHECK(same_on_all_processes((int)st), "processes disagree on the status (%s here)",
              spmd_status_name(st));
        if (out != SENTINEL)
            spmd_array_destroy(out);
    }
    /* Varies along 'p' and out names 'p': a legitimate varying output. */
    {
        rspec p = rs(1, "0");
        int64_t shape[1] = {nproc};
        if (EXPECT_OK(run_axis_index(&pl, "p", &p, 1, shape, NULL, &out)))
            verify_array(out, &pl, &p, 1, shape, SPMD_DTYPE_I32, expect_coord0, NULL,
                         "axis_index('p') with out P('p')");
        if (out != SENTINEL)
            spmd_array_destroy(out);
    }
    /* The second of two outputs is the false one: the message names output 1, and the first,
     * valid, output is not returned either. */
    if (ndev > 1) {
        spmd_spec *sx = spec_parse("'x'"), *sn = spec_parse("");
        const spmd_spec *os[2] = {sx, sn};
        spmd_out_desc d[2] = {{1, {ndev}, SPMD_DTYPE_I32}, {1, {1}, SPMD_DTYPE_I32}};
        spmd_array *outs[2] = {SENTINEL, SENTINEL};
        EXPECT_STATUS(
            spmd_shard_map(x.mesh, fn_axis_index2, NULL, 0, NULL, NULL, 2, d, os, NULL, outs),
            SPMD_ERR_SPEC, "output 1", "out_specs[1]", "'x'");
        CHECK(outs[0] == NULL && outs[1] == NULL, "failed check left outputs %p %p",
              (void *)outs[0], (void *)outs[1]);
        spmd_spec_destroy(sx);
        spmd_spec_destroy(sn);
    }
    rmesh_fini(&x);
    rmesh_fini(&pl);
    end_test(before);
}

/* ---- 4. validation --------------------------------------------------------------------- */

static spmd_status fn_copy_all(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)user;
    for (int j = 0; j < nout; j++) {
        spmd_status st =
            j < nin ? spmd_op_copy(ctx, &in[j], &out[j]) : spmd_op_fill(ctx, &out[j], 0);
        if (st != SPMD_OK)
            return st;
    }
    return SPMD_OK;
}

/* One call expected to fail validation: `status` and fragments, no output. */
#define BAD_CALL(mesh, fn, nin, in, is, nout, d, os, opts, status, ...)                            \
    do {                                                                                           \
        spmd_array *o_[2] = {SENTINEL, SENTINEL};                                                  \
        double t0_ = now_s();                                                                      \
        EXPECT_STATUS(                                                                             \
            spmd_shard_map((mesh), (fn), NULL, (nin), (in), (is), (nout), (d), (os), (opts), o_),  \
            (status), __VA_ARGS__);                                                                \
        CHECK(now_s() - t0_ < 5.0, "validation took %.1f s", now_s() - t0_);                       \
        for (int j_ = 0; j_ < (nout) && j_ < 2; j_++)                                              \
            CHECK(o_[j_] == NULL, "a failed call left out_arrays[%d] = %p", j_, (void *)o_[j_]);   \
    } while (0)

static void test_validation(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    rmesh x, pl;
    mesh_x(&x);
    mesh_pl(&pl);
    rspec sx = rs(1, "0");
    spmd_array *a = make_input(&x, &sx, 1, (int64_t[]){2 * ndev}, SPMD_DTYPE_F32, 0);
    spmd_spec *px = spec_parse("'x'"), *pnone = spec_parse(""), *pz = spec_parse("'z'");
    spmd_spec *pxx = spec_parse("'x', None"), *pnx = spec_parse("None, 'x'");
    const spmd_spec *is_x[1] = {px}, *is_none[1] = {pnone}, *is_z[1] = {pz}, *is_xx[1] = {pxx};
    const spmd_spec *is_nx[1] = {pnx}, *is_null[1] = {NULL};
    spmd_out_desc d_block = {1, {2 * ndev}, SPMD_DTYPE_F32};
    spmd_out_desc d_scalar = {0, {0}, SPMD_DTYPE_F32};
    spmd_array *in1[1] = {a}, *in_null[1] = {NULL};

    /* NULLs and counts */
    BAD_CALL(NULL, fn_copy_all, 1, in1, is_x, 1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "mesh");
    BAD_CALL(x.mesh, NULL, 1, in1, is_x, 1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT, "fn");
    EXPECT_STATUS(
        spmd_shard_map(x.mesh, fn_copy_all, NULL, 1, in1, is_x, 1, &d_block, is_x, NULL, NULL),
        SPMD_ERR_INVALID_ARGUMENT, "out_arrays");
    BAD_CALL(x.mesh, fn_copy_all, 1, NULL, is_x, 1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "in_arrays");
    BAD_CALL(x.mesh, fn_copy_all, 1, in_null, is_x, 1, &d_block, is_x, NULL,
             SPMD_ERR_INVALID_ARGUMENT, "in_arrays[0]");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, NULL, 1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "in_specs");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, NULL, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "out_descs");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_block, NULL, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "out_specs");
    BAD_CALL(x.mesh, fn_copy_all, -1, in1, is_x, 1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "nin");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, -1, &d_block, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "nout");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_null, 1, &d_block, is_x, NULL,
             SPMD_ERR_INVALID_ARGUMENT, "in_specs[0]");

    /* options */
    spmd_shard_map_options bad_version = SPMD_SHARD_MAP_OPTIONS_INIT;
    bad_version.version = 99;
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_block, is_x, &bad_version,
             SPMD_ERR_INVALID_ARGUMENT, "version");
    spmd_shard_map_options o;
    EXPECT_STATUS(spmd_shard_map_options_init(&o, 99), SPMD_ERR_INVALID_ARGUMENT, "version");
    EXPECT_STATUS(spmd_shard_map_options_init(NULL, SPMD_SHARD_MAP_OPTIONS_VERSION),
                  SPMD_ERR_INVALID_ARGUMENT, "NULL");

    /* specs */
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_z, 1, &d_block, is_x, NULL, SPMD_ERR_SPEC,
             "in_specs[0]", "z");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_block, is_z, NULL, SPMD_ERR_SPEC,
             "out_specs[0]", "z");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_xx, 1, &d_block, is_x, NULL, SPMD_ERR_SHAPE, "input 0",
             "rank");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_scalar, is_x, NULL, SPMD_ERR_SHAPE,
             "output 0", "rank");
    spmd_out_desc d_neg = {-1, {0}, SPMD_DTYPE_F32}, d_dtype = {1, {2 * ndev}, SPMD_DTYPE_COUNT};
    spmd_out_desc d_zero = {1, {0}, SPMD_DTYPE_F32};
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_neg, is_x, NULL, SPMD_ERR_SHAPE, "out");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_dtype, is_x, NULL, SPMD_ERR_INVALID_ARGUMENT,
             "dtype");
    BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_zero, is_none, NULL, SPMD_ERR_SHAPE,
             "output 0");

    /* divisibility: needs an axis of more than one device */
    if (ndev > 1) {
        rspec rep = rs(0);
        int64_t odd[2] = {2 * ndev + 1, 2};
        spmd_array *b = make_input(&x, &rep, 2, odd, SPMD_DTYPE_F32, 0);
        spmd_array *inb[1] = {b};
        spmd_out_desc d_odd = {2, {2 * ndev + 1, 2}, SPMD_DTYPE_F32};
        char size_text[32];
        snprintf(size_text, sizeof size_text, "%d", 2 * ndev + 1);
        BAD_CALL(x.mesh, fn_copy_all, 1, inb, is_x, 1, &d_odd, is_none, NULL, SPMD_ERR_SHAPE,
                 "input 0", size_text);
        spmd_out_desc d_odd_out = {1, {ndev + 1}, SPMD_DTYPE_F32};
        snprintf(size_text, sizeof size_text, "%d", ndev + 1);
        BAD_CALL(x.mesh, fn_copy_all, 1, in1, is_x, 1, &d_odd_out, is_x, NULL, SPMD_ERR_SHAPE,
                 "output 0", size_text);
        spmd_array_destroy(b);
    }

    /* an input laid out differently from its in_spec on this mesh */
    if (ndev > 1) {
        rspec s2 = rs(1, "0");
        int64_t sq[2] = {2 * ndev, 2 * ndev};
        spmd_array *b = make_input(&x, &s2, 2, sq, SPMD_DTYPE_F32, 0);
        spmd_array *inb[1] = {b};
        spmd_out_desc d_sq = {2, {2 * ndev, 2 * ndev}, SPMD_DTYPE_F32};
        BAD_CALL(x.mesh, fn_copy_all, 1, inb, is_nx, 1, &d_sq, is_nx, NULL,
                 SPMD_ERR_INCOMPATIBLE_DEVICES, "input 0", "P('x',)", "P(None, 'x')", "devices",
                 "reshard");
        /* replicated input passed as sharded */
        rspec rep = rs(0);
        spmd_array *r = make_input(&x, &rep, 1, (int64_t[]){2 * ndev}, SPMD_DTYPE_F32, 0);
        spmd_array *inr[1] = {r};
        BAD_CALL(x.mesh, fn_copy_all, 1, inr, is_x, 1, &d_block, is_x, NULL,
                 SPMD_ERR_INCOMPATIBLE_DEVICES, "input 0", "reshard");
        spmd_array_destroy(r);
        spmd_array_destroy(b);

        /* the same spec on a mesh over the devices in another order */
        rmesh rev;
        int ids[MAX_DEV];
        for (int d = 0; d < ndev; d++)
            ids[d] = ndev - 1 - d;
        const char *xn[] = {"x"};
        spmd_test_mesh_build(&rev, NULL, 1, (int[]){ndev}, xn, ids);
        spmd_array *c = make_input(&rev, &sx, 1, (int64_t[]){2 * ndev}, SPMD_DTYPE_F32, 0);
        spmd_array *inc[1] = {c};
        BAD_CALL(x.mesh, fn_copy_all, 1, inc, is_x, 1, &d_block, is_x, NULL,
                 SPMD_ERR_INCOMPATIBLE_DEVICES, "input 0", "devices", "reshard");
        spmd_array_destroy(c);
        rmesh_fini(&rev);

        /* an array on a mesh of device 0 alone */
        rmesh one;
        spmd_test_mesh_build(&one, NULL, 1, (int[]){1}, xn, (int[]){0});
        rspec rep1 = rs(0);
        spmd_array *e = make_input(&one, &rep1, 1, (int64_t[]){2 * ndev}, SPMD_DTYPE_F32, 0);
        spmd_array *ine[1] = {e};
        BAD_CALL(x.mesh, fn_copy_all, 1, ine, is_none, 1, &d_block, is_none, NULL,
                 SPMD_ERR_INCOMPATIBLE_DEVICES, "input 0", "devices", "reshard");
        spmd_array_destroy(e);
        rmesh_fini(&one);
    }

    /* Equivalent layouts are accepted with no resharding: P(('p', 'l')) on the (p, l) mesh is
     * P('x') on x, and P('x', None) is P('x') spelled with a trailing None. */
    {
        rspec spl = rs(1, "01");
        spmd_array *b = make_input(&pl, &spl, 1, (int64_t[]){2 * ndev}, SPMD_DTYPE_F32, 4);
        spmd_array *inb[1] = {b}, *out = SENTINEL;
        if (EXPECT_OK(spmd_shard_map(x.mesh, fn_copy_all, NULL, 1, inb, is_x, 1, &d_block, is_x,
                                     NULL, &out))) {
            seed_expect e = {1, {2 * ndev}, 4, 1.0, 0.0};
            verify_array(out, &x, &sx, 1, e.shape, SPMD_DTYPE_F32, expect_seeded, &e,
                         "input from an equivalent sharding on another mesh");
            spmd_array_destroy(out);
        }
        spmd_array_destroy(b);

        rspec s2 = rs(1, "0");
        int64_t shp[2] = {2 * ndev, 3};
        spmd_array *c = make_input(&x, &s2, 2, shp, SPMD_DTYPE_I32, 5);
        spmd_array *inc[1] = {c};
        spmd_out_desc d2 = {2, {2 * ndev, 3}, SPMD_DTYPE_I32};
        out = SENTINEL;
        if (EXPECT_OK(spmd_shard_map(x.mesh, fn_copy_all, NULL, 1, inc, is_xx, 1, &d2, is_x, NULL,
                                     &out))) {
            seed_expect e = {2, {2 * ndev, 3}, 5, 1.0, 0.0};
            verify_array(out, &x, &s2, 2, shp, SPMD_DTYPE_I32, expect_seeded, &e,
                         "P('x') input passed with in_spec P('x', None)");
            spmd_array_destroy(out);
        }
        spmd_array_destroy(c);
    }

    /* plans validate the same way */
    {
        spmd_plan *plan = (spmd_plan *)(void *)&sentinel_byte;
        spmd_in_desc di = {1, {2 * ndev}, SPMD_DTYPE_F32};
        EXPECT_STATUS(spmd_plan_create(x.mesh, fn_copy_all, NULL, 1, &di, is_z, 1, &d_block, is_x,
                                       NULL, &plan),
                      SPMD_ERR_SPEC, "z");
        CHECK(plan == NULL, "a failed spmd_plan_create left *out = %p", (void *)plan);
        plan = (spmd_plan *)(void *)&sentinel_byte;
        EXPECT_STATUS(
            spmd_plan_create(x.mesh, NULL, NULL, 1, &di, is_x, 1, &d_block, is_x, NULL, &plan),
            SPMD_ERR_INVALID_ARGUMENT, "fn");
        CHECK(plan == NULL, "a failed spmd_plan_create left *out = %p", (void *)plan);
        EXPECT_STATUS(spmd_plan_create(x.mesh, fn_copy_all, NULL, 1, &di, is_x, 1, &d_block, is_x,
                                       NULL, NULL),
                      SPMD_ERR_INVALID_ARGUMENT, "out");
        spmd_array *out = NULL;
        EXPECT_STATUS(spmd_plan_execute(NULL, in1, &out), SPMD_ERR_INVALID_ARGUMENT, "plan");
        spmd_plan_destroy(NULL);
    }

    spmd_spec_destroy(px);
    spmd_spec_destroy(pnone);
    spmd_spec_destroy(pz);
    spmd_spec_destroy(pxx);
    spmd_spec_destroy(pnx);
    spmd_array_destroy(a);
    rmesh_fini(&x);
    rmesh_fini(&pl);
    end_test(before);
}

/* ---- 5. fn failing on one device ------------------------------------------------------- */

typedef struct fail_job {
    int device; /* the device whose fn fails */
    spmd_status status;
    int collective; /* the others psum over every axis */
} fail_job;

static spmd_status fn_fail_one(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin;
    (void)in;
    (void)nout;
    const fail_job *J = user;
    if (spmd_ctx_device(ctx) == J->device)
        return J->status;
    if (!J->collective)
        return spmd_op_fill(ctx, &out[0], 1.0);
    spmd_block ones;
    spmd_status st = spmd_ctx_alloc(ctx, 1, (int64_t[]){4}, SPMD_DTYPE_F32, &ones);
    if (st == SPMD_OK)
        st = spmd_op_fill(ctx, &ones, 1.0);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &ones, &out[0], "x");
    return st;
}

static spmd_status run_fail(const rmesh *m, fail_job *job, spmd_array **out)
{
    spmd_spec *os = spec_parse("");
    spmd_out_desc d = {1, {4}, SPMD_DTYPE_F32};
    *out = SENTINEL;
    spmd_status st = spmd_shard_map(m->mesh, fn_fail_one, job, 0, NULL, NULL, 1, &d,
                                    (const spmd_spec *const *)&os, NULL, out);
    spmd_spec_destroy(os);
    return st;
}

/* A correct call (every device psums ones) after a failed one. */
static spmd_status run_after_failure(const rmesh *m, const char *what)
{
    fail_job ok = {-1, SPMD_OK, 1};
    spmd_array *out = NULL;
    double t0 = now_s();
    spmd_status st = run_fail(m, &ok, &out);
    double dt = now_s() - t0;
    if (st == SPMD_OK) {
        double n = (double)m->size;
        rspec none = rs(0);
        verify_array(out, m, &none, 1, (int64_t[]){4}, SPMD_DTYPE_F32, expect_const, &n, what);
        spmd_array_destroy(out);
    } else {
        CHECK(out == NULL, "%s: failed call left an output", what);
    }
    CHECK(dt < 10.0, "%s took %.1f s", what, dt);
    return st;
}

static void fail_scenario(int device, const char *what)
{
    rmesh x;
    mesh_x(&x);
    /* warm the mesh up first, so that the failure hits a mesh in use */
    EXPECT_OK(run_after_failure(&x, "a correct call before the failure"));

    fail_job job = {device, SPMD_ERR_INVALID_ARGUMENT, 1};
    spmd_array *out = NULL;
    double t0 = now_s();
    spmd_status st = run_fail(&x, &job, &out);
    double dt = now_s() - t0;
    char dev_text[32];
    snprintf(dev_text, sizeof dev_text, "device %d", device);
    if (!EXPECT_STATUS(st, SPMD_ERR_INVALID_ARGUMENT, dev_text))
        fprintf(stderr, "  (%s)\n", what);
    CHECK(out == NULL, "%s: the failed call left an output", what);
    CHECK(dt < 10.0, "%s: the failure took %.1f s to be reported (the collective timeout is 60 s)",
          what, dt);
    CHECK(same_on_all_processes((int)st), "%s: processes disagree on the status (%s here)", what,
          spmd_status_name(st));

    /* The same mesh again: fine in one process; across processes the mesh may have been given
     * up (SPMD_ERR_DISTRIBUTED, create a new one), but every process must say the same. */
    spmd_status again = run_after_failure(&x, "the same mesh after a failed call");
    if (nproc == 1)
        EXPECT_OK(again);
    else if (again != SPMD_OK)
        EXPECT_STATUS(again, SPMD_ERR_DISTRIBUTED, "new mesh");
    CHECK(same_on_all_processes((int)again),
          "%s: processes disagree on the status of the next call (%s here)", what,
          spmd_status_name(again));
    rmesh_fini(&x);

    rmesh fresh;
    mesh_x(&fresh);
    EXPECT_OK(run_after_failure(&fresh, "a fresh mesh after a failed call"));
    rmesh_fini(&fresh);
}

/* Phase 0: every device meets an error it handles (a refused spmd_ctx_alloc) and succeeds.
 * Phase 1: device 0 returns an error without any message of its own. */
static spmd_status fn_stale(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin;
    (void)in;
    (void)nout;
    (void)out;
    if (*(const int *)user == 0) {
        spmd_block b;
        if (spmd_ctx_alloc(ctx, 1, (int64_t[]){0}, SPMD_DTYPE_F32, &b) == SPMD_OK)
            return SPMD_ERR_INTERNAL; /* a zero extent must be refused */
        return SPMD_OK;
    }
    return spmd_ctx_device(ctx) == 0 ? SPMD_ERR_INVALID_ARGUMENT : SPMD_OK;
}

static void test_fn_failure(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    fail_scenario(0, "fn fails on device 0 while the others psum over 'x'");
    fail_scenario(ndev - 1, "fn fails on the last device while the others psum over 'x'");

    /* no collectives: the others simply finish */
    rmesh x;
    mesh_x(&x);
    fail_job job = {0, SPMD_ERR_SHAPE, 0};
    spmd_array *out = NULL;
    EXPECT_STATUS(run_fail(&x, &job, &out), SPMD_ERR_SHAPE, "device 0");
    CHECK(out == NULL, "the failed call left an output%s", "");
    spmd_status again = run_after_failure(&x, "the same mesh after a failure without collectives");
    if (nproc == 1)
        EXPECT_OK(again);
    else if (again != SPMD_OK)
        EXPECT_STATUS(again, SPMD_ERR_DISTRIBUTED, "new mesh");
    CHECK(same_on_all_processes((int)again), "processes disagree (%s here)",
          spmd_status_name(again));
    rmesh_fini(&x);

    /* The message of an fn failure must not repeat an older, handled error of the worker. */
    rmesh y;
    mesh_x(&y);
    for (int phase = 0; phase < 2; phase++) {
        spmd_status st =
            spmd_shard_map(y.mesh, fn_stale, &phase, 0, NULL, NULL, 0, NULL, NULL, NULL, NULL);
        if (phase == 0) {
            EXPECT_OK(st);
        } else if (EXPECT_STATUS(st, SPMD_ERR_INVALID_ARGUMENT, "device 0")) {
            CHECK(strstr(spmd_last_error(), "spmd_ctx_alloc") == NULL,
                  "fn returned a bare status, but the message blames an earlier, handled error: "
                  "%s",
                  spmd_last_error());
        }
    }
    rmesh_fini(&y);
    end_test(before);
}

/* ---- 6. plans -------------------------------------------------------------------------- */

/* out0 = in + 1 (same spec), out1 = psum over 'x' of the block (P()). */
static spmd_status fn_plan(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                           void *user)
{
    atomic_int *calls = user;
    atomic_fetch_add(calls, 1);
    if (nin != 1 || nout != 2)
        return SPMD_ERR_INVALID_ARGUMENT;
    spmd_status st = spmd_op_binary_scalar(ctx, SPMD_BINARY_ADD, &in[0], 1.0, &out[0]);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &in[0], &out[1], "x");
    return st;
}

typedef struct plan_expect {
    int seed;
    int n; /* devices */
} plan_expect;

/* psum over x of the (2, 4) blocks of a (2n, 4) array: sum_d v[2d + r][c]. */
static double expect_plan_sum(const int64_t *gidx, const void *user)
{
    const plan_expect *e = user;
    double s = 0;
    for (int d = 0; d < e->n; d++)
        s += gval(e->seed, (2 * d + gidx[0]) * 4 + gidx[1]);
    return s;
}

static void test_plan(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    rmesh x;
    mesh_x(&x);
    rspec sx = rs(1, "0"), none = rs(0);
    spmd_spec *px = spec_parse("'x'"), *pn = spec_parse("");
    const spmd_spec *is[1] = {px}, *os[2] = {px, pn};
    int64_t shape[2] = {2 * ndev, 4};
    spmd_in_desc di = {2, {2 * ndev, 4}, SPMD_DTYPE_F32};
    spmd_out_desc d[2] = {{2, {2 * ndev, 4}, SPMD_DTYPE_F32}, {2, {2, 4}, SPMD_DTYPE_F32}};
    atomic_int calls = 0;
    spmd_plan *plan = NULL;
    assert_ok(spmd_plan_create(x.mesh, fn_plan, &calls, 1, &di, is, 2, d, os, NULL, &plan));
    assert_non_null(plan);

    spmd_array *last = NULL; /* the last accepted input, kept alive for a while */
    for (int t = 0; t < 50; t++) {
        int seed = 1000 * t;
        spmd_array *in = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, seed);
        spmd_array *out[2] = {SENTINEL, SENTINEL};
        if (EXPECT_OK(spmd_plan_execute(plan, &in, out))) {
            char what[64];
            snprintf(what, sizeof what, "plan execution %d, output 0", t);
            seed_expect e = {2, {2 * ndev, 4}, seed, 1.0, 1.0};
            verify_array(out[0], &x, &sx, 2, shape, SPMD_DTYPE_F32, expect_seeded, &e, what);
            snprintf(what, sizeof what, "plan execution %d, output 1", t);
            plan_expect pe = {seed, ndev};
            verify_array(out[1], &x, &none, 2, (int64_t[]){2, 4}, SPMD_DTYPE_F32, expect_plan_sum,
                         &pe, what);
            spmd_array_destroy(out[0]);
            spmd_array_destroy(out[1]);
        }
        if (t == 49)
            last = in;
        else
            spmd_array_destroy(in);
    }
    CHECK(atomic_load(&calls) == 50 * x.num_local, "fn ran %d times, expected %d",
          atomic_load(&calls), 50 * x.num_local);

    /* wrong shape, wrong dtype, other layout: refused before running, plan still usable */
    spmd_array *out[2] = {SENTINEL, SENTINEL};
    spmd_array *wrong = make_input(&x, &sx, 2, (int64_t[]){2 * ndev, 5}, SPMD_DTYPE_F32, 0);
    EXPECT_STATUS(spmd_plan_execute(plan, &wrong, out), SPMD_ERR_SHAPE, "input 0");
    CHECK(out[0] == NULL && out[1] == NULL, "failed execution left outputs%s", "");
    spmd_array_destroy(wrong);
    wrong = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F64, 0);
    EXPECT_STATUS(spmd_plan_execute(plan, &wrong, out), SPMD_ERR_SHAPE, "input 0");
    spmd_array_destroy(wrong);
    wrong = make_input(&x, &sx, 1, (int64_t[]){8 * ndev}, SPMD_DTYPE_F32, 0);
    EXPECT_STATUS(spmd_plan_execute(plan, &wrong, out), SPMD_ERR_SHAPE, "input 0");
    spmd_array_destroy(wrong);
    if (ndev > 1) {
        /* While the last accepted input is alive (so no new array can share its address). */
        rmesh rev; /* the same spec over the devices in reverse order */
        int ids[MAX_DEV];
        for (int dv = 0; dv < ndev; dv++)
            ids[dv] = ndev - 1 - dv;
        const char *xn[] = {"x"};
        spmd_test_mesh_build(&rev, NULL, 1, (int[]){ndev}, xn, ids);
        spmd_array *other = make_input(&x, &none, 2, shape, SPMD_DTYPE_F32, 0);
        EXPECT_STATUS(spmd_plan_execute(plan, &other, out), SPMD_ERR_INCOMPATIBLE_DEVICES,
                      "input 0", "reshard");
        CHECK(out[0] == NULL && out[1] == NULL, "failed execution left outputs%s", "");
        spmd_array_destroy(other);
        other = make_input(&rev, &sx, 2, shape, SPMD_DTYPE_F32, 0);
        EXPECT_STATUS(spmd_plan_execute(plan, &other, out), SPMD_ERR_INCOMPATIBLE_DEVICES,
                      "input 0", "reshard");
        spmd_array_destroy(other);
        rmesh_fini(&rev);
    }
    spmd_array_destroy(last);
    EXPECT_STATUS(spmd_plan_execute(plan, NULL, out), SPMD_ERR_INVALID_ARGUMENT, "in_arrays");
    {
        spmd_array *in = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 77);
        EXPECT_STATUS(spmd_plan_execute(plan, &in, NULL), SPMD_ERR_INVALID_ARGUMENT, "out_arrays");
        if (EXPECT_OK(spmd_plan_execute(plan, &in, out))) {
            seed_expect e = {2, {2 * ndev, 4}, 77, 1.0, 1.0};
            verify_array(out[0], &x, &sx, 2, shape, SPMD_DTYPE_F32, expect_seeded, &e,
                         "plan execution after refused inputs");
            spmd_array_destroy(out[0]);
            spmd_array_destroy(out[1]);
        }
        spmd_array_destroy(in);
    }
    spmd_plan_destroy(plan);

    /* After an accepted input is destroyed, a new array may be allocated at its address; the
     * plan must still check the new one. Done on a mesh of this process's own devices, so that
     * a process where a wrong input were accepted leaves no other process waiting for it. */
    if (nlocal > 1) {
        rmesh mine;
        int ids[MAX_DEV];
        for (int k = 0; k < nlocal; k++)
            ids[k] = me * nlocal + k;
        const char *xn[] = {"x"};
        spmd_test_mesh_build(&mine, NULL, 1, (int[]){nlocal}, xn, ids);
        int64_t lshape[2] = {2 * nlocal, 4};
        spmd_in_desc ldi = {2, {2 * nlocal, 4}, SPMD_DTYPE_F32};
        spmd_out_desc ld = {2, {2 * nlocal, 4}, SPMD_DTYPE_F32};
        spmd_plan *lp = NULL;
        assert_ok(
            spmd_plan_create(mine.mesh, fn_copy_all, NULL, 1, &ldi, is, 1, &ld, is, NULL, &lp));
        for (int round = 0; round < 20; round++) {
            spmd_array *good = make_input(&mine, &sx, 2, lshape, SPMD_DTYPE_F32, round);
            const void *accepted = spmd_array_sharding(good);
            spmd_array *lo = SENTINEL;
            if (EXPECT_OK(spmd_plan_execute(lp, &good, &lo)))
                spmd_array_destroy(lo);
            spmd_array_destroy(good);
            spmd_array *bad = make_input(&mine, &none, 2, lshape, SPMD_DTYPE_F32, round);
            lo = SENTINEL;
            spmd_status st = spmd_plan_execute(lp, &bad, &lo);
            if (!EXPECT_STATUS(st, SPMD_ERR_INCOMPATIBLE_DEVICES, "input 0", "reshard"))
                fprintf(stderr, "  (round %d: a P() input for a P('x') plan%s)\n", round,
                        (const void *)spmd_array_sharding(bad) == accepted
                            ? ", whose sharding took the address of the last accepted input's"
                            : "");
            if (st == SPMD_OK)
                spmd_array_destroy(lo);
            spmd_array_destroy(bad);
            if (st != SPMD_ERR_INCOMPATIBLE_DEVICES)
                break;
        }
        spmd_plan_destroy(lp);
        rmesh_fini(&mine);
    }
    spmd_spec_destroy(px);
    spmd_spec_destroy(pn);
    rmesh_fini(&x);
    end_test(before);
}

/* ---- 7. donation ----------------------------------------------------------------------- */

typedef struct donate_job {
    int expect_alias; /* 1: in[0].data must be out[0].data; 0: must not */
    atomic_int wrong_alias;
} donate_job;

/* out[0] = 2 * in[0], converting to out's dtype; in place when aliased. */
static spmd_status fn_double(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    donate_job *J = user;
    int bad = 0;
    (void)nin;
    (void)nout;
    int aliased = in[0].data == out[0].data;
    FN_CHECK(aliased == J->expect_alias, "device %d: in[0].data %s out[0].data",
             spmd_ctx_device(ctx), aliased ? "==" : "!=");
    if (bad)
        atomic_fetch_add(&J->wrong_alias, 1);
    spmd_status st = SPMD_OK;
    if (!aliased)
        st = spmd_op_copy(ctx, &in[0], &out[0]);
    if (st == SPMD_OK)
        st = spmd_op_binary_scalar(ctx, SPMD_BINARY_MUL, &out[0], 2.0, &out[0]);
    return bad ? SPMD_ERR_INVALID_ARGUMENT : st;
}

static void check_deleted(spmd_array *a, const rmesh *m, const char *what)
{
    float buf[256];
    EXPECT_STATUS(spmd_array_to_host(a, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT, "deleted");
    /* passing it again fails the same way, on every process, before anything runs */
    spmd_spec *px = spec_parse("'x'");
    spmd_out_desc d = {2, {2 * ndev, 3}, SPMD_DTYPE_F32};
    spmd_array *out = SENTINEL;
    EXPECT_STATUS(spmd_shard_map(m->mesh, fn_copy_all, NULL, 1, &a, (const spmd_spec *const *)&px,
                                 1, &d, (const spmd_spec *const *)&px, NULL, &out),
                  SPMD_ERR_INVALID_ARGUMENT, "deleted");
    CHECK(out == NULL, "%s: a failed call left an output", what);
    spmd_spec_destroy(px);
}

static void test_donation(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    rmesh x;
    mesh_x(&x);
    rspec sx = rs(1, "0");
    int64_t shape[2] = {2 * ndev, 3};
    spmd_spec *px = spec_parse("'x'");
    const spmd_spec *is[2] = {px, px};
    int donate_first[2] = {SPMD_DONATE_IN_PLACE, 0};
    spmd_shard_map_options opts = SPMD_SHARD_MAP_OPTIONS_INIT;
    opts.donate = donate_first;

    /* matching output: aliased, no copy */
    {
        spmd_array *a = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 3);
        void *before_data[MAX_DEV] = {0};
        for (int i = 0; i < spmd_array_num_shards(a); i++) {
            spmd_shard s;
            if (EXPECT_OK(spmd_array_shard(a, i, &s)))
                before_data[i] = s.data;
        }
        spmd_out_desc d = {2, {2 * ndev, 3}, SPMD_DTYPE_F32};
        donate_job job = {1, 0};
        spmd_array *out = SENTINEL;
        if (EXPECT_OK(spmd_shard_map(x.mesh, fn_double, &job, 1, &a, is, 1, &d, is, &opts, &out))) {
            seed_expect e = {2, {2 * ndev, 3}, 3, 2.0, 0.0};
            verify_array(out, &x, &sx, 2, shape, SPMD_DTYPE_F32, expect_seeded, &e,
                         "donated input, matching output");
            for (int i = 0; i < spmd_array_num_shards(out); i++) {
                spmd_shard s;
                if (EXPECT_OK(spmd_array_shard(out, i, &s)))
                    CHECK(s.data == before_data[i],
                          "output shard %d does not reuse the donated buffer", i);
            }
            spmd_array_destroy(out);
        }
        check_deleted(a, &x, "donated input");
        spmd_array_destroy(a);
    }

    /* no output of the same block shape and dtype: still runs, input deleted */
    {
        spmd_array *a = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 5);
        spmd_out_desc d = {2, {2 * ndev, 3}, SPMD_DTYPE_F64};
        donate_job job = {0, 0};
        spmd_array *out = SENTINEL;
        if (EXPECT_OK(spmd_shard_map(x.mesh, fn_double, &job, 1, &a, is, 1, &d, is, &opts, &out))) {
            seed_expect e = {2, {2 * ndev, 3}, 5, 2.0, 0.0};
            verify_array(out, &x, &sx, 2, shape, SPMD_DTYPE_F64, expect_seeded, &e,
                         "donated input, no matching output");
            spmd_array_destroy(out);
        }
        check_deleted(a, &x, "donated input without a matching output");
        spmd_array_destroy(a);
    }

    /* buffers shared with other arrays: not reused, the other arrays keep their data */
    {
        spmd_array *a = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 9);
        spmd_array *singles[MAX_DEV] = {0};
        int ns = spmd_array_num_shards(a);
        for (int i = 0; i < ns; i++) {
            spmd_shard s;
            float buf[6];
            assert_ok(spmd_array_shard(a, i, &s));
            assert_ok(spmd_array_shard_to_host(a, i, buf, sizeof buf));
            assert_ok(spmd_array_create_on_device(s.device_id, buf, 2, (int64_t[]){2, 3},
                                                  SPMD_DTYPE_F32, &singles[i]));
        }
        spmd_sharding *sh = sharding_make(&x, &sx);
        spmd_array *g = NULL;
        assert_ok(
            spmd_array_from_single_device_arrays(2, shape, SPMD_DTYPE_F32, sh, ns, singles, &g));
        spmd_sharding_destroy(sh);
        spmd_out_desc d = {2, {2 * ndev, 3}, SPMD_DTYPE_F32};
        donate_job job = {0, 0};
        spmd_array *out = SENTINEL;
        if (EXPECT_OK(spmd_shard_map(x.mesh, fn_double, &job, 1, &g, is, 1, &d, is, &opts, &out))) {
            seed_expect e = {2, {2 * ndev, 3}, 9, 2.0, 0.0};
            verify_array(out, &x, &sx, 2, shape, SPMD_DTYPE_F32, expect_seeded, &e,
                         "donated input sharing its buffers");
            spmd_array_destroy(out);
        }
        check_deleted(g, &x, "donated input sharing its buffers");
        for (int i = 0; i < ns; i++) {
            float buf[6] = {0};
            int f = x.local_flat[i];
            if (EXPECT_OK(spmd_array_to_host(singles[i], buf, sizeof buf)))
                for (int k = 0; k < 6; k++)
                    CHECK(buf[k] == (float)gval(9, f * 6 + k),
                          "single-device array %d changed after the donation: %g", i,
                          (double)buf[k]);
            spmd_array_destroy(singles[i]);
        }
        spmd_array_destroy(g);
        spmd_array_destroy(a);
    }

    /* one array donated and also read as another input of the same call: refused */
    {
        spmd_array *a = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 11);
        spmd_array *ins[2] = {a, a}, *outs[2] = {SENTINEL, SENTINEL};
        spmd_out_desc d[2] = {{2, {2 * ndev, 3}, SPMD_DTYPE_F32},
                              {2, {2 * ndev, 3}, SPMD_DTYPE_F32}};
        int donate_second[2] = {0, 1};
        spmd_shard_map_options o2 = SPMD_SHARD_MAP_OPTIONS_INIT;
        o2.donate = donate_second;
        EXPECT_STATUS(spmd_shard_map(x.mesh, fn_copy_all, NULL, 2, ins, is, 2, d, is, &o2, outs),
                      SPMD_ERR_INVALID_ARGUMENT, "donated");
        CHECK(outs[0] == NULL && outs[1] == NULL, "refused call left outputs%s", "");
        /* donated as input 0, read as input 1 */
        outs[0] = outs[1] = SENTINEL;
        spmd_status st =
            spmd_shard_map(x.mesh, fn_copy_all, NULL, 2, ins, is, 2, d, is, &opts, outs);
        EXPECT_STATUS(st, SPMD_ERR_INVALID_ARGUMENT, "donated");
        for (int j = 0; j < 2; j++)
            if (outs[j] != SENTINEL)
                spmd_array_destroy(outs[j]);
        /* a refused call leaves the array alive */
        if (st != SPMD_OK) {
            float buf[6];
            EXPECT_OK(spmd_array_shard_to_host(a, 0, buf, sizeof buf));
        }
        spmd_array_destroy(a);
    }

    /* plans donate the same way, every execution */
    {
        spmd_in_desc di = {2, {2 * ndev, 3}, SPMD_DTYPE_F32};
        spmd_out_desc d = {2, {2 * ndev, 3}, SPMD_DTYPE_F32};
        donate_job job = {1, 0};
        spmd_plan *plan = NULL;
        assert_ok(spmd_plan_create(x.mesh, fn_double, &job, 1, &di, is, 1, &d, is, &opts, &plan));
        for (int t = 0; t < 3; t++) {
            spmd_array *a = make_input(&x, &sx, 2, shape, SPMD_DTYPE_F32, 100 * t);
            spmd_array *out = SENTINEL;
            if (EXPECT_OK(spmd_plan_execute(plan, &a, &out))) {
                seed_expect e = {2, {2 * ndev, 3}, 100 * t, 2.0, 0.0};
                verify_array(out, &x, &sx, 2, shape, SPMD_DTYPE_F32, expect_seeded, &e,
                             "plan with a donated input");
                spmd_array_destroy(out);
            }
            float buf[4];
            EXPECT_STATUS(spmd_array_to_host(a, buf, sizeof buf), SPMD_ERR_INVALID_ARGUMENT,
                          "deleted");
            out = SENTINEL;
            EXPECT_STATUS(spmd_plan_execute(plan, &a, &out), SPMD_ERR_INVALID_ARGUMENT, "deleted");
            CHECK(out == NULL, "refused execution left an output%s", "");
            spmd_array_destroy(a);
        }
        spmd_plan_destroy(plan);
    }
    spmd_spec_destroy(px);
    rmesh_fini(&x);
    end_test(before);
}

/* ---- 8. the context inside fn ---------------------------------------------------------- */

typedef struct ctx_job {
    const rmesh *m;
    atomic_int calls[MAX_DEV];
} ctx_job;

#define NTEMP 40

static spmd_status fn_ctx(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    ctx_job *J = user;
    const rmesh *m = J->m;
    int bad = 0;
    (void)nin;
    (void)in;
    int dev = spmd_ctx_device(ctx);
    int f = rmesh_flat_of(m, dev);
    FN_CHECK(f >= 0 && owner(dev) == me, "spmd_ctx_device gave %d", dev);
    if (f < 0)
        return SPMD_ERR_INVALID_ARGUMENT;
    atomic_fetch_add(&J->calls[f], 1);
    const spmd_mesh *cm = spmd_ctx_mesh(ctx);
    FN_CHECK(cm != NULL && spmd_mesh_equal(cm, m->mesh), "spmd_ctx_mesh is not the call's mesh%s",
             "");
    FN_CHECK(cm == NULL || spmd_mesh_device_position(cm, dev) == f,
             "device %d is not at position %d of spmd_ctx_mesh", dev, f);
    if (spmd_runtime_platform() == SPMD_PLATFORM_CPU) {
        FN_CHECK(spmd_ctx_stream(ctx) == NULL, "spmd_ctx_stream is not NULL on cpu%s", "");
        FN_CHECK(spmd_ctx_cublas(ctx) == NULL, "spmd_ctx_cublas is not NULL on cpu%s", "");
    }

    /* temporaries: shapes as asked, distinct memory, usable by the ops */
    spmd_block t[NTEMP];
    int64_t tshape[2] = {3, 5};
    for (int k = 0; k < NTEMP; k++) {
        spmd_status st =
            spmd_ctx_alloc(ctx, 2, tshape, k % 2 ? SPMD_DTYPE_F64 : SPMD_DTYPE_I32, &t[k]);
        FN_CHECK(st == SPMD_OK, "spmd_ctx_alloc %d: %s", k, spmd_last_error());
        if (st != SPMD_OK)
            return SPMD_ERR_INVALID_ARGUMENT;
        FN_CHECK(t[k].data != NULL && t[k].ndim == 2 && t[k].shape[0] == 3 && t[k].shape[1] == 5 &&
                     t[k].dtype == (k % 2 ? SPMD_DTYPE_F64 : SPMD_DTYPE_I32),
                 "temporary %d is not a (3, 5) block of its dtype", k);
        FN_CHECK(spmd_block_size(&t[k]) == 15 && spmd_block_nbytes(&t[k]) == (k % 2 ? 120u : 60u),
                 "temporary %d has size %lld / %zu bytes", k, (long long)spmd_block_size(&t[k]),
                 spmd_block_nbytes(&t[k]));
        if (spmd_op_iota(ctx, &t[k], (double)(1000 * dev + 100 * k), 1.0) != SPMD_OK)
            bad = 1;
    }
    for (int k = 0; k < NTEMP; k++)
        for (int e = 0; e < 15; e++)
            if (spmd_test_load(t[k].dtype, t[k].data, e) != (double)(1000 * dev + 100 * k + e)) {
                FN_CHECK(0, "device %d: temporary %d was overwritten (element %d)", dev, k, e);
                break;
            }
    spmd_block scalar;
    FN_CHECK(spmd_ctx_alloc(ctx, 0, NULL, SPMD_DTYPE_F32, &scalar) == SPMD_OK && scalar.ndim == 0 &&
                 spmd_block_size(&scalar) == 1,
             "rank-0 temporary: %s", spmd_last_error());
    spmd_block junk;
    FN_CHECK(spmd_ctx_alloc(ctx, 2, tshape, SPMD_DTYPE_COUNT, &junk) == SPMD_ERR_INVALID_ARGUMENT,
             "spmd_ctx_alloc took a bad dtype%s", "");
    FN_CHECK(spmd_ctx_alloc(ctx, 2, tshape, SPMD_DTYPE_F32, NULL) == SPMD_ERR_INVALID_ARGUMENT,
             "spmd_ctx_alloc took a NULL block%s", "");
    FN_CHECK(spmd_ctx_alloc(ctx, 1, (int64_t[]){0}, SPMD_DTYPE_F32, &junk) == SPMD_ERR_SHAPE,
             "spmd_ctx_alloc took a zero extent%s", "");
    FN_CHECK(spmd_ctx_alloc(ctx, -1, tshape, SPMD_DTYPE_F32, &junk) == SPMD_ERR_SHAPE,
             "spmd_ctx_alloc took rank -1%s", "");
    FN_CHECK(spmd_last_error()[0] != '\0', "a failed spmd_ctx_alloc left no message%s", "");

    /* out[0] (P('x'), block (1,)) = this device's id; out[1] (P()) = psum of the first
     * temporary's elements over 'x'. */
    int size = 0;
    FN_CHECK(spmd_axis_size(ctx, "x", &size) == SPMD_OK && size == m->size, "axis_size('x') = %d",
             size);
    spmd_status st = spmd_op_fill(ctx, &out[0], (double)dev);
    if (st == SPMD_OK)
        st = spmd_op_reduce(ctx, SPMD_REDUCE_SUM, &t[1], SPMD_ALL_AXES, &scalar);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &scalar, &out[1], "x");
    (void)nout;
    return bad ? SPMD_ERR_INVALID_ARGUMENT : st;
}

static double expect_device_id(const int64_t *gidx, const void *user)
{
    return (double)((const rmesh *)user)->ids[gidx[0]];
}

static void test_context(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    /* a mesh over the devices in reverse order, so that ids and positions differ */
    rmesh m;
    int ids[MAX_DEV];
    for (int d = 0; d < ndev; d++)
        ids[d] = ndev - 1 - d;
    const char *xn[] = {"x"};
    spmd_test_mesh_build(&m, NULL, 1, (int[]){ndev}, xn, ids);
    ctx_job *J = calloc(1, sizeof *J);
    assert_non_null(J);
    J->m = &m;
    spmd_spec *px = spec_parse("'x'"), *pn = spec_parse("");
    const spmd_spec *os[2] = {px, pn};
    spmd_out_desc d[2] = {{1, {ndev}, SPMD_DTYPE_I32}, {0, {0}, SPMD_DTYPE_F32}};
    spmd_array *out[2] = {SENTINEL, SENTINEL};
    if (EXPECT_OK(spmd_shard_map(m.mesh, fn_ctx, J, 0, NULL, NULL, 2, d, os, NULL, out))) {
        rspec sx = rs(1, "0"), none = rs(0);
        verify_array(out[0], &m, &sx, 1, (int64_t[]){ndev}, SPMD_DTYPE_I32, expect_device_id, &m,
                     "spmd_ctx_device per position");
        /* sum over devices d of sum_e (1000 d + 100 + e), e < 15 */
        double want = 0;
        for (int dv = 0; dv < ndev; dv++)
            for (int e = 0; e < 15; e++)
                want += 1000.0 * dv + 100.0 + e;
        verify_array(out[1], &m, &none, 0, NULL, SPMD_DTYPE_F32, expect_const, &want,
                     "psum of temporaries");
        spmd_array_destroy(out[0]);
        spmd_array_destroy(out[1]);
    }
    for (int f = 0; f < m.size; f++)
        CHECK(atomic_load(&J->calls[f]) == (owner(m.ids[f]) == me), "fn ran %d times for device %d",
              atomic_load(&J->calls[f]), m.ids[f]);
    /* outside fn */
    spmd_block b;
    EXPECT_STATUS(spmd_ctx_alloc(NULL, 1, (int64_t[]){2}, SPMD_DTYPE_F32, &b),
                  SPMD_ERR_INVALID_ARGUMENT, "ctx");
    CHECK(spmd_block_size(NULL) == 0 && spmd_block_nbytes(NULL) == 0,
          "spmd_block_size(NULL) is not 0%s", "");
    spmd_spec_destroy(px);
    spmd_spec_destroy(pn);
    free(J);
    rmesh_fini(&m);
    end_test(before);
}

/* ---- 9. meshes over a subset of the devices -------------------------------------------- */

/* out[0] (P()) = psum over 'x' of the input block. */
static spmd_status fn_psum_x(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin;
    (void)nout;
    (void)user;
    return spmd_psum(ctx, &in[0], &out[0], "x");
}

typedef struct subset_expect {
    int n; /* mesh size */
    int seed;
} subset_expect;

/* (2n,) array P('x'): the psum of the blocks (2,) is sum_d v[2d + c]. */
static double expect_subset_sum(const int64_t *gidx, const void *user)
{
    const subset_expect *e = user;
    double s = 0;
    for (int d = 0; d < e->n; d++)
        s += gval(e->seed, 2 * d + gidx[0]);
    return s;
}

static void run_subset(const rmesh *m, const char *what)
{
    rspec sx = rs(1, "0"), none = rs(0);
    spmd_spec *px = spec_parse("'x'"), *pn = spec_parse("");
    spmd_out_desc d = {1, {2}, SPMD_DTYPE_F32};
    /* every process can build the input; those without devices hold no shard of it */
    spmd_array *a = make_input(m, &sx, 1, (int64_t[]){2 * m->size}, SPMD_DTYPE_F32, 3);
    spmd_array *out = SENTINEL;
    double t0 = now_s();
    spmd_status st = spmd_shard_map(m->mesh, fn_psum_x, NULL, 1, &a, (const spmd_spec *const *)&px,
                                    1, &d, (const spmd_spec *const *)&pn, NULL, &out);
    double dt = now_s() - t0;
    if (m->num_local > 0) {
        if (EXPECT_OK(st)) {
            subset_expect e = {m->size, 3};
            verify_array(out, m, &none, 1, (int64_t[]){2}, SPMD_DTYPE_F32, expect_subset_sum, &e,
                         what);
            spmd_array_destroy(out);
        }
    } else {
        /* outside the mesh, as in JAX: nothing runs, at once, and the output is the same global
         * array with no shards */
        if (EXPECT_OK(st)) {
            CHECK(out != NULL && out != SENTINEL && spmd_array_num_shards(out) == 0 &&
                      spmd_array_ndim(out) == 1 && spmd_array_shape(out)[0] == 2 &&
                      spmd_array_dtype(out) == SPMD_DTYPE_F32,
                  "%s: a process outside the mesh got no (2,) float32 array without shards", what);
            if (out != SENTINEL)
                spmd_array_destroy(out);
        }
        CHECK(dt < 1.0, "%s: the call outside the mesh took %.2f s", what, dt);
    }
    spmd_array_destroy(a);
    spmd_spec_destroy(px);
    spmd_spec_destroy(pn);
}

static void test_subset_meshes(void **state)
{
    (void)state;
    int before = atomic_load(&nfail);
    const char *xn[] = {"x"};
    int ids[MAX_DEV], n = 0;

    /* process 0's devices, in reverse order */
    rmesh p0;
    for (int k = 0; k < nlocal; k++)
        ids[k] = nlocal - 1 - k;
    spmd_test_mesh_build(&p0, NULL, 1, (int[]){nlocal}, xn, ids);
    run_subset(&p0, "mesh over process 0's devices");
    run_subset(&p0, "mesh over process 0's devices, second call");
    rmesh_fini(&p0);

    /* every other device */
    rmesh eo;
    for (int d = 0; d < ndev; d += 2)
        ids[n++] = d;
    spmd_test_mesh_build(&eo, NULL, 1, (int[]){n}, xn, ids);
    run_subset(&eo, "mesh over every other device");
    rmesh_fini(&eo);

    /* the last process's devices (a mesh that leaves process 0 out) */
    rmesh last;
    for (int k = 0; k < nlocal; k++)
        ids[k] = (nproc - 1) * nlocal + k;
    spmd_test_mesh_build(&last, NULL, 1, (int[]){nlocal}, xn, ids);
    run_subset(&last, "mesh over the last process's devices");
    rmesh_fini(&last);
    end_test(before);
}

int main(void)
{
    spmd_test_init();
    nproc = spmd_process_count();
    nlocal = spmd_local_device_count();
    me = spmd_process_index();
    ndev = spmd_device_count();
    if (ndev > MAX_DEV || ndev != nproc * nlocal) {
        fprintf(stderr, "test_shard_map: needs at most %d devices, %d per process\n", MAX_DEV,
                nlocal);
        return spmd_test_finish(1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_output_assembly),
        cmocka_unit_test(test_replication_check),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_donation),
        cmocka_unit_test(test_context),
        cmocka_unit_test(test_subset_meshes),
        cmocka_unit_test(test_fn_failure),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failures);
}
