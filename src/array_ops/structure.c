/* Ops that move elements within an array: transpose, reshape, slice, take, concatenate; softmax
 * along an axis; the sharding assertion and the explicit change of layout. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "array_ops/driver.h"
#include "array/array_impl.h"
#include "runtime/base/check.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"

enum { S_TRANSPOSE, S_RESHAPE, S_SLICE, S_TAKE, S_CONCAT, S_SOFTMAX };

typedef struct structure_args {
    int kind;
    int perm[SPMD_MAX_RANK];
    int64_t start[SPMD_MAX_RANK];
    int gather[SPMD_MAX_RANK];
    int axis;
    spmd_take_mode mode;
    char axes[SPMD__AXES_TEXT]; /* softmax: the axis's mesh axes */
    spmd__xtype x, body;
} structure_args;

/* softmax over a sharded axis: max and sum over the group, in double, rounded once */
static spmd_status softmax_sharded(spmd_ctx *ctx, const structure_args *w, const spmd_block *in,
                                   spmd_block *out)
{
    int d = w->axis;
    spmd_block v, m, s;
    int64_t kept[SPMD_MAX_RANK];
    memcpy(kept, in->shape, sizeof kept);
    kept[d] = 1;
    SPMD_CHECK(spmd_ctx_alloc(ctx, in->ndim, in->shape, SPMD_DTYPE_F64, &v));
    SPMD_CHECK(spmd_op_copy(ctx, in, &v));
    SPMD_CHECK(spmd_ctx_alloc(ctx, in->ndim, kept, SPMD_DTYPE_F64, &m));
    SPMD_CHECK(spmd_ctx_alloc(ctx, in->ndim, kept, SPMD_DTYPE_F64, &s));
    double *x = v.data, *mx = m.data, *sx = s.data;
    int64_t inner = 1, n = in->shape[d], lines = spmd_block_size(&m);
    for (int k = d + 1; k < in->ndim; k++)
        inner *= in->shape[k];
    for (int64_t l = 0; l < lines; l++) { /* a NaN counts as +inf: the line becomes NaN */
        int64_t base = l / inner * n * inner + l % inner;
        double best = -INFINITY;
        for (int64_t k = 0; k < n; k++) {
            double e = x[base + k * inner];
            best = isnan(e) ? INFINITY : (e > best ? e : best);
        }
        mx[l] = best;
    }
    SPMD_CHECK(spmd_pmax(ctx, &m, &m, w->axes));
    for (int64_t l = 0; l < lines; l++) {
        int64_t base = l / inner * n * inner + l % inner;
        double sum = 0;
        for (int64_t k = 0; k < n; k++)
            sum += exp(x[base + k * inner] - mx[l]);
        sx[l] = sum;
    }
    SPMD_CHECK(spmd_psum(ctx, &s, &s, w->axes));
    for (int64_t l = 0; l < lines; l++) {
        int64_t base = l / inner * n * inner + l % inner;
        for (int64_t k = 0; k < n; k++) {
            double *e = &x[base + k * inner];
            *e = isinf(mx[l]) ? NAN : exp(*e - mx[l]) / sx[l];
        }
    }
    return spmd_op_copy(ctx, &v, out);
}

static spmd_status structure_fn(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                spmd_block *out, void *user)
{
    const structure_args *w = user;
    (void)nout;
    switch (w->kind) {
    case S_TRANSPOSE:
        return spmd_op_transpose(ctx, &in[0], w->perm, &out[0]);
    case S_RESHAPE: {
        spmd_block view = spmd__block_view(&in[0], out[0].ndim, out[0].shape);
        return spmd_op_copy(ctx, &view, &out[0]);
    }
    case S_TAKE:
        return spmd_op_take(ctx, &in[0], &in[1], w->axis, w->mode, &out[0]);
    case S_CONCAT:
        return spmd_op_concatenate(ctx, nin, in, w->axis, &out[0]);
    case S_SOFTMAX:
        if (!w->axes[0])
            return spmd_op_softmax(ctx, &in[0], w->axis, &out[0]);
        return softmax_sharded(ctx, w, &in[0], &out[0]);
    default:
        break;
    }
    /* slice: gather the sharded dimensions that are cut, then cut this device's box */
    spmd_block x = in[0];
    int64_t out_start[SPMD_MAX_RANK], local[SPMD_MAX_RANK];
    SPMD_CHECK(spmd__xop_block_start(ctx, &w->body, out_start));
    for (int d = 0; d < x.ndim; d++)
        local[d] = w->x.naxes[d] && !w->gather[d] ? 0 : w->start[d] + out_start[d];
    SPMD_CHECK(spmd__xop_gather_dims(ctx, &w->x, w->gather, &x));
    return spmd_op_slice(ctx, &x, local, &out[0]);
}

static spmd_status finish(spmd__xop *op, structure_args *w, const spmd__xtype *body,
                          const spmd_sharding *out_sharding, spmd_array **out)
{
    spmd__xtype req;
    int given, done;
    SPMD_CHECK(spmd__xop_requested(op, out_sharding, body, &req, &given));
    w->body = *body;
    SPMD_CHECK(spmd__xop_plan(op, body, &req, &done, out));
    if (done)
        return SPMD_OK;
    op->fn = structure_fn;
    op->user = w;
    return spmd__xop_run(op, out);
}

spmd_status spmd_array_transpose(spmd_array *x, const int *perm, const spmd_sharding *out_sharding,
                                 const spmd_op_options *opts, spmd_array **out)
{
    const char *api = "spmd_array_transpose";
    spmd__xop op;
    SPMD_CHECK(spmd__xop_begin(&op, api, "transpose", opts, out));
    SPMD_CHECK(spmd__xop_operand(&op, x, "x"));
    structure_args w;
    memset(&w, 0, sizeof w);
    w.kind = S_TRANSPOSE;
    w.x = op.in_type[0];
    int seen[SPMD_MAX_RANK] = {0};
    for (int j = 0; j < x->ndim; j++) {
        w.perm[j] = perm ? perm[j] : x->ndim - 1 - j;
        SPMD_REQUIRE(
            w.perm[j] >= 0 && w.perm[j] < x->ndim && !seen[w.perm[j]], SPMD_ERR_INVALID_ARGUMENT,
            "%s: perm[%d] is %d; perm must list 0 .. %d once each", api, j, w.perm[j], x->ndim - 1);
        seen[w.perm[j]] = 1;
    }
    spmd__xop_describe(&op, "transpose");
    spmd__xop_describe_more(&op, ", perm (");
    for (int j = 0; j < x->ndim; j++)
        spmd__xop_describe_more(&op, "%d,", w.perm[j]);
    spmd__xop_describe_more(&op, ")");
    spmd__xtype body = w.x;
    for (int j = 0; j < x->ndim; j++) {
        body.shape[j] = w.x.shape[w.perm[j]];
        spmd__xtype_copy_dim(&body, j, &w.x, w.perm[j]);
    }
    return finish(&op, &w, &body, out_sharding, out);
}

/* JAX's reshape rule: `body` gets the result's sharding, or *bad_first .. *bad_last are the
 * dimensions of the first group that moves a sharded dimension in a way the blocks cannot
 * follow (*bad_first -1: none), and *why says how. */
static void reshape_rule(const spmd__xtype *x, int ndim, const int64_t *shape, spmd__xtype *body,
                         int *bad_first, int *bad_last, const char **why)
{
    spmd__xtype_replicated(x->mesh, ndim, shape, x->dtype, body);
    *bad_first = -1;
    int in[SPMD_MAX_RANK], on[SPMD_MAX_RANK], ni = 0, no = 0;
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != 1)
            in[ni++] = d;
    for (int d = 0; d < ndim; d++)
        if (shape[d] != 1)
            on[no++] = d;
    int i = 0, j = 0;
    while (i < ni && j < no) {
        int i0 = i, j0 = j;
        int64_t pi = x->shape[in[i++]], po = shape[on[j++]];
        while (pi != po) {
            if (pi < po)
                pi *= x->shape[in[i++]];
            else
                po *= shape[on[j++]];
        }
        int gi = i - i0, go = j - j0, sharded_minor = 0;
        for (int k = i0 + 1; k < i; k++)
            sharded_minor |= x->naxes[in[k]] > 0;
        int first = in[i0];
        if (!x->naxes[first] && !sharded_minor)
            continue; /* nothing sharded: any regrouping is local */
        if (gi == 1 && go == 1) {
            spmd__xtype_copy_dim(body, on[j0], x, first);
            continue;
        }
        if (sharded_minor || (gi > 1 && go > 1)) {
            *why = sharded_minor ? "a minor dimension of a merged group is sharded"
                                 : "several dimensions are regrouped into several";
        } else if (gi == 1 && shape[on[j0]] % spmd__xtype_shards(x, first)) {
            *why = "the major dimension of the split is not divisible by the shard count";
        } else {
            spmd__xtype_copy_dim(body, on[j0], x, first);
            continue;
        }
        *bad_first = i0 == i ? -1 : in[i0];
        *bad_last = in[i - 1];
        return;
    }
}

spmd_status spmd_array_reshape(spmd_array *x, int ndim, const int64_t *shape,
                               const spmd_sharding *out_sharding, const spmd_op_options *opts,
                               spmd_array **out)
{
    const char *api = "spmd_array_reshape";
    spmd__xop op;
    SPMD_CHECK(spmd__xop_begin(&op, api, "reshape", opts, out));
    SPMD_CHECK(spmd__xop_operand(&op, x, "x"));
    SPMD_REQUIRE(ndim >= 0 && ndim <= SPMD_MAX_RANK && (ndim == 0 || shape),
                 SPMD_ERR_INVALID_ARGUMENT, "%s: ndim is %d and shape %s; give 0 .. %d extents",
                 api, ndim, shape ? "given" : "NULL", SPMD_MAX_RANK);
    for (int d = 0; d < ndim; d++)
        SPMD_REQUIRE(shape[d] >= 1, SPMD_ERR_SHAPE, "%s: shape[%d] is %lld; extents are >= 1", api,
                     d, (long long)shape[d]);
    int64_t n = spmd__xshape_elements(ndim, shape, x->dtype);
    SPMD_REQUIRE(n == spmd_array_size(x), SPMD_ERR_SHAPE,
                 "%s: x has %lld elements but the new shape %lld%s", api,
                 (long long)spmd_array_size(x), (long long)n,
                 n < 0 ? " (more than int64 can count)" : "");
    structure_args w;
    memset(&w, 0, sizeof w);
    w.kind = S_RESHAPE;
    w.x = op.in_type[0];
    spmd__xop_describe(&op, "reshape");
    spmd__xtype body;
    int bad, last;
    const char *why = "";
    reshape_rule(&w.x, ndim, shape, &body, &bad, &last, &why);
    if (bad >= 0 && !out_sharding) {
        char type[192], axes[SPMD__AXES_TEXT];
        spmd__xtype_format(&w.x, type, sizeof type);
        spmd__axes_text_mask(op.mesh, spmd__xtype_used(&w.x), axes, sizeof axes);
        return SPMD_ERROR(SPMD_ERR_SPEC,
                          "%s: reshaping %s: %s (dimensions %d .. %d, on '%s'); give an "
                          "out_sharding (x is then resharded whole along the groups that need "
                          "it first, and the result to the out_sharding after), or reshard x "
                          "yourself",
                          api, type, why, bad, last, axes);
    }
    /* every group that cannot follow its blocks is made whole first, in one reshard */
    spmd__xtype whole = w.x;
    while (bad >= 0) {
        for (int d = bad; d <= last; d++)
            whole.naxes[d] = 0;
        reshape_rule(&whole, ndim, shape, &body, &bad, &last, &why);
    }
    spmd__xop_reshard_operand(&op, 0, &whole);
    w.x = op.in_type[0];
    return finish(&op, &w, &body, out_sharding, out);
}

spmd_status spmd_array_slice(spmd_array *x, const int64_t *start, const int64_t *limit,
                             const spmd_sharding *out_sharding, const spmd_op_options *opts,
                             spmd_array **out)
{
    const char *api = "spmd_array_slice";
    spmd__xop op;
    SPMD_CHECK(spmd__xop_begin(&op, api, "slice", opts, out));
    SPMD_CHECK(spmd__xop_operand(&op, x, "x"));
    SPMD_REQUIRE(x->ndim == 0 || (start && limit), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument '%s' is NULL", api, start ? "limit" : "start");
    structure_args w;
    memset(&w, 0, sizeof w);
    w.kind = S_SLICE;
    w.x = op.in_type[0];
    spmd__xop_describe(&op, "slice");
    for (int d = 0; d < x->ndim; d++)
        spmd__xop_describe_more(&op, "%s%lld:%lld", d ? "," : ", ", (long long)start[d],
                                (long long)limit[d]);
    spmd__xtype body = w.x;
    for (int d = 0; d < x->ndim; d++) {
        SPMD_REQUIRE(start[d] >= 0 && start[d] < limit[d] && limit[d] <= x->shape[d],
                     SPMD_ERR_INVALID_ARGUMENT,
                     "%s: dimension %d: start %lld and limit %lld must satisfy 0 <= start < "
                     "limit <= %lld (the extent)",
                     api, d, (long long)start[d], (long long)limit[d], (long long)x->shape[d]);
        w.start[d] = start[d];
        body.shape[d] = limit[d] - start[d];
        if (!w.x.naxes[d] || body.shape[d] == x->shape[d])
            continue;
        int64_t shards = spmd__xtype_shards(&w.x, d);
        if (body.shape[d] % shards) {
            char type[192], axes[SPMD__AXES_TEXT];
            spmd__xtype_format(&w.x, type, sizeof type);
            spmd__xtype_dim_text(&w.x, d, axes, sizeof axes);
            if (!out_sharding)
                return SPMD_ERROR(SPMD_ERR_SPEC,
                                  "%s: slicing %s to extent %lld along dimension %d, sharded "
                                  "over %s (%lld shards), would leave uneven blocks; uneven "
                                  "extents are refused, never replicated silently: give an "
                                  "out_sharding (dimension %d unsharded costs an all_gather of "
                                  "%lld B per device), or slice to a multiple of %lld",
                                  api, type, (long long)body.shape[d], d, axes, (long long)shards,
                                  d, (long long)((shards - 1) * spmd__xtype_block_bytes(&w.x)),
                                  (long long)shards);
            body.naxes[d] = 0; /* the result keeps it whole here; out_sharding decides */
        }
        w.gather[d] = 1;
    }
    spmd__xop_plan_gathers(&op, &w.x, w.gather);
    return finish(&op, &w, &body, out_sharding, out);
}

spmd_status spmd_array_take(spmd_array *x, spmd_array *indices, int axis, spmd_take_mode mode,
                            const spmd_sharding *out_sharding, const spmd_op_options *opts,
                            spmd_array **out)
{
    const char *api = "spmd_array_take";
    spmd__xop op;
    SPMD_CHECK(spmd__xop_begin(&op, api, "take", opts, out));
    SPMD_CHECK(spmd__xop_operand(&op, x, "x"));
    SPMD_CHECK(spmd__xop_operand(&op, indices, "indices"));
    SPMD_REQUIRE(indices->dtype == SPMD_DTYPE_I32 || indices->dtype == SPMD_DTYPE_I64,
                 SPMD_ERR_INVALID_ARGUMENT, "%s: indices are %s; they must be int32 or int64", api,
                 spmd_dtype_name(indices->dtype));
    SPMD_REQUIRE(axis >= -x->ndim && axis < x->ndim, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: axis %d is out of range for x of rank %d", api, axis, x->ndim);
    SPMD_REQUIRE(mode == SPMD_TAKE_FILL || mode == SPMD_TAKE_CLIP || mode == SPMD_TAKE_WRAP,
                 SPMD_ERR_INVALID_ARGUMENT, "%s: mode %d is not a spmd_take_mode", api, (int)mode);
    axis = axis < 0 ? axis + x->ndim : axis;
    SPMD_REQUIRE(x->ndim - 1 + indices->ndim <= SPMD_MAX_RANK, SPMD_ERR_SHAPE,
                 "%s: the result would have rank %d, beyond SPMD_MAX_RANK", api,
                 x->ndim - 1 + indices->ndim);
    structure_args w;
    memset(&w, 0, sizeof w);
    w.kind = S_TAKE;
    w.axis = axis;
    w.mode = mode;
    spmd__xop_describe(&op, "take");
    spmd__xop_describe_more(&op, ", axis %d, mode %d", axis, (int)mode);
    if (op.in_type[0].naxes[axis]) {
        spmd__xtype whole = op.in_type[0];
        whole.naxes[axis] = 0;
        char type[192], axes[SPMD__AXES_TEXT];
        spmd__xtype_format(&op.in_type[0], type, sizeof type);
        spmd__xtype_dim_text(&op.in_type[0], axis, axes, sizeof axes);
        if (!out_sharding)
            return SPMD_ERROR(SPMD_ERR_SPEC,
                              "%s: x is %s, and the dimension indexed (%d) is sharded over %s; "
                              "take needs it whole: give an out_sharding, or reshard x with "
                              "dimension %d unsharded first (%lld B per device)",
                              api, type, axis, axes, axis,
                              (long long)spmd__reshard_bytes(&op.in_type[0], &whole));
        spmd__xop_reshard_operand(&op, 0, &whole);
    }
    const spmd__xtype *t = &op.in_type[0], *it = &op.in_type[1];
    spmd__xtype body;
    spmd__xtype_replicated(op.mesh, 0, NULL, x->dtype, &body);
    for (int d = 0; d < axis; d++) {
        body.shape[body.ndim] = t->shape[d];
        spmd__xtype_copy_dim(&body, body.ndim++, t, d);
    }
    for (int d = 0; d < it->ndim; d++) {
        body.shape[body.ndim] = it->shape[d];
        spmd__xtype_copy_dim(&body, body.ndim++, it, d);
    }
    for (int d = axis + 1; d < t->ndim; d++) {
        body.shape[body.ndim] = t->shape[d];
        spmd__xtype_copy_dim(&body, body.ndim++, t, d);
    }
    unsigned xm = spmd__xtype_used(t), im = spmd__xtype_used(it);
    if (xm & im) {
        spmd__xtype rep;
        spmd__xtype_replicated(op.mesh, it->ndim, it->shape, it->dtype, &rep);
        char tx[192], ti[192];
        spmd__xtype_format(t, tx, sizeof tx);
        spmd__xtype_format(it, ti, sizeof ti);
        if (!out_sharding)
            return SPMD_ERROR(SPMD_ERR_SPEC,
                              "%s: x is %s and indices %s: the result would use mesh axis '%s' "
                              "twice; give an out_sharding, or reshard the indices whole (%lld "
                              "B per device)",
                              api, tx, ti, op.mesh->names[__builtin_ctz(xm & im)],
                              (long long)spmd__reshard_bytes(it, &rep));
        spmd__xop_reshard_operand(&op, 1, &rep);
        for (int d = axis; d < axis + it->ndim; d++)
            body.naxes[d] = 0;
    }
    return finish(&op, &w, &body, out_sharding, out);
}

spmd_status spmd_array_concatenate(int n, spmd_array *const *xs, int axis,
                                   const spmd_sharding *out_sharding, const spmd_op_options *opts,
                                   spmd_array **out)
{
    const char *api = "spmd_array_concatenate";
    spmd__xop op;
    SPMD_CHECK(spmd__xop_begin(&op, api, "concatenate", opts, out));
    SPMD_REQUIRE(n >= 1 && n <= SPMD__XOP_MAX_IN && xs, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: n is %d (xs %s); give 1 .. %d arrays (concatenate more in steps)", api, n,
                 xs ? "given" : "NULL", SPMD__XOP_MAX_IN);
    for (int i = 0; i < n; i++) {
        static const char *const names[] = {
            "xs[0]", "xs[1]", "xs[2]",  "xs[3]",  "xs[4]",  "xs[5]",  "xs[6]",  "xs[7]",
            "xs[8]", "xs[9]", "xs[10]", "xs[11]", "xs[12]", "xs[13]", "xs[14]", "xs[15]"};
        SPMD_CHECK(spmd__xop_operand(&op, xs[i], names[i]));
    }
    const spmd__xtype *t0 = &op.in_type[0];
    SPMD_REQUIRE(axis >= -t0->ndim && axis < t0->ndim, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: axis %d is out of range for rank %d", api, axis, t0->ndim);
    axis = axis < 0 ? axis + t0->ndim : axis;
    spmd__xop_describe(&op, "concatenate");
    spmd__xop_describe_more(&op, ", axis %d", axis);
    spmd__xtype body = *t0;
    body.shape[axis] = 0;
    for (int i = 0; i < n; i++) {
        const spmd__xtype *t = &op.in_type[i];
        char a[192], b[192];
        spmd__xtype_format(t0, a, sizeof a);
        spmd__xtype_format(t, b, sizeof b);
        SPMD_REQUIRE(t->dtype == t0->dtype && t->ndim == t0->ndim, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: xs[0] is %s and xs[%d] is %s: one dtype and rank for all", api, a, i, b);
        for (int d = 0; d < t->ndim; d++)
            SPMD_REQUIRE(d == axis || t->shape[d] == t0->shape[d], SPMD_ERR_SHAPE,
                         "%s: xs[0] is %s and xs[%d] is %s: they differ on dimension %d, not "
                         "only on axis %d",
                         api, a, i, b, d, axis);
        body.shape[axis] += t->shape[axis];
        spmd__xtype like0 = *t; /* xs[i] laid out as xs[0] */
        for (int d = 0; d < t->ndim; d++)
            spmd__xtype_copy_dim(&like0, d, t0, d);
        if (!out_sharding) {
            SPMD_REQUIRE(spmd__xtype_same_layout(t, t0), SPMD_ERR_SPEC,
                         "%s: xs[0] is %s and xs[%d] is %s: the operands must share one "
                         "sharding; give an out_sharding (they are resharded to it) or "
                         "reshard xs[%d] to xs[0]'s (%lld B per device)",
                         api, a, i, b, i, (long long)spmd__reshard_bytes(t, &like0));
            SPMD_REQUIRE(!t->naxes[axis], SPMD_ERR_SPEC,
                         "%s: xs[%d] is %s, sharded along the axis of the concatenation (%d); "
                         "give an out_sharding (the operands are then resharded whole along "
                         "it), or reshard them first",
                         api, i, b, axis);
        }
    }
    if (out_sharding) { /* the operands go to the requested layout, whole along axis */
        spmd__xtype req;
        int given;
        SPMD_CHECK(spmd__xop_requested(&op, out_sharding, &body, &req, &given));
        for (int i = 0; i < n; i++) {
            spmd__xtype to = req;
            to.shape[axis] = op.in_type[i].shape[axis];
            to.naxes[axis] = 0;
            to.unreduced = 0;
            spmd__xop_reshard_operand(&op, i, &to);
        }
        body = req;
        body.naxes[axis] = 0;
        body.unreduced = 0;
    }
    structure_args w;
    memset(&w, 0, sizeof w);
    w.kind = S_CONCAT;
    w.axis = axis;
    return finish(&op, &w, &body, out_sharding, out);
}

spmd_status spmd_array_softmax(spmd_array *x, int axis, const spmd_sharding *out_sharding,
                               const spmd_op_options *opts, spmd_array **out)
{
    const char *api = "spmd_array_softmax";
    spmd__xop op;
    SPMD_CHECK(spmd__xop_begin(&op, api, "softmax", opts, out));
    SPMD_CHECK(spmd__xop_operand(&op, x, "x"));
    SPMD_REQUIRE(axis >= -x->ndim && axis < x->ndim, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: axis %d is out of range for x of rank %d", api, axis, x->ndim);
    SPMD_REQUIRE(spmd__dtype_is_float(x->dtype), SPMD_ERR_UNSUPPORTED,
                 "%s: x is %s; softmax takes a float dtype (spmd_array_astype first)", api,
                 spmd_dtype_name(x->dtype));
    structure_args w;
    memset(&w, 0, sizeof w);
    w.kind = S_SOFTMAX;
    w.axis = axis < 0 ? axis + x->ndim : axis;
    w.x = op.in_type[0];
    spmd__xop_describe(&op, "softmax");
    spmd__xop_describe_more(&op, ", axis %d", w.axis);
    if (w.x.naxes[w.axis]) {
        int64_t block[SPMD_MAX_RANK];
        spmd__xtype_block_shape(&w.x, block);
        block[w.axis] = 1;
        spmd__axes_text_dim(&w.x, w.axis, w.axes, sizeof w.axes);
        int shards = (int)spmd__xtype_shards(&w.x, w.axis);
        spmd__plan_collective(&op.plan, "pmax", w.axes, SPMD_DTYPE_F64, x->ndim, block, shards);
        spmd__plan_collective(&op.plan, "psum", w.axes, SPMD_DTYPE_F64, x->ndim, block, shards);
    }
    return finish(&op, &w, &w.x, out_sharding, out);
}

spmd_status spmd_array_constrain(const spmd_array *x, const spmd_sharding *sharding)
{
    const char *api = "spmd_array_constrain";
    SPMD_CHECK(spmd__array_check(x, api, "x"));
    spmd__xtype have, want;
    spmd__xtype_of(x, &have);
    if (sharding == SPMD_REPLICATED)
        spmd__xtype_replicated(have.mesh, have.ndim, have.shape, have.dtype, &want);
    else {
        SPMD_CHECK(spmd__sharding_check(sharding, api, "sharding"));
        SPMD_REQUIRE(spmd_mesh_equal(sharding->mesh, have.mesh) && sharding->length <= x->ndim,
                     SPMD_ERR_SPEC,
                     "%s: the constraint's sharding is on another mesh or longer than x's rank "
                     "(%d); move x with spmd_array_reshard_to",
                     api, x->ndim);
        spmd__xtype_with_sharding(&have, sharding, &want);
    }
    if (spmd__xtype_same_layout(&have, &want))
        return SPMD_OK;
    char a[192], b[192];
    spmd__xtype_format(&have, a, sizeof a);
    spmd__xtype_format(&want, b, sizeof b);
    return SPMD_ERROR(SPMD_ERR_SPEC,
                      "%s: x is %s, but the constraint says %s; a constraint asserts, it does "
                      "not convert: spmd_array_reshard_to converts (%lld B per device)",
                      api, a, b, (long long)spmd__reshard_bytes(&have, &want));
}

spmd_status spmd_array_reshard_to(spmd_array *x, const spmd_sharding *sharding,
                                  const spmd_op_options *opts, spmd_array **out)
{
    const char *api = "spmd_array_reshard_to";
    spmd__xop op;
    SPMD_CHECK(spmd__xop_begin(&op, api, "reshard", opts, out));
    SPMD_CHECK(spmd__array_check(x, api, "x"));
    op.mesh = x->sharding->mesh;
    op.in[0] = x;
    op.nin = 1;
    spmd__xtype_of(x, &op.in_type[0]);
    SPMD_REQUIRE(sharding != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument 'sharding' is NULL",
                 api);
    spmd__xtype want;
    int given, done;
    SPMD_CHECK(spmd__xop_requested(&op, sharding, &op.in_type[0], &want, &given));
    spmd__xop_describe(&op, "reshard");
    SPMD_REQUIRE(!want.unreduced || op.in_type[0].unreduced == want.unreduced, SPMD_ERR_SPEC,
                 "%s: x is whole (or unreduced over other axes) and the sharding asks for "
                 "unreduced axes: no reshard makes partial sums; give a sharding without them",
                 api);
    op.has_body = 0;
    spmd__xop_reshard_operand(&op, 0, &want);
    SPMD_CHECK(spmd__xop_plan(&op, &want, &want, &done, out));
    if (done)
        return SPMD_OK;
    return spmd__xop_run(&op, out);
}
