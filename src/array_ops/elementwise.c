/* Elementwise ops on global arrays: unary, binary with numpy broadcasting, scalar forms,
 * where, astype. Sharding: the operands' (JAX's broadcasting rule); no communication unless
 * out_sharding asks for another layout (the operands are resharded to it first, as in JAX). */
#include <stdio.h>
#include <string.h>

#include "array_ops/driver.h"
#include "array/array_impl.h"
#include "runtime/base/check.h"
#include "sharding/mesh_impl.h"

enum { EW_UNARY, EW_BINARY, EW_SCALAR, EW_WHERE, EW_ASTYPE };

typedef struct ew_args {
    int kind, op;
    double scalar;
    int nin;
    spmd__xtype in[3], out;
} ew_args;

static const char *unary_name(spmd_unary_op op)
{
    static const char *const names[] = {"neg", "exp", "log", "sin", "cos", "tanh", "relu"};
    return (unsigned)op < sizeof names / sizeof *names ? names[op] : NULL;
}

static const char *binary_name(spmd_binary_op op)
{
    static const char *const names[] = {"add", "sub", "mul", "div", "max",
                                        "min", "and", "or",  "xor"};
    return (unsigned)op < sizeof names / sizeof *names ? names[op] : NULL;
}

/*
 * Operand i's block as the out block sees it: ranks aligned at the end, an unsharded dimension
 * narrowed to the out block's part, a size-1 dimension stretched (take with zero indices).
 */
static spmd_status fit_block(spmd_ctx *ctx, const ew_args *w, int i, const spmd_block *in,
                             const int64_t *out_start, const int64_t *out_block, spmd_block *fit)
{
    const spmd__xtype *t = &w->in[i], *o = &w->out;
    int lead = o->ndim - t->ndim;
    int64_t shape[SPMD_MAX_RANK], start[SPMD_MAX_RANK], cut[SPMD_MAX_RANK];
    int narrow = 0, stretch = 0;
    for (int d = 0; d < o->ndim; d++) {
        int e = d - lead;
        int64_t extent = e < 0 ? 1 : t->shape[e];
        shape[d] = e < 0 ? 1 : in->shape[e];
        start[d] = 0;
        cut[d] = shape[d];
        if (extent == 1 && o->shape[d] > 1)
            stretch = 1;
        else if (e >= 0 && !t->naxes[e] && o->naxes[d]) {
            start[d] = out_start[d];
            cut[d] = out_block[d];
            narrow = 1;
        }
    }
    *fit = spmd__block_view(in, o->ndim, shape);
    if (narrow) {
        spmd_block part;
        SPMD_CHECK(spmd_ctx_alloc(ctx, o->ndim, cut, in->dtype, &part));
        SPMD_CHECK(spmd_op_slice(ctx, fit, start, &part));
        *fit = part;
    }
    if (!stretch)
        return SPMD_OK;
    for (int d = 0; d < o->ndim; d++) {
        if (fit->shape[d] == out_block[d])
            continue;
        int64_t n = out_block[d];
        spmd_block zeros, wide;
        SPMD_CHECK(spmd_ctx_alloc(ctx, 1, &n, SPMD_DTYPE_I32, &zeros));
        SPMD_CHECK(spmd_op_fill(ctx, &zeros, 0));
        int64_t wshape[SPMD_MAX_RANK];
        memcpy(wshape, fit->shape, sizeof wshape);
        wshape[d] = n;
        /* take's out has the axis replaced by the indices' dimension: the same rank */
        SPMD_CHECK(spmd_ctx_alloc(ctx, o->ndim, wshape, fit->dtype, &wide));
        SPMD_CHECK(spmd_op_take(ctx, fit, &zeros, d, SPMD_TAKE_CLIP, &wide));
        *fit = wide;
    }
    return SPMD_OK;
}

static int needs_fitting(const ew_args *w, int i)
{
    const spmd__xtype *t = &w->in[i], *o = &w->out;
    if (t->ndim != o->ndim)
        return 1;
    for (int d = 0; d < o->ndim; d++)
        if (t->shape[d] != o->shape[d] || !spmd__xtype_dims_alike(t, d, o, d))
            return 1;
    return 0;
}

/* b fits op_binary as it is: one element, or a row of a's last dimension, unsharded there */
static int binary_broadcast_ok(const ew_args *w, const spmd_block *b)
{
    const spmd__xtype *t = &w->in[1], *o = &w->out;
    int64_t n = spmd_block_size(b);
    if (n == 1)
        return 1;
    if (!o->ndim || t->ndim < 1 || t->shape[t->ndim - 1] != o->shape[o->ndim - 1] ||
        !spmd__xtype_dims_alike(t, t->ndim - 1, o, o->ndim - 1))
        return 0;
    for (int d = 0; d < t->ndim - 1; d++)
        if (t->shape[d] != 1)
            return 0;
    return 1;
}

static spmd_status ew_fn(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                         void *user)
{
    const ew_args *w = user;
    (void)nin;
    (void)nout;
    switch (w->kind) {
    case EW_UNARY:
        return spmd_op_unary(ctx, (spmd_unary_op)w->op, &in[0], &out[0]);
    case EW_ASTYPE:
        return spmd_op_copy(ctx, &in[0], &out[0]);
    case EW_SCALAR:
        return spmd_op_binary_scalar(ctx, (spmd_binary_op)w->op, &in[0], w->scalar, &out[0]);
    default:
        break;
    }
    int64_t start[SPMD_MAX_RANK], block[SPMD_MAX_RANK];
    SPMD_CHECK(spmd__xop_block_start(ctx, &w->out, start));
    spmd__xtype_block_shape(&w->out, block);
    spmd_block fit[3];
    for (int i = 0; i < w->nin; i++) {
        fit[i] = in[i];
        int light = w->kind == EW_BINARY && i == 1 && !needs_fitting(w, 0) &&
                    binary_broadcast_ok(w, &in[1]);
        if (light) { /* a row or a scalar: op_binary broadcasts it itself */
            int64_t n = spmd_block_size(&in[1]);
            fit[1] = spmd__block_view(&in[1], n == 1 ? 0 : 1, &n);
        } else if (needs_fitting(w, i))
            SPMD_CHECK(fit_block(ctx, w, i, &in[i], start, block, &fit[i]));
    }
    if (w->kind == EW_BINARY)
        return spmd_op_binary(ctx, (spmd_binary_op)w->op, &fit[0], &fit[1], &out[0]);
    return spmd_op_where(ctx, &fit[0], &fit[1], &fit[2], &out[0]);
}

/* JAX's broadcasting_sharding_rule over the op's operands: the result type, or the conflict */
static spmd_status broadcast_rule(spmd__xop *op, const char *const *args, spmd_dtype dtype,
                                  spmd__xtype *res, int *conflict_dim)
{
    int ndim = 0;
    for (int i = 0; i < op->nin; i++)
        ndim = op->in_type[i].ndim > ndim ? op->in_type[i].ndim : ndim;
    spmd__xtype_replicated(op->mesh, ndim, (int64_t[SPMD_MAX_RANK]){0}, dtype, res);
    *conflict_dim = -1;
    for (int d = 0; d < ndim; d++) {
        int64_t extent = 1;
        for (int i = 0; i < op->nin; i++) {
            const spmd__xtype *t = &op->in_type[i];
            int e = d - (ndim - t->ndim);
            if (e < 0 || t->shape[e] == 1)
                continue;
            if (extent != 1 && t->shape[e] != extent) {
                char a[192], b[192];
                spmd__xtype_format(&op->in_type[0], a, sizeof a);
                spmd__xtype_format(t, b, sizeof b);
                return SPMD_ERROR(SPMD_ERR_SHAPE,
                                  "%s: %s and %s do not broadcast: dimension %d of the result "
                                  "would be %lld in one and %lld in %s (extents must be equal "
                                  "or 1, aligned at the end)",
                                  op->api, a, b, d, (long long)extent, (long long)t->shape[e],
                                  args[i]);
            }
            extent = t->shape[e];
        }
        res->shape[d] = extent;
        int chosen = -1;
        for (int i = 0; i < op->nin; i++) {
            const spmd__xtype *t = &op->in_type[i];
            int e = d - (ndim - t->ndim);
            if (e < 0 || !t->naxes[e])
                continue;
            if (chosen < 0) {
                spmd__xtype_copy_dim(res, d, t, e);
                chosen = i;
            } else if (!spmd__xtype_dims_alike(res, d, t, e) && *conflict_dim < 0)
                *conflict_dim = d;
        }
    }
    return SPMD_OK;
}

static int axis_twice(const spmd__xtype *t, int *axis)
{
    unsigned seen = 0;
    for (int d = 0; d < t->ndim; d++)
        for (int k = 0; k < t->naxes[d]; k++) {
            unsigned bit = 1u << t->axes[d][k];
            if (seen & bit) {
                *axis = t->axes[d][k];
                return 1;
            }
            seen |= bit;
        }
    return 0;
}

/* operand i's type under a result type: the result's axes where it has the full extent */
static void operand_under(const spmd__xop *op, int i, const spmd__xtype *res, spmd__xtype *t)
{
    const spmd__xtype *x = &op->in_type[i];
    spmd__xtype_replicated(x->mesh, x->ndim, x->shape, x->dtype, t);
    int lead = res->ndim - x->ndim;
    for (int e = 0; e < x->ndim; e++)
        if (x->shape[e] == res->shape[e + lead])
            spmd__xtype_copy_dim(t, e, res, e + lead);
}

static int64_t reshard_cost(const spmd__xop *op, const spmd__xtype *res)
{
    int64_t bytes = 0;
    for (int i = 0; i < op->nin; i++) {
        spmd__xtype t;
        operand_under(op, i, res, &t);
        if (!spmd__xtype_same_layout(&op->in_type[i], &t))
            bytes += spmd__reshard_bytes(&op->in_type[i], &t);
    }
    return bytes;
}

/* "a is float32[8@x,4], b is float32[8@y,4]" */
static void operands_text(const spmd__xop *op, const char *const *args, spmd__strbuf *sb)
{
    for (int i = 0; i < op->nin; i++) {
        char type[192];
        spmd__xtype_format(&op->in_type[i], type, sizeof type);
        spmd__strbuf_printf(sb, "%s%s is %s", i ? ", " : "", args[i], type);
    }
}

static spmd_status refuse_conflict(const spmd__xop *op, const char *const *args,
                                   const spmd__xtype *res, int d)
{
    char text[2048], axes[SPMD__AXES_TEXT];
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, sizeof text);
    operands_text(op, args, &sb);
    spmd__strbuf_printf(&sb, ": dimension %d of the result is on", d);
    int first = 1;
    for (int i = 0; i < op->nin; i++) {
        const spmd__xtype *t = &op->in_type[i];
        int e = d - (res->ndim - t->ndim);
        if (e < 0 || !t->naxes[e])
            continue;
        spmd__xtype_dim_text(t, e, axes, sizeof axes);
        spmd__strbuf_printf(&sb, "%s'%s' in %s", first ? " " : " and ", axes, args[i]);
        first = 0;
    }
    spmd__strbuf_printf(&sb, ". Ways out (out_sharding):");
    for (int i = 0; i < op->nin; i++) { /* the result as each operand has it */
        const spmd__xtype *t = &op->in_type[i];
        int e = d - (res->ndim - t->ndim);
        if (e < 0 || !t->naxes[e])
            continue;
        spmd__xtype cand = *res;
        spmd__xtype_copy_dim(&cand, d, t, e);
        int twice;
        if (axis_twice(&cand, &twice))
            continue; /* that layout would use an axis twice: no way out */
        char type[192];
        spmd__xtype_format(&cand, type, sizeof type);
        spmd__strbuf_printf(&sb, " %s (reshard the others: %lld B per device);", type,
                            (long long)reshard_cost(op, &cand));
    }
    spmd__xtype rep;
    spmd__xtype_replicated(res->mesh, res->ndim, res->shape, res->dtype, &rep);
    spmd__strbuf_printf(&sb, " SPMD_REPLICATED (reshard every operand whole: %lld B per device)",
                        (long long)reshard_cost(op, &rep));
    return SPMD_ERROR(SPMD_ERR_SPEC, "%s (%s): incompatible shardings for broadcasting: %s",
                      op->api, op->plan.op, text);
}

static spmd_status run_ew(spmd__xop *op, ew_args *w, const char *const *args,
                          const spmd_sharding *out_sharding, spmd_dtype out_dtype, spmd_array **out)
{
    spmd__xtype res;
    int conflict = -1, given = 0, done = 0;
    SPMD_CHECK(broadcast_rule(op, args, out_dtype, &res, &conflict));
    spmd__xtype req;
    SPMD_CHECK(spmd__xop_requested(op, out_sharding, &res, &req, &given));
    if (!given) {
        int axis;
        if (conflict >= 0)
            return refuse_conflict(op, args, &res, conflict);
        if (axis_twice(&res, &axis)) {
            char type[192], text[1024];
            spmd__xtype_format(&res, type, sizeof type);
            spmd__strbuf sb;
            spmd__strbuf_init(&sb, text, sizeof text);
            operands_text(op, args, &sb);
            spmd__xtype rep;
            spmd__xtype_replicated(res.mesh, res.ndim, res.shape, res.dtype, &rep);
            return SPMD_ERROR(SPMD_ERR_SPEC,
                              "%s (%s): %s: the result would be %s, which uses mesh axis '%s' "
                              "twice; give an out_sharding that uses it once (the operands are "
                              "resharded to it), e.g. SPMD_REPLICATED (%lld B per device)",
                              op->api, op->plan.op, text, type, op->mesh->names[axis],
                              (long long)reshard_cost(op, &rep));
        }
    } else {
        SPMD_REQUIRE(!req.unreduced, SPMD_ERR_SPEC,
                     "%s: an elementwise result cannot be unreduced; give an out_sharding "
                     "without unreduced axes",
                     op->api);
        for (int i = 0; i < op->nin; i++) {
            spmd__xtype t;
            operand_under(op, i, &req, &t);
            spmd__xop_reshard_operand(op, i, &t);
        }
        res = req;
    }
    w->nin = op->nin;
    for (int i = 0; i < op->nin; i++)
        w->in[i] = op->in_type[i];
    w->out = res;
    SPMD_CHECK(spmd__xop_plan(op, &res, &res, &done, out));
    if (done)
        return SPMD_OK;
    op->fn = ew_fn;
    op->user = w;
    return spmd__xop_run(op, out);
}

/* starts an elementwise op: its name (NULL: `kind` is out of range), operands, description */
static spmd_status begin_ew(spmd__xop *op, const char *api, const char *name, const char *range,
                            int kind, int n, spmd_array *const *xs, const char *const *args,
                            const spmd_op_options *opts, spmd_array **out)
{
    SPMD_CHECK(spmd__xop_begin(op, api, name ? name : "elementwise", opts, out));
    SPMD_REQUIRE(name != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: op %d is not a %s", api, kind,
                 range);
    for (int i = 0; i < n; i++)
        SPMD_CHECK(spmd__xop_operand(op, xs[i], args[i]));
    spmd__xop_describe(op, name);
    return SPMD_OK;
}

static spmd_status same_dtypes(const char *api, const spmd_array *a, const spmd_array *b)
{
    SPMD_REQUIRE(a->dtype == b->dtype, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: a is %s and b is %s; convert one with spmd_array_astype first", api,
                 spmd_dtype_name(a->dtype), spmd_dtype_name(b->dtype));
    return SPMD_OK;
}

/* the dtypes the block ops take, refused here before anything runs */
static spmd_status check_unary_dtype(const char *api, spmd_unary_op op, spmd_dtype t)
{
    int int_ok = op == SPMD_UNARY_NEG || op == SPMD_UNARY_RELU;
    SPMD_REQUIRE(spmd__dtype_is_float(t) ||
                     (int_ok && (t == SPMD_DTYPE_I32 || t == SPMD_DTYPE_I64)),
                 SPMD_ERR_UNSUPPORTED,
                 "%s: %s of %s: this op takes a float dtype%s; convert with spmd_array_astype "
                 "first",
                 api, unary_name(op), spmd_dtype_name(t), int_ok ? ", int32 or int64" : "");
    return SPMD_OK;
}

static spmd_status check_binary_dtype(const char *api, spmd_binary_op op, spmd_dtype t)
{
    int bitwise = op == SPMD_BINARY_AND || op == SPMD_BINARY_OR || op == SPMD_BINARY_XOR;
    int ok = bitwise ? !spmd__dtype_is_float(t) : spmd__dtype_is_number(t);
    SPMD_REQUIRE(ok, SPMD_ERR_UNSUPPORTED, "%s: %s of %s: %s; convert with spmd_array_astype first",
                 api, binary_name(op), spmd_dtype_name(t),
                 bitwise ? "the bitwise ops take int32, int64, uint8 or bool"
                         : "arithmetic takes float, int32 or int64 dtypes");
    return SPMD_OK;
}

#define UNARY_RANGE "spmd_unary_op (SPMD_UNARY_NEG .. SPMD_UNARY_RELU)"
#define BINARY_RANGE "spmd_binary_op (SPMD_BINARY_ADD .. SPMD_BINARY_XOR)"

spmd_status spmd_array_unary(spmd_unary_op op_kind, spmd_array *x,
                             const spmd_sharding *out_sharding, const spmd_op_options *opts,
                             spmd_array **out)
{
    const char *args[] = {"x"};
    spmd__xop op;
    SPMD_CHECK(begin_ew(&op, "spmd_array_unary", unary_name(op_kind), UNARY_RANGE, (int)op_kind, 1,
                        &x, args, opts, out));
    SPMD_CHECK(check_unary_dtype(op.api, op_kind, x->dtype));
    ew_args w = {.kind = EW_UNARY, .op = op_kind};
    return run_ew(&op, &w, args, out_sharding, x->dtype, out);
}

spmd_status spmd_array_astype(spmd_array *x, spmd_dtype dtype, const spmd_sharding *out_sharding,
                              const spmd_op_options *opts, spmd_array **out)
{
    const char *args[] = {"x"};
    spmd__xop op;
    SPMD_CHECK(begin_ew(&op, "spmd_array_astype",
                        (unsigned)dtype < SPMD_DTYPE_COUNT ? "astype" : NULL,
                        "spmd_dtype (the dtype)", (int)dtype, 1, &x, args, opts, out));
    spmd__xop_describe_more(&op, ", %s", spmd_dtype_name(dtype));
    ew_args w = {.kind = EW_ASTYPE};
    return run_ew(&op, &w, args, out_sharding, dtype, out);
}

spmd_status spmd_array_binary(spmd_binary_op op_kind, spmd_array *a, spmd_array *b,
                              const spmd_sharding *out_sharding, const spmd_op_options *opts,
                              spmd_array **out)
{
    const char *args[] = {"a", "b"};
    spmd__xop op;
    SPMD_CHECK(begin_ew(&op, "spmd_array_binary", binary_name(op_kind), BINARY_RANGE, (int)op_kind,
                        2, (spmd_array *[]){a, b}, args, opts, out));
    SPMD_CHECK(same_dtypes(op.api, a, b));
    SPMD_CHECK(check_binary_dtype(op.api, op_kind, a->dtype));
    ew_args w = {.kind = EW_BINARY, .op = op_kind};
    return run_ew(&op, &w, args, out_sharding, a->dtype, out);
}

spmd_status spmd_array_binary_scalar(spmd_binary_op op_kind, spmd_array *a, double s,
                                     const spmd_sharding *out_sharding, const spmd_op_options *opts,
                                     spmd_array **out)
{
    const char *args[] = {"a"};
    spmd__xop op;
    SPMD_CHECK(begin_ew(&op, "spmd_array_binary_scalar", binary_name(op_kind), BINARY_RANGE,
                        (int)op_kind, 1, &a, args, opts, out));
    SPMD_CHECK(check_binary_dtype(op.api, op_kind, a->dtype));
    spmd__xop_describe_more(&op, ", %.17g", s);
    ew_args w = {.kind = EW_SCALAR, .op = op_kind, .scalar = s};
    return run_ew(&op, &w, args, out_sharding, a->dtype, out);
}

spmd_status spmd_array_where(spmd_array *cond, spmd_array *a, spmd_array *b,
                             const spmd_sharding *out_sharding, const spmd_op_options *opts,
                             spmd_array **out)
{
    const char *args[] = {"cond", "a", "b"};
    spmd__xop op;
    SPMD_CHECK(begin_ew(&op, "spmd_array_where", "where", "", 0, 3, (spmd_array *[]){cond, a, b},
                        args, opts, out));
    SPMD_REQUIRE(cond->dtype == SPMD_DTYPE_BOOL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: cond is %s; it must be bool (compare first, or spmd_array_astype)", op.api,
                 spmd_dtype_name(cond->dtype));
    SPMD_CHECK(same_dtypes(op.api, a, b));
    ew_args w = {.kind = EW_WHERE};
    return run_ew(&op, &w, args, out_sharding, a->dtype, out);
}
