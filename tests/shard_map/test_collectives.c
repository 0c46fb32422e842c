/* Every collective inside spmd_shard_map against a host reference, in 1, 2 and 4 processes × 1
 * to 4 CPU devices: psum, pmean, pmax, pmin, all_gather, psum_scatter, ppermute, all_to_all,
 * axis_index and axis_size, for f32, f64 and i32 (and f16 / bf16 where they apply), tiled and
 * untiled, over 1-D, 2-D and 3-D meshes whose axes span processes, stay inside one or mix, and
 * over meshes of a subset of the devices (3 and 6 of them, non-powers of two).
 *
 * Each call of fn runs a list of collectives; every result goes to its own output, whose
 * out_spec splits dimension 0 over every mesh axis in mesh order, so device f's result is block
 * f. The expected block of every device is computed here by plain loops from SEMANTICS.md (f):
 * group = devices sharing every coordinate off the named axes, position = mixed radix over the
 * named axes in the order given (first name major). Operand values are a hash of (mesh position,
 * element, salt), so the reference never reads anything back from the library.
 *
 * Value checks are soft (counted, then reported at the end of each test) so that every process
 * keeps issuing the same sequence of collective calls even when one of them sees a mismatch. */
#include "testutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEV 64 /* most global devices a run may have */
#define MAX_AXES 3
#define MAX_OPS 64
#define MAX_PAIRS 64
/* Elements of a large block: > 64 KiB in f32; divisible by every group size. */
#define LARGE 24000

/* The run's geometry; global device ids are process-major. */
static int nproc, nlocal, me, ndev;
static int errors; /* soft failures of the running test */

static void report(const char *fmt, ...)
{
    errors++;
    if (errors > 40)
        return;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    print_error("[process %d] %s\n", me, text);
}

/* Ends a test: fails it when any soft check failed. */
static void finish_test(void)
{
    int e = errors;
    errors = 0;
    if (e)
        fail_msg("%d check(s) failed on process %d", e, me);
}

/* ---- reference meshes ----------------------------------------------------------------- */

typedef spmd_test_mesh ref_mesh;

static int owner(int device_id) { return device_id / nlocal; }

static int mesh_has_me(const ref_mesh *m)
{
    for (int f = 0; f < m->size; f++)
        if (owner(m->ids[f]) == me)
            return 1;
    return 0;
}

static void coords_of(const ref_mesh *m, int f, int *c)
{
    for (int k = m->ndim - 1; k >= 0; k--) {
        c[k] = f % m->shape[k];
        f /= m->shape[k];
    }
}

/* "p,l" -> mesh axis indices, major first; -1 if a name is not a mesh axis. */
static int resolve_axes(const ref_mesh *m, const char *text, int *axes)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *s = p;
        while (*p && *p != ',' && *p != ' ')
            p++;
        if (p == s)
            break;
        int a = -1;
        for (int k = 0; k < m->ndim; k++)
            if (strlen(m->names[k]) == (size_t)(p - s) && !strncmp(m->names[k], s, (size_t)(p - s)))
                a = k;
        if (a < 0 || n == MAX_AXES)
            return -1;
        axes[n++] = a;
    }
    return n;
}

static int axes_in_mesh_order(const ref_mesh *m, const char *text)
{
    int axes[MAX_AXES], n = resolve_axes(m, text, axes);
    for (int k = 1; k < n; k++)
        if (axes[k] < axes[k - 1])
            return 0;
    return 1;
}

/* A device's group: its size, the device's position and the member (flat) at every position. */
typedef struct grp {
    int n;
    int pos;
    int members[MAX_DEV];
} grp;

static void group_of(const ref_mesh *m, const char *axes_text, int f, grp *g)
{
    int axes[MAX_AXES], na = resolve_axes(m, axes_text, axes);
    int named[MAX_AXES] = {0};
    memset(g, 0, sizeof *g);
    g->n = 1;
    for (int k = 0; k < na; k++) {
        named[axes[k]] = 1;
        g->n *= m->shape[axes[k]];
    }
    int cf[MAX_AXES], ch[MAX_AXES];
    coords_of(m, f, cf);
    for (int h = 0; h < m->size; h++) {
        coords_of(m, h, ch);
        int same = 1;
        for (int k = 0; k < m->ndim; k++)
            same &= named[k] || ch[k] == cf[k];
        if (!same)
            continue;
        int p = 0;
        for (int k = 0; k < na; k++)
            p = p * m->shape[axes[k]] + ch[axes[k]];
        g->members[p] = h;
    }
    for (int k = 0; k < na; k++)
        g->pos = g->pos * m->shape[axes[k]] + cf[axes[k]];
}

static int group_size(const ref_mesh *m, const char *axes_text)
{
    grp g;
    group_of(m, axes_text, 0, &g);
    return g.n;
}

/* ---- operand values -------------------------------------------------------------------- */

/* The value of element i of the operand on mesh position `flat`; exactly representable in t. */
static double val(int flat, int64_t i, int salt, spmd_dtype t, int big)
{
    uint32_t h = (uint32_t)(flat + 1) * 2654435761u;
    h ^= (uint32_t)i * 2246822519u;
    h ^= (uint32_t)(salt + 7) * 3266489917u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    h *= 3266489917u;
    h ^= h >> 16;
    int r = (int)(h % 2001u) - 1000;
    switch (t) {
    case SPMD_DTYPE_I32:
        return big ? (double)r * 2147483.0 : (double)r;
    case SPMD_DTYPE_F16:
        return (double)(r % 64) * 0.5;
    case SPMD_DTYPE_BF16:
        return (double)(r % 64);
    default:
        return (double)r * 0.5;
    }
}

static int64_t num_elems(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int j = 0; j < ndim; j++)
        n *= shape[j];
    return n;
}

static void unravel(int64_t e, int nd, const int64_t *shape, int64_t *idx)
{
    for (int j = nd - 1; j >= 0; j--) {
        idx[j] = e % shape[j];
        e /= shape[j];
    }
}

static int64_t ravel(int nd, const int64_t *shape, const int64_t *idx)
{
    int64_t e = 0;
    for (int j = 0; j < nd; j++)
        e = e * shape[j] + idx[j];
    return e;
}

/* ---- operations and cases ---------------------------------------------------------------- */

typedef enum kind {
    K_PSUM,
    K_PMEAN,
    K_PMAX,
    K_PMIN,
    K_GATHER,
    K_SCATTER,
    K_PERMUTE,
    K_A2A,
    K_INDEX /* axis_index and axis_size into an int32 (2) block */
} kind;

static const char *const kind_names[] = {"psum",     "pmean",      "pmax",
                                         "pmin",     "all_gather", "psum_scatter",
                                         "ppermute", "all_to_all", "axis_index/axis_size"};

typedef struct op {
    kind k;
    char axes[32];
    spmd_dtype dtype; /* operand */
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int axis, axis2, tiled; /* gather axis / scatter dimension / split and concat axes */
    int npairs;
    int pairs[2 * MAX_PAIRS];
    int from_input; /* the operand is an input block (else fn fills a temporary) */
    int in_place;   /* the operand is first copied into the output, then out == in */
    int big;        /* int32 values near the limits (sums wrap) */
    int salt;
    int bad_out; /* error cases: the output block is one row too long */
    /* derived by op_finish */
    int n;      /* group size */
    int na, nc; /* normalized axis (gather, scatter, split) and concat axis */
    spmd_dtype out_dtype;
    int out_ndim;
    int64_t out_shape[SPMD_MAX_RANK + 1];
    int input; /* index of its input array */
    char what[200];
} op;

typedef struct coll_case {
    const ref_mesh *m;
    int nops;
    op ops[MAX_OPS];
    int one_buffer; /* fn passes every op's axes (and pairs) in the same reused buffer */
    spmd_status expect;
    const char *expect_msg;
} coll_case;

static void case_init(coll_case *c, const ref_mesh *m)
{
    memset(c, 0, sizeof *c);
    c->m = m;
    c->expect = SPMD_OK;
}

/* Appends an op; shape given as ndim extents. */
static op *add(coll_case *c, kind k, const char *axes, spmd_dtype t, int ndim, ...)
{
    if (c->nops == MAX_OPS)
        fail_msg("test bug: more than %d ops in one case", MAX_OPS);
    op *o = &c->ops[c->nops++];
    memset(o, 0, sizeof *o);
    o->k = k;
    snprintf(o->axes, sizeof o->axes, "%s", axes);
    o->dtype = t;
    o->ndim = ndim;
    va_list ap;
    va_start(ap, ndim);
    for (int j = 0; j < ndim; j++)
        o->shape[j] = va_arg(ap, int);
    va_end(ap);
    o->salt = c->nops * 31 + (int)t;
    return o;
}

static op *add_gather(coll_case *c, const char *axes, spmd_dtype t, int axis, int tiled, int ndim,
                      ...)
{
    op *o = add(c, K_GATHER, axes, t, 0);
    o->ndim = ndim;
    va_list ap;
    va_start(ap, ndim);
    for (int j = 0; j < ndim; j++)
        o->shape[j] = va_arg(ap, int);
    va_end(ap);
    o->axis = axis;
    o->tiled = tiled;
    return o;
}

static op *add_scatter(coll_case *c, const char *axes, spmd_dtype t, int dim, int tiled, int ndim,
                       ...)
{
    op *o = add(c, K_SCATTER, axes, t, 0);
    o->ndim = ndim;
    va_list ap;
    va_start(ap, ndim);
    for (int j = 0; j < ndim; j++)
        o->shape[j] = va_arg(ap, int);
    va_end(ap);
    o->axis = dim;
    o->tiled = tiled;
    return o;
}

static op *add_a2a(coll_case *c, const char *axes, spmd_dtype t, int split, int concat, int tiled,
                   int ndim, ...)
{
    op *o = add(c, K_A2A, axes, t, 0);
    o->ndim = ndim;
    va_list ap;
    va_start(ap, ndim);
    for (int j = 0; j < ndim; j++)
        o->shape[j] = va_arg(ap, int);
    va_end(ap);
    o->axis = split;
    o->axis2 = concat;
    o->tiled = tiled;
    return o;
}

static op *add_permute(coll_case *c, const char *axes, spmd_dtype t, int npairs, const int *pairs,
                       int ndim, ...)
{
    op *o = add(c, K_PERMUTE, axes, t, 0);
    o->ndim = ndim;
    va_list ap;
    va_start(ap, ndim);
    for (int j = 0; j < ndim; j++)
        o->shape[j] = va_arg(ap, int);
    va_end(ap);
    o->npairs = npairs;
    memcpy(o->pairs, pairs, 2 * (size_t)npairs * sizeof(int));
    return o;
}

static int norm(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

static void shape_text(char *buf, size_t size, int nd, const int64_t *shape)
{
    int n = snprintf(buf, size, "[");
    for (int j = 0; j < nd; j++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", j ? "," : "", (long long)shape[j]);
    snprintf(buf + n, size - (size_t)n, "]");
}

/* Output shape and dtype of an op from the definitions of SEMANTICS.md (f). */
static void op_finish(const ref_mesh *m, op *o)
{
    int n = group_size(m, o->axes);
    o->n = n;
    o->out_dtype = o->dtype;
    o->out_ndim = o->ndim;
    memcpy(o->out_shape, o->shape, sizeof o->shape);
    switch (o->k) {
    case K_PMEAN:
        if (o->dtype == SPMD_DTYPE_I32)
            o->out_dtype = SPMD_DTYPE_F32;
        break;
    case K_GATHER:
        if (o->tiled) {
            o->na = norm(o->axis, o->ndim);
            o->out_shape[o->na] *= n;
        } else {
            o->na = norm(o->axis, o->ndim + 1);
            o->out_ndim = o->ndim + 1;
            for (int j = 0, k = 0; j < o->out_ndim; j++)
                o->out_shape[j] = j == o->na ? n : o->shape[k++];
        }
        break;
    case K_SCATTER:
        o->na = norm(o->axis, o->ndim);
        if (o->tiled) {
            o->out_shape[o->na] /= n;
        } else {
            o->out_ndim = o->ndim - 1;
            for (int j = 0, k = 0; j < o->ndim; j++)
                if (j != o->na)
                    o->out_shape[k++] = o->shape[j];
        }
        break;
    case K_A2A:
        o->na = norm(o->axis, o->ndim);
        o->nc = norm(o->axis2, o->ndim);
        if (o->tiled) {
            o->out_shape[o->na] /= n;
            o->out_shape[o->nc] *= n;
        } else {
            int64_t rest[SPMD_MAX_RANK];
            for (int j = 0, k = 0; j < o->ndim; j++)
                if (j != o->na)
                    rest[k++] = o->shape[j];
            for (int j = 0, k = 0; j < o->ndim; j++)
                o->out_shape[j] = j == o->nc ? n : rest[k++];
        }
        break;
    case K_INDEX:
        o->out_dtype = SPMD_DTYPE_I32;
        o->out_ndim = 1;
        o->out_shape[0] = 2;
        break;
    default:
        break;
    }
    for (int j = 0; j < o->out_ndim; j++) /* error cases: keep the output describable */
        if (o->out_shape[j] < 1)
            o->out_shape[j] = 1;
    if (o->bad_out)
        o->out_shape[0]++;
    char in_s[64], out_s[64];
    shape_text(in_s, sizeof in_s, o->ndim, o->shape);
    shape_text(out_s, sizeof out_s, o->out_ndim, o->out_shape);
    int len = snprintf(o->what, sizeof o->what, "%s %s over '%s' (n=%d) %s%s -> %s%s", m->label,
                       kind_names[o->k], o->axes, n, spmd_dtype_name(o->dtype), in_s,
                       spmd_dtype_name(o->out_dtype), out_s);
    if (o->k == K_GATHER || o->k == K_SCATTER)
        len += snprintf(o->what + len, sizeof o->what - (size_t)len, " %s=%d tiled=%d",
                        o->k == K_GATHER ? "axis" : "dim", o->axis, o->tiled);
    if (o->k == K_A2A)
        len += snprintf(o->what + len, sizeof o->what - (size_t)len, " split=%d concat=%d tiled=%d",
                        o->axis, o->axis2, o->tiled);
    if (o->k == K_PERMUTE) {
        len += snprintf(o->what + len, sizeof o->what - (size_t)len, " pairs");
        for (int i = 0; i < o->npairs && i < 6; i++)
            len += snprintf(o->what + len, sizeof o->what - (size_t)len, " %d->%d", o->pairs[2 * i],
                            o->pairs[2 * i + 1]);
        if (o->npairs > 6)
            len += snprintf(o->what + len, sizeof o->what - (size_t)len, " ...");
    }
    snprintf(o->what + len, sizeof o->what - (size_t)len, "%s%s%s",
             o->from_input ? " (input)" : " (temporary)", o->in_place ? " in place" : "",
             o->big ? " big values" : "");
}

/* ---- the host reference ------------------------------------------------------------------ */

static double xval(const op *o, const grp *g, int k, int64_t i)
{
    return val(g->members[k], i, o->salt, o->dtype, o->big);
}

static double reduce_ref(const op *o, const grp *g, int64_t i)
{
    if (o->dtype == SPMD_DTYPE_I32 && o->k != K_PMEAN) {
        int64_t acc = (int64_t)xval(o, g, 0, i);
        for (int k = 1; k < g->n; k++) {
            int64_t x = (int64_t)xval(o, g, k, i);
            if (o->k == K_PSUM || o->k == K_SCATTER)
                acc += x;
            else if (o->k == K_PMAX)
                acc = x > acc ? x : acc;
            else
                acc = x < acc ? x : acc;
        }
        return (double)(int32_t)(uint32_t)(uint64_t)acc; /* int32 wraps */
    }
    double acc = xval(o, g, 0, i);
    for (int k = 1; k < g->n; k++) {
        double x = xval(o, g, k, i);
        if (o->k == K_PSUM || o->k == K_PMEAN || o->k == K_SCATTER)
            acc += x;
        else if (o->k == K_PMAX)
            acc = x > acc ? x : acc;
        else
            acc = x < acc ? x : acc;
    }
    return o->k == K_PMEAN ? acc / g->n : acc;
}

/* Source position of `pos` under the op's pairs (indices modulo n), or -1. */
static int source_of(const op *o, int n, int pos)
{
    int src = -1;
    for (int i = 0; i < o->npairs; i++)
        if (((o->pairs[2 * i + 1] % n) + n) % n == pos)
            src = ((o->pairs[2 * i] % n) + n) % n;
    return src;
}

/* The expected block of mesh position f (out_shape elements). */
static void reference(const ref_mesh *m, const op *o, int f, double *exp)
{
    grp g;
    group_of(m, o->axes, f, &g);
    int64_t count = num_elems(o->out_ndim, o->out_shape);
    int64_t oi[SPMD_MAX_RANK + 1], ii[SPMD_MAX_RANK + 1];
    int src = o->k == K_PERMUTE ? source_of(o, g.n, g.pos) : -1;
    for (int64_t e = 0; e < count; e++) {
        unravel(e, o->out_ndim, o->out_shape, oi);
        double r = 0;
        int k = 0;
        switch (o->k) {
        case K_PSUM:
        case K_PMEAN:
        case K_PMAX:
        case K_PMIN:
            r = reduce_ref(o, &g, e);
            break;
        case K_GATHER:
            if (o->tiled) {
                memcpy(ii, oi, sizeof oi);
                k = (int)(oi[o->na] / o->shape[o->na]);
                ii[o->na] = oi[o->na] % o->shape[o->na];
            } else {
                k = (int)oi[o->na];
                for (int j = 0, t = 0; j < o->out_ndim; j++)
                    if (j != o->na)
                        ii[t++] = oi[j];
            }
            r = xval(o, &g, k, ravel(o->ndim, o->shape, ii));
            break;
        case K_SCATTER:
            if (o->tiled) {
                memcpy(ii, oi, sizeof oi);
                ii[o->na] += g.pos * (o->shape[o->na] / g.n);
            } else {
                for (int j = 0, t = 0; j < o->ndim; j++)
                    ii[j] = j == o->na ? g.pos : oi[t++];
            }
            r = reduce_ref(o, &g, ravel(o->ndim, o->shape, ii));
            break;
        case K_PERMUTE:
            r = src < 0 ? 0.0 : xval(o, &g, src, e);
            break;
        case K_A2A:
            if (o->tiled) {
                int64_t chunk = o->shape[o->na] / g.n;
                int64_t ext_c = o->nc == o->na ? chunk : o->shape[o->nc];
                memcpy(ii, oi, sizeof oi);
                k = (int)(oi[o->nc] / ext_c);
                ii[o->nc] = oi[o->nc] % ext_c;
                ii[o->na] += g.pos * chunk;
            } else {
                int64_t rest[SPMD_MAX_RANK];
                k = (int)oi[o->nc];
                for (int j = 0, t = 0; j < o->out_ndim; j++)
                    if (j != o->nc)
                        rest[t++] = oi[j];
                for (int j = 0, t = 0; j < o->ndim; j++)
                    ii[j] = j == o->na ? g.pos : rest[t++];
            }
            r = xval(o, &g, k, ravel(o->ndim, o->shape, ii));
            break;
        case K_INDEX:
            r = e == 0 ? g.pos : g.n;
            break;
        }
        exp[e] = r;
    }
}

/* Relative tolerance of a result: exact except for means and half-precision sums. */
static double tolerance(const op *o)
{
    int sums = o->k == K_PSUM || o->k == K_PMEAN || o->k == K_SCATTER;
    if (o->out_dtype == SPMD_DTYPE_BF16 && sums)
        return 1.0 / 64;
    if (o->out_dtype == SPMD_DTYPE_F16 && sums)
        return 1.0 / 512;
    if (o->k == K_PMEAN)
        return o->out_dtype == SPMD_DTYPE_F64 ? 1e-13 : 1e-6;
    return 0;
}

/* ---- fn --------------------------------------------------------------------------------- */

/* `b` (shape (1, shape...)) seen as a block of `shape`; SPMD_ERR_INTERNAL on a layout surprise. */
static spmd_status view(const spmd_block *b, spmd_dtype t, int nd, const int64_t *shape,
                        spmd_block *v)
{
    if (b->dtype != t || b->ndim != nd + 1 || b->shape[0] != 1)
        return SPMD_ERR_INTERNAL;
    for (int j = 0; j < nd; j++)
        if (b->shape[j + 1] != shape[j])
            return SPMD_ERR_INTERNAL;
    memset(v, 0, sizeof *v);
    v->data = b->data;
    v->dtype = t;
    v->ndim = nd;
    memcpy(v->shape, shape, (size_t)nd * sizeof(int64_t));
    return SPMD_OK;
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    const coll_case *c = user;
    if (nout != c->nops)
        return SPMD_ERR_INTERNAL;
    int flat = spmd_mesh_device_position(spmd_ctx_mesh(ctx), spmd_ctx_device(ctx));
    char buf[32]; /* one_buffer: every op's axes, one after the other, in the same buffer */
    int pairs_buf[2 * MAX_PAIRS]; /* ... and every ppermute's pairs */
    for (int j = 0; j < c->nops; j++) {
        const op *o = &c->ops[j];
        const char *axes = o->axes;
        if (c->one_buffer) {
            memcpy(buf, o->axes, sizeof buf);
            axes = buf;
        }
        spmd_block x, y;
        spmd_status st = view(&out[j], o->out_dtype, o->out_ndim, o->out_shape, &y);
        if (st != SPMD_OK)
            return st;
        if (o->k == K_INDEX) {
            int index = -1, size = -1;
            st = spmd_axis_index(ctx, axes, &index);
            if (st == SPMD_OK)
                st = spmd_axis_size(ctx, axes, &size);
            ((int32_t *)y.data)[0] = index;
            ((int32_t *)y.data)[1] = size;
            if (st != SPMD_OK)
                return st;
            continue;
        }
        if (o->from_input) {
            if (o->input >= nin)
                return SPMD_ERR_INTERNAL;
            st = view(&in[o->input], o->dtype, o->ndim, o->shape, &x);
        } else {
            st = spmd_ctx_alloc(ctx, o->ndim, o->shape, o->dtype, &x);
            int64_t count = num_elems(o->ndim, o->shape);
            for (int64_t i = 0; st == SPMD_OK && i < count; i++)
                spmd_test_store(o->dtype, x.data, i, val(flat, i, o->salt, o->dtype, o->big));
        }
        if (st != SPMD_OK)
            return st;
        spmd_block *xin = &x;
        if (o->in_place) {
            memcpy(y.data, x.data, spmd_block_nbytes(&x));
            xin = &y;
        }
        switch (o->k) {
        case K_PSUM:
            st = spmd_psum(ctx, xin, &y, axes);
            break;
        case K_PMEAN:
            st = spmd_pmean(ctx, xin, &y, axes);
            break;
        case K_PMAX:
            st = spmd_pmax(ctx, xin, &y, axes);
            break;
        case K_PMIN:
            st = spmd_pmin(ctx, xin, &y, axes);
            break;
        case K_GATHER:
            st = spmd_all_gather(ctx, xin, &y, axes, o->axis, o->tiled);
            break;
        case K_SCATTER:
            st = spmd_psum_scatter(ctx, xin, &y, axes, o->axis, o->tiled);
            break;
        case K_PERMUTE:
            if (c->one_buffer)
                memcpy(pairs_buf, o->pairs, sizeof pairs_buf);
            st = spmd_ppermute(ctx, xin, &y, axes, c->one_buffer ? pairs_buf : o->pairs, o->npairs);
            break;
        case K_A2A:
            st = spmd_all_to_all(ctx, xin, &y, axes, o->axis, o->axis2, o->tiled);
            break;
        default:
            st = SPMD_ERR_INTERNAL;
        }
        if (st != SPMD_OK)
            return st;
    }
    return SPMD_OK;
}

/* ---- running a case ---------------------------------------------------------------------- */

static spmd_spec *row_spec(const ref_mesh *m)
{
    spmd_spec *s = NULL;
    assert_ok(spmd_spec_create(&s));
    assert_ok(spmd_spec_append(s, m->ndim, m->names));
    return s;
}

static void check_values(const op *o, int f, int dev, const void *data, double *exp,
                         const char *where)
{
    int64_t count = num_elems(o->out_ndim, o->out_shape);
    double tol = tolerance(o);
    int bad = 0;
    for (int64_t e = 0; e < count; e++) {
        double got = spmd_test_load(o->out_dtype, data, e);
        double want = exp[e];
        double lim = tol * (fabs(want) > 1 ? fabs(want) : 1);
        if (!(fabs(got - want) <= lim)) {
            if (bad++ < 3) {
                int64_t idx[SPMD_MAX_RANK + 1];
                char is[96];
                unravel(e, o->out_ndim, o->out_shape, idx);
                shape_text(is, sizeof is, o->out_ndim, idx);
                report("%s: device %d (mesh position %d)%s: element %s is %.17g, expected %.17g",
                       o->what, dev, f, where, is, got, want);
            }
        }
    }
    if (bad > 3)
        report("%s: device %d: %d of %lld elements wrong in all", o->what, dev, bad,
               (long long)count);
}

static void check_output(const coll_case *c, const op *o, const spmd_array *arr)
{
    const ref_mesh *m = c->m;
    int64_t count = num_elems(o->out_ndim, o->out_shape);
    size_t bytes = (size_t)count * spmd_dtype_size(o->out_dtype);
    double *exp = malloc((size_t)(count ? count : 1) * sizeof *exp);
    assert_non_null(exp);
    int local = 0;
    for (int f = 0; f < m->size; f++)
        local += owner(m->ids[f]) == me;
    if (spmd_array_num_shards(arr) != local)
        report("%s: output has %d addressable shards, expected %d", o->what,
               spmd_array_num_shards(arr), local);
    if (spmd_array_dtype(arr) != o->out_dtype)
        report("%s: output dtype %s", o->what, spmd_dtype_name(spmd_array_dtype(arr)));
    for (int s = 0; s < spmd_array_num_shards(arr); s++) {
        spmd_shard sh;
        spmd_status st = spmd_array_shard(arr, s, &sh);
        if (st != SPMD_OK) {
            report("%s: spmd_array_shard(%d): %s", o->what, s, spmd_last_error());
            continue;
        }
        int f = -1;
        for (int k = 0; k < m->size; k++)
            if (m->ids[k] == sh.device_id)
                f = k;
        if (f < 0 || owner(sh.device_id) != me) {
            report("%s: shard %d on device %d, not one of this process's mesh devices", o->what, s,
                   sh.device_id);
            continue;
        }
        if (sh.index.start[0] != f || sh.nbytes != bytes) {
            report("%s: device %d holds rows from %lld (%zu bytes), expected block %d (%zu bytes)",
                   o->what, sh.device_id, (long long)sh.index.start[0], sh.nbytes, f, bytes);
            continue;
        }
        reference(m, o, f, exp);
        check_values(o, f, sh.device_id, sh.data, exp, "");
    }
    /* In one process the whole result can also be fetched at once. */
    if (spmd_array_is_fully_addressable(arr)) {
        char *all = malloc(bytes * (size_t)m->size + 1);
        assert_non_null(all);
        spmd_status st = spmd_array_to_host(arr, all, bytes * (size_t)m->size);
        if (st != SPMD_OK)
            report("%s: spmd_array_to_host: %s", o->what, spmd_last_error());
        for (int f = 0; st == SPMD_OK && f < m->size; f++) {
            reference(m, o, f, exp);
            check_values(o, f, m->ids[f], all + (size_t)f * bytes, exp, " via spmd_array_to_host");
        }
        free(all);
    }
    free(exp);
}

/* Runs one shard_map call with every op of the case, and checks every output. */
static void run_case(coll_case *c)
{
    const ref_mesh *m = c->m;
    for (int j = 0; j < c->nops; j++)
        op_finish(m, &c->ops[j]);
    if (!mesh_has_me(m))
        return; /* processes outside the mesh do not call shard_map */
    spmd_spec *spec = row_spec(m);
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create(m->mesh, spec, &sh));
    spmd_array *inputs[MAX_OPS] = {NULL}, *outputs[MAX_OPS] = {NULL};
    const spmd_spec *in_specs[MAX_OPS], *out_specs[MAX_OPS];
    spmd_out_desc descs[MAX_OPS];
    int nin = 0, ok = 1;
    for (int j = 0; j < c->nops; j++) {
        op *o = &c->ops[j];
        in_specs[j] = out_specs[j] = spec;
        memset(&descs[j], 0, sizeof descs[j]);
        descs[j].ndim = o->out_ndim + 1;
        descs[j].shape[0] = m->size;
        memcpy(descs[j].shape + 1, o->out_shape, (size_t)o->out_ndim * sizeof(int64_t));
        descs[j].dtype = o->out_dtype;
        if (!o->from_input)
            continue;
        int64_t count = num_elems(o->ndim, o->shape), gshape[SPMD_MAX_RANK + 1];
        gshape[0] = m->size;
        memcpy(gshape + 1, o->shape, (size_t)o->ndim * sizeof(int64_t));
        size_t esz = spmd_dtype_size(o->dtype);
        char *host = malloc((size_t)(count * m->size) * esz);
        assert_non_null(host);
        for (int f = 0; f < m->size; f++)
            for (int64_t i = 0; i < count; i++)
                spmd_test_store(o->dtype, host + (size_t)(f * count) * esz, i,
                                val(f, i, o->salt, o->dtype, o->big));
        o->input = nin;
        spmd_status st = spmd_device_put(host, o->ndim + 1, gshape, o->dtype, sh, &inputs[nin]);
        free(host);
        if (st != SPMD_OK) {
            report("%s: spmd_device_put: %s", o->what, spmd_last_error());
            ok = 0;
        }
        nin++;
    }
    if (ok) {
        spmd_status st = spmd_shard_map(m->mesh, body, c, nin, inputs, in_specs, c->nops, descs,
                                        out_specs, NULL, outputs);
        if (st != c->expect) {
            report("%s ...(%d ops): spmd_shard_map returned %s, expected %s: %s", c->ops[0].what,
                   c->nops, spmd_status_name(st), spmd_status_name(c->expect), spmd_last_error());
        } else if (st != SPMD_OK) {
            if (c->expect_msg && !strstr(spmd_last_error(), c->expect_msg))
                report("%s: the message lacks \"%s\": %s", c->ops[0].what, c->expect_msg,
                       spmd_last_error());
            for (int j = 0; j < c->nops; j++)
                if (outputs[j])
                    report("%s: output %d is set although the call failed", c->ops[0].what, j);
        } else {
            for (int j = 0; j < c->nops; j++)
                check_output(c, &c->ops[j], outputs[j]);
        }
    }
    for (int j = 0; j < c->nops; j++) {
        spmd_array_destroy(inputs[j]);
        spmd_array_destroy(outputs[j]);
    }
    spmd_sharding_destroy(sh);
    spmd_spec_destroy(spec);
}

/* ---- meshes ------------------------------------------------------------------------------ */

typedef struct mesh_set {
    ref_mesh all;      /* 1-D 'x' over every device in id order */
    ref_mesh grid;     /* (processes, local devices) ('p', 'l') */
    ref_mesh trans;    /* (local devices, processes) ('a', 'b'): id = b*nlocal + a */
    ref_mesh shuffled; /* 2-D ('u', 'v') over every device in a shuffled order */
    ref_mesh cube;     /* 3-D (2, N/4, 2) ('x', 'y', 'z'), when N % 4 == 0 and N >= 8 */
    ref_mesh sub3;     /* 1-D 'x' over 3 devices spread over the processes, when N >= 3 */
    ref_mesh sub6;     /* (3, 2) ('a', 'b') over 6 shuffled devices, when N >= 6 */
    int has_cube, has_sub3, has_sub6;
} mesh_set;

static mesh_set ms;

static void shuffle(int *v, int n, spmd_test_rng *rng)
{
    for (int i = n - 1; i > 0; i--) {
        int k = spmd_test_rng_below(rng, i + 1);
        int t = v[i];
        v[i] = v[k];
        v[k] = t;
    }
}

static void meshes_create(void)
{
    spmd_test_rng rng = {0xC011EC7ull}; /* same seed everywhere: every process builds the same */
    const char *x[] = {"x"}, *pl[] = {"p", "l"}, *ab[] = {"a", "b"}, *uv[] = {"u", "v"},
               *xyz[] = {"x", "y", "z"};
    int ids[MAX_DEV];
    memset(&ms, 0, sizeof ms);
    spmd_test_mesh_build(&ms.all, "all", 1, (int[]){ndev}, x, NULL);
    spmd_test_mesh_build(&ms.grid, "grid", 2, (int[]){nproc, nlocal}, pl, NULL);
    for (int a = 0; a < nlocal; a++)
        for (int b = 0; b < nproc; b++)
            ids[a * nproc + b] = b * nlocal + a;
    spmd_test_mesh_build(&ms.trans, "trans", 2, (int[]){nlocal, nproc}, ab, ids);

    for (int i = 0; i < ndev; i++)
        ids[i] = i;
    shuffle(ids, ndev, &rng);
    int r = 1;
    for (int d = 1; d * d <= ndev; d++)
        if (ndev % d == 0)
            r = d;
    spmd_test_mesh_build(&ms.shuffled, "shuffled", 2, (int[]){r, ndev / r}, uv, ids);

    if (ndev % 4 == 0 && ndev >= 8) {
        ms.has_cube = 1;
        spmd_test_mesh_build(&ms.cube, "cube", 3, (int[]){2, ndev / 4, 2}, xyz, NULL);
    }
    if (ndev >= 3) {
        ms.has_sub3 = 1;
        int three[3] = {ndev - 1, 0, ndev / 2};
        spmd_test_mesh_build(&ms.sub3, "sub3", 1, (int[]){3}, x, three);
    }
    if (ndev >= 6) {
        ms.has_sub6 = 1;
        for (int i = 0; i < ndev; i++)
            ids[i] = i;
        shuffle(ids, ndev, &rng);
        spmd_test_mesh_build(&ms.sub6, "sub6", 2, (int[]){3, 2}, ab, ids);
    }
}

static void meshes_destroy(void)
{
    spmd_mesh_destroy(ms.all.mesh);
    spmd_mesh_destroy(ms.grid.mesh);
    spmd_mesh_destroy(ms.trans.mesh);
    spmd_mesh_destroy(ms.shuffled.mesh);
    spmd_mesh_destroy(ms.cube.mesh);
    spmd_mesh_destroy(ms.sub3.mesh);
    spmd_mesh_destroy(ms.sub6.mesh);
}

/* ---- suites ------------------------------------------------------------------------------- */

static const spmd_dtype main_dtypes[] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_I32};

static void add_reductions(coll_case *c, const char *axes, spmd_dtype t)
{
    add(c, K_PSUM, axes, t, 2, 2, 3)->from_input = 1;
    add(c, K_PSUM, axes, t, 0);               /* rank 0 */
    op *o = add(c, K_PSUM, axes, t, 2, 2, 3); /* in place */
    o->from_input = 1;
    o->in_place = 1;
    add(c, K_PMAX, axes, t, 2, 2, 3)->from_input = 1;
    add(c, K_PMAX, axes, t, 1, 5);
    add(c, K_PMIN, axes, t, 2, 2, 3)->from_input = 1;
    add(c, K_PMIN, axes, t, 1, 1);
    add(c, K_PMEAN, axes, t, 2, 2, 3)->from_input = 1;
    add(c, K_PMEAN, axes, t, 0);
    if (t == SPMD_DTYPE_I32)
        add(c, K_PSUM, axes, t, 2, 4, 5)->big = 1; /* int32 sums wrap */
}

static void add_gathers(coll_case *c, const char *axes, spmd_dtype t)
{
    add_gather(c, axes, t, 0, 0, 2, 2, 3)->from_input = 1;
    add_gather(c, axes, t, 1, 0, 2, 2, 3)->from_input = 1;
    add_gather(c, axes, t, -1, 0, 2, 2, 3)->from_input = 1; /* new last axis */
    add_gather(c, axes, t, 2, 0, 2, 2, 3);                  /* the same, spelled positive */
    add_gather(c, axes, t, 0, 1, 2, 2, 3)->from_input = 1;
    add_gather(c, axes, t, -1, 1, 2, 2, 3)->from_input = 1;
    add_gather(c, axes, t, 0, 0, 0);    /* rank 0 -> (n) */
    add_gather(c, axes, t, 0, 1, 1, 1); /* (1) -> (n) */
    add_gather(c, axes, t, 1, 1, 3, 2, 2, 3);
}

static void add_scatters(coll_case *c, const char *axes, spmd_dtype t, int n)
{
    add_scatter(c, axes, t, 0, 0, 2, n, 3)->from_input = 1;
    add_scatter(c, axes, t, 1, 0, 2, 2, n)->from_input = 1;
    add_scatter(c, axes, t, -1, 0, 3, 2, 3, n);
    add_scatter(c, axes, t, -3, 0, 3, n, 2, 2);
    add_scatter(c, axes, t, 0, 0, 1, n); /* -> rank 0 */
    add_scatter(c, axes, t, 0, 1, 2, 2 * n, 3)->from_input = 1;
    add_scatter(c, axes, t, 1, 1, 2, 3, 2 * n)->from_input = 1;
    add_scatter(c, axes, t, -1, 1, 3, 2, 3, n);
    add_scatter(c, axes, t, -2, 1, 2, 3 * n, 2);
}

static void add_permutes(coll_case *c, const char *axes, spmd_dtype t, int n)
{
    int pairs[2 * MAX_PAIRS] = {0}, np = 0;
    for (int i = 0; i < n; i++) { /* i -> i+1, the last written as n (indices are mod n) */
        pairs[2 * np] = i;
        pairs[2 * np++ + 1] = i + 1;
    }
    add_permute(c, axes, t, np, pairs, 2, 2, 3)->from_input = 1;
    op *o = add_permute(c, axes, t, np, pairs, 2, 2, 3);
    o->from_input = 1;
    o->in_place = 1;
    np = 0;
    pairs[2 * np] = 1; /* partial: 1 -> 0 and 2 -> 1; the others receive zeros */
    pairs[2 * np++ + 1] = 0;
    if (n >= 3) {
        pairs[2 * np] = n + 2;
        pairs[2 * np++ + 1] = 1;
    }
    add_permute(c, axes, t, np, pairs, 2, 3, 2)->from_input = 1;
    np = 0;
    for (int i = 0; i < n; i++) { /* reversal */
        pairs[2 * np] = i;
        pairs[2 * np++ + 1] = n - 1 - i;
    }
    add_permute(c, axes, t, np, pairs, 1, 7);
    add_permute(c, axes, t, 0, pairs, 0); /* no pairs: zeros everywhere */
}

static void add_all_to_alls(coll_case *c, const char *axes, spmd_dtype t, int n)
{
    add_a2a(c, axes, t, 0, 0, 0, 2, n, 3)->from_input = 1;
    add_a2a(c, axes, t, 0, 1, 0, 2, n, 3)->from_input = 1;
    add_a2a(c, axes, t, 1, 0, 0, 2, 2, n)->from_input = 1;
    add_a2a(c, axes, t, 1, 2, 0, 3, 2, n, 3);
    add_a2a(c, axes, t, -1, -2, 0, 3, 2, 3, n);
    add_a2a(c, axes, t, 0, 1, 1, 2, 2 * n, 3)->from_input = 1;
    add_a2a(c, axes, t, 1, 0, 1, 2, 2, 2 * n)->from_input = 1;
    add_a2a(c, axes, t, 0, 0, 1, 2, 2 * n, 3);
    add_a2a(c, axes, t, 2, 0, 1, 3, 2, 3, 2 * n);
    add_a2a(c, axes, t, 1, 1, 1, 2, 3, n); /* tiled, split == concat */
}

/* Every collective over `axes` of m for one dtype, in one shard_map call. */
static void suite(const ref_mesh *m, const char *axes, spmd_dtype t)
{
    static coll_case c;
    int n = group_size(m, axes);
    case_init(&c, m);
    add_reductions(&c, axes, t);
    add_gathers(&c, axes, t);
    add_scatters(&c, axes, t, n);
    if (axes_in_mesh_order(m, axes))
        add_permutes(&c, axes, t, n);
    add_all_to_alls(&c, axes, t, n);
    add(&c, K_INDEX, axes, SPMD_DTYPE_I32, 0);
    run_case(&c);
}

/* f16 and bf16: sums accumulated in f32 (checked with a tolerance), moves exact. */
static void suite_half(const ref_mesh *m, const char *axes)
{
    static coll_case c;
    int n = group_size(m, axes);
    case_init(&c, m);
    const spmd_dtype halves[] = {SPMD_DTYPE_F16, SPMD_DTYPE_BF16};
    for (int i = 0; i < 2; i++) {
        spmd_dtype t = halves[i];
        add(&c, K_PSUM, axes, t, 2, 2, 3)->from_input = 1;
        add(&c, K_PSUM, axes, t, 0);
        add(&c, K_PMAX, axes, t, 2, 3, 2)->from_input = 1;
        add(&c, K_PMIN, axes, t, 1, 4);
        add(&c, K_PMEAN, axes, t, 2, 2, 3);
        add_gather(&c, axes, t, 0, 0, 2, 2, 3)->from_input = 1;
        add_gather(&c, axes, t, -1, 0, 2, 2, 3);
        add_gather(&c, axes, t, -1, 1, 2, 2, 3)->from_input = 1;
        add_scatter(&c, axes, t, 0, 1, 2, 2 * n, 3)->from_input = 1;
        add_scatter(&c, axes, t, 1, 0, 2, 3, n);
    }
    run_case(&c);
}

/* Blocks above 64 KiB, so that the reductions split the work over the local threads. */
static void suite_large(const ref_mesh *m, const char *axes)
{
    static coll_case c;
    int n = group_size(m, axes);
    case_init(&c, m);
    for (int i = 0; i < 3; i++) {
        spmd_dtype t = main_dtypes[i];
        add(&c, K_PSUM, axes, t, 1, LARGE)->from_input = i == 0;
        op *o = add(&c, K_PSUM, axes, t, 2, 4, LARGE / 4);
        o->in_place = 1;
        add(&c, K_PMAX, axes, t, 1, LARGE);
        add(&c, K_PMIN, axes, t, 1, LARGE)->from_input = i == 1;
        add(&c, K_PMEAN, axes, t, 1, LARGE);
        add_scatter(&c, axes, t, 0, 1, 1, LARGE);
        add_gather(&c, axes, t, 0, 1, 1, LARGE / n / 4);
        if (axes_in_mesh_order(m, axes)) {
            int pairs[2 * MAX_PAIRS] = {0}, np = 0;
            for (int k = 0; k < n; k++) {
                pairs[2 * np] = k;
                pairs[2 * np++ + 1] = k + 1;
            }
            add_permute(&c, axes, t, np, pairs, 1, LARGE);
        }
        add_a2a(&c, axes, t, 0, 0, 1, 1, LARGE);
    }
    add(&c, K_PSUM, axes, SPMD_DTYPE_BF16, 1, 2 * LARGE);
    add(&c, K_PSUM, axes, SPMD_DTYPE_F16, 1, 2 * LARGE)->in_place = 1;
    run_case(&c);
}

/* Large gathers, scatters and all_to_alls in every layout: straight into the blocks where
 * MPI can place them (contiguous and strided runs), staged where it cannot. */
static void suite_large_layouts(const ref_mesh *m, const char *axes)
{
    static coll_case c;
    int n = group_size(m, axes), h = LARGE / 2 / n; /* LARGE is divisible by 2n */
    case_init(&c, m);
    for (int i = 0; i < 3; i++) {
        spmd_dtype t = main_dtypes[i];
        add_gather(&c, axes, t, 0, 1, 1, LARGE / n)->from_input = 1;
        add_gather(&c, axes, t, 1, 1, 2, 2, h);                 /* strided runs */
        add_gather(&c, axes, t, 1, 0, 2, 2, h)->from_input = 1; /* stacked in the middle */
        add_gather(&c, axes, t, 0, 0, 2, 3, LARGE / 3 / n);
        add_scatter(&c, axes, t, 0, 1, 2, 2 * n, h)->from_input = 1;
        add_scatter(&c, axes, t, 1, 1, 2, 2, LARGE / 2); /* chunks strided: staged */
        add_scatter(&c, axes, t, 0, 0, 2, n, LARGE / n);
        add_a2a(&c, axes, t, 1, 0, 1, 2, 2, LARGE / 2)->from_input = 1;
        add_a2a(&c, axes, t, 0, 1, 0, 2, n, LARGE / n);
        add_a2a(&c, axes, t, 1, 1, 1, 3, 2, LARGE / 4, 2);
        add_a2a(&c, axes, t, 0, 0, 1, 2, 2 * n, LARGE / 2 / n)->in_place = 1;
    }
    add_gather(&c, axes, SPMD_DTYPE_F32, -1, 0, 1, LARGE / n); /* element runs */
    add_gather(&c, axes, SPMD_DTYPE_BF16, 0, 1, 1, 2 * LARGE / n);
    /* chunks of several pieces, the pieces crossing rows of the chunk */
    add_scatter(&c, axes, SPMD_DTYPE_F32, 1, 1, 2, 3, 2 * LARGE);
    add_scatter(&c, axes, SPMD_DTYPE_BF16, 1, 1, 2, 3, 2 * LARGE)->from_input = 1;
    run_case(&c);
}

static void run_mesh(const ref_mesh *m, const char *const *axes_sets, int nsets)
{
    for (int s = 0; s < nsets; s++)
        for (int i = 0; i < 3; i++)
            suite(m, axes_sets[s], main_dtypes[i]);
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_mesh_all(void **state)
{
    (void)state;
    const char *sets[] = {"x"};
    run_mesh(&ms.all, sets, 1);
    finish_test();
}

static void test_mesh_grid(void **state)
{
    (void)state;
    const char *sets[] = {"p", "l", "p,l", "l,p"};
    run_mesh(&ms.grid, sets, 4);
    finish_test();
}

static void test_mesh_transposed(void **state)
{
    (void)state;
    const char *sets[] = {"a", "b", "a,b", "b,a"};
    run_mesh(&ms.trans, sets, 4);
    finish_test();
}

static void test_mesh_shuffled(void **state)
{
    (void)state;
    const char *sets[] = {"u", "v", "v,u"};
    run_mesh(&ms.shuffled, sets, 3);
    finish_test();
}

static void test_mesh_cube(void **state)
{
    (void)state;
    if (!ms.has_cube)
        skip();
    const char *sets[] = {"y", "x,z", "z,x", "x,y,z", "z,y,x"};
    run_mesh(&ms.cube, sets, 5);
    finish_test();
}

static void test_mesh_subsets(void **state)
{
    (void)state;
    if (!ms.has_sub3)
        skip();
    const char *x[] = {"x"};
    run_mesh(&ms.sub3, x, 1);
    if (ms.has_sub6) {
        const char *sets[] = {"a", "b", "a,b", "b,a"};
        run_mesh(&ms.sub6, sets, 4);
    }
    finish_test();
}

static void test_axis_index(void **state)
{
    (void)state;
    static coll_case c;
    const ref_mesh *meshes[] = {&ms.all,  &ms.grid, &ms.trans, &ms.shuffled,
                                &ms.cube, &ms.sub3, &ms.sub6};
    const int present[] = {1, 1, 1, 1, ms.has_cube, ms.has_sub3, ms.has_sub6};
    for (int i = 0; i < 7; i++) {
        if (!present[i])
            continue;
        const ref_mesh *m = meshes[i];
        case_init(&c, m);
        /* every ordered selection of 1..ndim distinct axes */
        for (int a = 0; a < m->ndim; a++) {
            add(&c, K_INDEX, m->names[a], SPMD_DTYPE_I32, 0);
            for (int b = 0; b < m->ndim; b++) {
                if (b == a)
                    continue;
                char two[32];
                snprintf(two, sizeof two, "%s,%s", m->names[a], m->names[b]);
                add(&c, K_INDEX, two, SPMD_DTYPE_I32, 0);
                for (int d = 0; d < m->ndim; d++) {
                    if (d == a || d == b)
                        continue;
                    char three[32];
                    snprintf(three, sizeof three, "%s,%s,%s", m->names[a], m->names[b],
                             m->names[d]);
                    add(&c, K_INDEX, three, SPMD_DTYPE_I32, 0);
                }
            }
        }
        run_case(&c);
    }
    finish_test();
}

static void test_half_precision(void **state)
{
    (void)state;
    suite_half(&ms.all, "x");
    suite_half(&ms.grid, "p");
    suite_half(&ms.grid, "l");
    suite_half(&ms.grid, "l,p");
    suite_half(&ms.trans, "b,a");
    suite_half(&ms.shuffled, "u,v");
    if (ms.has_sub6)
        suite_half(&ms.sub6, "b");
    finish_test();
}

static void test_large_blocks(void **state)
{
    (void)state;
    suite_large(&ms.all, "x");
    suite_large(&ms.grid, "p,l");
    suite_large(&ms.grid, "l");
    suite_large(&ms.trans, "b,a");
    suite_large_layouts(&ms.all, "x");
    suite_large_layouts(&ms.grid, "p,l");
    suite_large_layouts(&ms.grid, "l,p");
    suite_large_layouts(&ms.grid, "p");
    suite_large_layouts(&ms.trans, "b,a");
    if (ms.has_sub3)
        suite_large(&ms.sub3, "x");
    finish_test();
}

/* Several collectives in one fn whose axes come from the same char buffer, rewritten between
 * calls: the library must read the text each time, not remember it by address. Only ops whose
 * shapes do not depend on the group, so that a stale group shows as wrong values. */
static void test_axes_in_reused_buffer(void **state)
{
    (void)state;
    static coll_case c;
    case_init(&c, &ms.grid);
    c.one_buffer = 1;
    add(&c, K_PSUM, "p", SPMD_DTYPE_F32, 2, 2, 3);
    add(&c, K_PSUM, "l", SPMD_DTYPE_F32, 2, 2, 3);
    add(&c, K_PSUM, "p,l", SPMD_DTYPE_I32, 2, 2, 3);
    add(&c, K_PMAX, "l", SPMD_DTYPE_F64, 1, 3);
    add(&c, K_PMIN, "p", SPMD_DTYPE_F64, 1, 3);
    add(&c, K_INDEX, "l", SPMD_DTYPE_I32, 0);
    add(&c, K_INDEX, "p", SPMD_DTYPE_I32, 0);
    run_case(&c);
    finish_test();
}

/* ppermutes in one fn whose pairs come from the same int buffer, rewritten between calls, over
 * groups of different sizes and over two groups of one size with the same pairs: the library
 * must read the pairs each time and check them for the group at hand, not remember them by
 * address or by their positions alone. */
static void test_pairs_in_reused_buffer(void **state)
{
    (void)state;
    static coll_case c;
    case_init(&c, &ms.grid);
    c.one_buffer = 1;
    const char *axes_sets[] = {"p", "p", "l", "p,l", "l", "p"};
    for (int a = 0; a < 6; a++) {
        int n = group_size(&ms.grid, axes_sets[a]), pairs[2 * MAX_PAIRS], np = 0;
        for (int i = 0; i < n; i++) { /* a shift by a + 1, then a reversal */
            pairs[2 * np] = i;
            pairs[2 * np++ + 1] = (i + a + 1) % n;
        }
        add_permute(&c, axes_sets[a], SPMD_DTYPE_F32, np, pairs, 2, 2, 3);
        add_permute(&c, axes_sets[a], SPMD_DTYPE_F32, np, pairs, 2, 2, 3); /* the same again */
        np = 0;
        for (int i = 0; i < n; i++) {
            pairs[2 * np] = i;
            pairs[2 * np++ + 1] = n - 1 - i;
        }
        add_permute(&c, axes_sets[a], SPMD_DTYPE_I32, np, pairs, 1, 5);
    }
    /* one shift over 'l', then the same pairs over 'p' (alike where both have as many devices) */
    int n = group_size(&ms.grid, "l"), pairs[2 * MAX_PAIRS];
    for (int i = 0; i < n; i++) {
        pairs[2 * i] = i;
        pairs[2 * i + 1] = i + 1; /* n wraps to 0 */
    }
    add_permute(&c, "l", SPMD_DTYPE_F64, n, pairs, 1, 4);
    if (group_size(&ms.grid, "p") == n)
        add_permute(&c, "p", SPMD_DTYPE_F64, n, pairs, 1, 4);
    run_case(&c);
    finish_test();
}

/* Each error case fails identically on every device, so the call returns that error; a normal
 * call on the same mesh right after must work (nothing left half-done, nothing hangs). A good
 * collective comes first: `first`, its axes and pairs in the buffer the failing op's overwrite,
 * else a psum. */
static void error_case_after(const ref_mesh *m, spmd_status expect, const char *msg,
                             const op *first, op proto)
{
    static coll_case c;
    case_init(&c, m);
    c.expect = expect;
    c.expect_msg = msg;
    if (first) {
        c.one_buffer = 1;
        c.ops[c.nops++] = *first;
    } else {
        add(&c, K_PSUM, m->names[0], SPMD_DTYPE_F32, 1, 3);
    }
    c.ops[c.nops++] = proto;
    run_case(&c);

    case_init(&c, m);
    add(&c, K_PSUM, m->names[m->ndim - 1], SPMD_DTYPE_F32, 2, 2, 3)->from_input = 1;
    add_gather(&c, m->names[0], SPMD_DTYPE_I32, 0, 1, 1, 2);
    run_case(&c);
}

static void error_case(const ref_mesh *m, spmd_status expect, const char *msg, op proto)
{
    error_case_after(m, expect, msg, NULL, proto);
}

static op proto_op(kind k, const char *axes, spmd_dtype t, int ndim, const int64_t *shape)
{
    op o;
    memset(&o, 0, sizeof o);
    o.k = k;
    snprintf(o.axes, sizeof o.axes, "%s", axes);
    o.dtype = t;
    o.ndim = ndim;
    memcpy(o.shape, shape, (size_t)ndim * sizeof(int64_t));
    o.salt = 99;
    return o;
}

static void test_errors(void **state)
{
    (void)state;
    const ref_mesh *g = &ms.grid;
    int nl = group_size(g, "l"), nall = g->size;
    const int64_t s23[] = {2, 3};

    /* ppermute over several axes that are not in mesh order */
    op o = proto_op(K_PERMUTE, "l,p", SPMD_DTYPE_F32, 2, s23);
    o.npairs = 1;
    o.pairs[0] = 0;
    o.pairs[1] = 1;
    error_case(g, SPMD_ERR_INVALID_ARGUMENT, "order", o);
    o = proto_op(K_PERMUTE, "b,a", SPMD_DTYPE_I32, 2, s23);
    o.npairs = 0;
    error_case(&ms.trans, SPMD_ERR_INVALID_ARGUMENT, "order", o);

    /* ppermute with a repeated destination: 0 -> 0 and 1 -> n, which is 0 modulo n */
    o = proto_op(K_PERMUTE, "p,l", SPMD_DTYPE_F64, 2, s23);
    o.npairs = 2;
    o.pairs[0] = 0;
    o.pairs[1] = 0;
    o.pairs[2] = 1;
    o.pairs[3] = nall;
    error_case(g, SPMD_ERR_INVALID_ARGUMENT, "unique", o);
    /* ... right after a good ppermute of as many pairs from the same buffer, over the same
     * group: what a device checked last must not vouch for the pairs now there */
    if (nall >= 2) {
        op good = o;
        good.pairs[1] = 1;
        good.pairs[3] = 0;
        error_case_after(g, SPMD_ERR_INVALID_ARGUMENT, "unique", &good, o);
    }

    /* untiled psum_scatter whose dimension is not the group size */
    o = proto_op(K_SCATTER, "l", SPMD_DTYPE_F32, 2, (int64_t[]){nl + 1, 2});
    error_case(g, SPMD_ERR_SHAPE, NULL, o);
    /* tiled psum_scatter whose dimension is not divisible by the group size (n >= 2 only) */
    if (nall >= 2) {
        o = proto_op(K_SCATTER, "p,l", SPMD_DTYPE_I32, 2, (int64_t[]){2, 2 * nall + 1});
        o.axis = 1;
        o.tiled = 1;
        error_case(g, SPMD_ERR_SHAPE, NULL, o);
    }
    /* untiled all_to_all whose split dimension is not the group size */
    o = proto_op(K_A2A, "p,l", SPMD_DTYPE_F32, 2, (int64_t[]){nall + 1, 3});
    error_case(g, SPMD_ERR_SHAPE, NULL, o);
    /* an axis the mesh does not have */
    o = proto_op(K_PSUM, "q", SPMD_DTYPE_F32, 2, s23);
    error_case(g, SPMD_ERR_SPEC, "q", o);
    /* an output block of the wrong shape */
    o = proto_op(K_PSUM, "l", SPMD_DTYPE_F32, 2, s23);
    o.bad_out = 1;
    error_case(g, SPMD_ERR_SHAPE, NULL, o);
    o = proto_op(K_GATHER, "p", SPMD_DTYPE_F32, 2, s23);
    o.bad_out = 1;
    error_case(g, SPMD_ERR_SHAPE, NULL, o);
    /* gather axis out of range */
    o = proto_op(K_GATHER, "p", SPMD_DTYPE_F32, 2, s23);
    o.axis = 3;
    error_case(g, SPMD_ERR_INVALID_ARGUMENT, NULL, o);
    finish_test();
}

/* An argument error that every device makes, reached while sibling devices of the same process
 * may still be inside earlier collectives that span processes: the call must return the error
 * on every process, and the mesh must work afterwards; nothing may wait forever. Last, because
 * a hang here stops the run. */
static void test_error_after_cross_process_collectives(void **state)
{
    (void)state;
    static coll_case c;
    for (int rep = 0; rep < 4; rep++) {
        const ref_mesh *m = rep % 2 ? &ms.trans : &ms.grid;
        const char *span = rep % 2 ? "b" : "p"; /* the axis that spans processes */
        case_init(&c, m);
        c.expect = SPMD_ERR_SHAPE;
        for (int k = 0; k < 4; k++)
            add(&c, K_PSUM, span, SPMD_DTYPE_F32, 2, 2, 3);
        add(&c, K_PMAX, m->names[0], SPMD_DTYPE_I32, 1, 5);
        int n = group_size(m, span);
        add_scatter(&c, span, SPMD_DTYPE_F32, 0, 0, 2, n + 1, 2); /* n + 1 != n: SHAPE */
        run_case(&c);

        case_init(&c, m);
        add(&c, K_PSUM, span, SPMD_DTYPE_F32, 2, 2, 3)->from_input = 1;
        add_gather(&c, m->names[1], SPMD_DTYPE_I32, 0, 1, 1, 2);
        run_case(&c);
    }
    finish_test();
}

int main(void)
{
    spmd_test_init();
    nproc = spmd_process_count();
    nlocal = spmd_local_device_count();
    me = spmd_process_index();
    ndev = spmd_device_count();
    if (ndev > MAX_DEV || ndev != nproc * nlocal) {
        fprintf(stderr, "test_collectives: needs at most %d devices, %d per process\n", MAX_DEV,
                nlocal);
        return spmd_test_finish(1);
    }
    meshes_create();
    /* For debugging: run only the tests matching SPMD_TEST_FILTER, skip SPMD_TEST_SKIP. */
    const char *filter = getenv("SPMD_TEST_FILTER"), *skip_filter = getenv("SPMD_TEST_SKIP");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    if (skip_filter && *skip_filter)
        cmocka_set_skip_filter(skip_filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_axis_index),
        cmocka_unit_test(test_mesh_all),
        cmocka_unit_test(test_mesh_grid),
        cmocka_unit_test(test_mesh_transposed),
        cmocka_unit_test(test_mesh_shuffled),
        cmocka_unit_test(test_mesh_cube),
        cmocka_unit_test(test_mesh_subsets),
        cmocka_unit_test(test_half_precision),
        cmocka_unit_test(test_large_blocks),
        cmocka_unit_test(test_axes_in_reused_buffer),
        cmocka_unit_test(test_pairs_in_reused_buffer),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_error_after_cross_process_collectives),
    };
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    meshes_destroy();
    return spmd_test_finish(failures);
}
