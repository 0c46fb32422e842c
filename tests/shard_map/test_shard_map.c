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
 * end.
 *
 * This file holds the checks, the reference model, sections 1-3 and main; sections 4-5 are in
 * test_shard_map_errors.c, 6-9 in test_shard_map_plans.c, and test_shard_map.h declares what
 * they share. */
#define _POSIX_C_SOURCE 200809L

#include "test_shard_map.h"

#define MAX_IN 4

/* The run's geometry; global device ids are process-major. */
int nproc, nlocal, me, ndev;

/* ---- non-fatal checks ------------------------------------------------------------------ */

atomic_int nfail;

void check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
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

/* Status and message fragments, like assert_status, but recorded instead of jumping. */
int expect_status_impl(spmd_status got, spmd_status want, const char *expr, const char *file,
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

/* Fails the current cmocka test if any check failed since `before`. */
void end_test(int before)
{
    int n = atomic_load(&nfail) - before;
    if (n)
        fail_msg("%d check(s) failed on process %d (see above)", n, me);
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1 when every process passed the same value (always 1 in one process). */
int same_on_all_processes(int v)
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

char sentinel_byte; /* SENTINEL points here */

/* ---- reference model: meshes, specs, blocks -------------------------------------------- */

int owner(int device_id) { return device_id / nlocal; }

void rmesh_fini(rmesh *m)
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

int rmesh_flat_of(const rmesh *m, int device_id)
{
    for (int f = 0; f < m->size; f++)
        if (m->ids[f] == device_id)
            return f;
    return -1;
}

/* 1-D 'x' over every device, in id order. */
void mesh_x(rmesh *m)
{
    const char *x[] = {"x"};
    spmd_test_mesh_build(m, NULL, 1, (int[]){ndev}, x, NULL);
}

/* (process_count, local_count) named ('p', 'l'). */
void mesh_pl(rmesh *m)
{
    const char *pl[] = {"p", "l"};
    spmd_test_mesh_build(m, NULL, 2, (int[]){nproc, nlocal}, pl, NULL);
}

/* rs(2, "0", "") is P(axis 0, None); "10" is the tuple (axis 1, axis 0). */
rspec rs(int len, ...)
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

spmd_spec *spec_parse(const char *text)
{
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse(text, &spec));
    return spec;
}

spmd_sharding *sharding_make(const rmesh *m, const rspec *s)
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
double gval(int seed, int64_t g) { return (double)seed + (double)g; }

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

spmd_array *make_input(const rmesh *m, const rspec *s, int ndim, const int64_t *shape, spmd_dtype t,
                       int seed)
{
    void *host = host_data(ndim, shape, t, seed);
    spmd_sharding *sh = sharding_make(m, s);
    spmd_array *a = NULL;
    assert_ok(spmd_device_put(host, ndim, shape, t, sh, &a));
    spmd_sharding_destroy(sh);
    free(host);
    return a;
}

double expect_seeded(const int64_t *gidx, const void *user)
{
    const seed_expect *e = user;
    return gval(e->seed, flat_index(e->ndim, e->shape, gidx)) * e->scale + e->offset;
}

double expect_const(const int64_t *gidx, const void *user)
{
    (void)gidx;
    return *(const double *)user;
}

/*
 * Checks an output array against the reference: shape, dtype, spec, one shard per local mesh
 * device (in mesh flat order) with the right index box and data, and a host fetch that succeeds
 * exactly when this process's devices cover every block.
 */
void verify_array(const spmd_array *a, const rmesh *m, const rspec *s, int ndim,
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
