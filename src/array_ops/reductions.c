/* Reductions of global arrays: sum, mean, max, min over dimensions, argmax / argmin. A reduced
 * dimension's mesh axes are reduced over (the fixed order of README "Reduction order"), or
 * left unreduced or scattered where out_sharding asks. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "array_ops/driver.h"
#include "array/array_impl.h"
#include "runtime/base/check.h"
#include "sharding/mesh_impl.h"

typedef struct reduce_args {
    spmd_reduce_kind kind;
    int reduced[SPMD_MAX_RANK]; /* dimension d of x is reduced */
    int all;                    /* argmax/argmin over every dimension (flat index) */
    int finish, scatter_dim;    /* scatter_dim: in x's numbering */
    char axes[SPMD__AXES_TEXT]; /* the reduced mesh axes ("x,y") */
    int group;                  /* their device count */
    double count;               /* elements per mean */
    spmd_dtype acc;             /* the local reductions' dtype */
    spmd_dtype key;             /* argmax/argmin compare as float64, or int64 for integers */
    spmd__xtype x, res;
} reduce_args;

static const char *kind_name(spmd_reduce_kind k)
{
    static const char *const names[] = {"sum", "max", "mean", "min", "argmax", "argmin"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : NULL;
}

static int is_arg(spmd_reduce_kind k) { return k == SPMD_REDUCE_ARGMAX || k == SPMD_REDUCE_ARGMIN; }

/* keeps every dimension, reduced ones as 1 */
static void kept_shape(const reduce_args *w, const int64_t *block, int64_t *kept)
{
    for (int d = 0; d < w->x.ndim; d++)
        kept[d] = w->reduced[d] ? 1 : block[d];
}

/* Element a of values va (with index ia) beats element b of vb (index ib): floats (as double)
 * put a NaN first, then the larger (smaller), then the lower index; integers (as int64, exact
 * beyond 2^53) the larger, then the lower index. So the first best in index order wins, whatever
 * order the devices' bests come in. Both kinds are 8 bytes: copies move them as such. */
static int beats(const reduce_args *w, const void *va, int64_t a, int64_t ia, const void *vb,
                 int64_t b, int64_t ib)
{
    int want_max = w->kind == SPMD_REDUCE_ARGMAX;
    if (w->key == SPMD_DTYPE_I64) {
        int64_t u = ((const int64_t *)va)[a], v = ((const int64_t *)vb)[b];
        return u != v ? (want_max ? u > v : u < v) : ia < ib;
    }
    double u = ((const double *)va)[a], v = ((const double *)vb)[b];
    if (isnan(u) && isnan(v))
        return ia < ib;
    if (isnan(v))
        return 0;
    if (isnan(u))
        return 1;
    if (u != v)
        return want_max ? u > v : u < v;
    return ia < ib;
}

/* the global flat index of block element `e` (row-major in the block) */
static int64_t global_flat(const spmd__xtype *x, const int64_t *block, const int64_t *start,
                           int64_t e)
{
    int64_t flat = 0, stride = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        int64_t c = e % block[d];
        e /= block[d];
        flat += (start[d] + c) * stride;
        stride *= x->shape[d];
    }
    return flat;
}

static spmd_status arg_fn(spmd_ctx *ctx, const reduce_args *w, const spmd_block *in,
                          spmd_block *out)
{
    int64_t start[SPMD_MAX_RANK], block[SPMD_MAX_RANK], kept[SPMD_MAX_RANK];
    SPMD_CHECK(spmd__xop_block_start(ctx, &w->x, start));
    spmd__xtype_block_shape(&w->x, block);
    kept_shape(w, block, kept);
    spmd_block vals, best_v, best_i;
    SPMD_CHECK(spmd_ctx_alloc(ctx, in->ndim, in->shape, w->key, &vals));
    SPMD_CHECK(spmd_op_copy(ctx, in, &vals));
    SPMD_CHECK(spmd_ctx_alloc(ctx, w->x.ndim, kept, w->key, &best_v));
    SPMD_CHECK(spmd_ctx_alloc(ctx, w->x.ndim, kept, SPMD_DTYPE_I64, &best_i));
    const uint64_t *v = vals.data;
    uint64_t *bv = best_v.data;
    int64_t *bi = best_i.data, lines = spmd_block_size(&best_v);
    int64_t total = spmd_block_size(&vals);
    if (w->all) {
        bv[0] = v[0];
        bi[0] = global_flat(&w->x, block, start, 0);
        for (int64_t e = 1; e < total; e++) {
            int64_t g = global_flat(&w->x, block, start, e);
            if (beats(w, v, e, g, bv, 0, bi[0])) {
                bv[0] = v[e];
                bi[0] = g;
            }
        }
    } else {
        int d = 0;
        while (!w->reduced[d])
            d++;
        int64_t inner = 1, n = block[d];
        for (int k = d + 1; k < w->x.ndim; k++)
            inner *= block[k];
        for (int64_t l = 0; l < lines; l++) {
            int64_t base = l / inner * n * inner + l % inner;
            bv[l] = v[base];
            bi[l] = start[d];
            for (int64_t k = 1; k < n; k++)
                if (beats(w, v, base + k * inner, start[d] + k, bv, l, bi[l])) {
                    bv[l] = v[base + k * inner];
                    bi[l] = start[d] + k;
                }
        }
    }
    spmd_block result = best_i;
    if (w->group > 1) { /* every member's best; the best of them */
        int64_t gshape[SPMD_MAX_RANK + 1];
        gshape[0] = w->group;
        memcpy(gshape + 1, kept, sizeof(int64_t) * (size_t)w->x.ndim);
        spmd_block all_v, all_i;
        SPMD_CHECK(spmd_ctx_alloc(ctx, w->x.ndim + 1, gshape, w->key, &all_v));
        SPMD_CHECK(spmd_ctx_alloc(ctx, w->x.ndim + 1, gshape, SPMD_DTYPE_I64, &all_i));
        SPMD_CHECK(spmd_all_gather_invariant(ctx, &best_v, &all_v, w->axes, 0, 0));
        SPMD_CHECK(spmd_all_gather_invariant(ctx, &best_i, &all_i, w->axes, 0, 0));
        uint64_t *av = all_v.data;
        int64_t *ai = all_i.data;
        for (int64_t l = 0; l < lines; l++)
            for (int g = 1; g < w->group; g++)
                if (beats(w, av, g * lines + l, ai[g * lines + l], av, l, ai[l])) {
                    av[l] = av[g * lines + l];
                    ai[l] = ai[g * lines + l];
                }
        result = spmd__block_view(&all_i, w->x.ndim, kept);
    }
    result = spmd__block_view(&result, out->ndim, out->shape);
    return spmd_op_copy(ctx, &result, out);
}

static spmd_status reduce_fn(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    const reduce_args *w = user;
    (void)nin;
    (void)nout;
    if (is_arg(w->kind))
        return arg_fn(ctx, w, &in[0], &out[0]);
    spmd_block cur = in[0];
    if (cur.dtype != w->acc) {
        spmd_block conv;
        SPMD_CHECK(spmd_ctx_alloc(ctx, cur.ndim, cur.shape, w->acc, &conv));
        SPMD_CHECK(spmd_op_copy(ctx, &cur, &conv));
        cur = conv;
    }
    spmd_reduce_kind local = w->kind == SPMD_REDUCE_MEAN ? SPMD_REDUCE_SUM : w->kind;
    for (int d = w->x.ndim - 1; d >= 0; d--) {
        if (!w->reduced[d])
            continue;
        int64_t shape[SPMD_MAX_RANK];
        memcpy(shape, cur.shape, sizeof shape);
        shape[d] = 1;
        spmd_block next;
        SPMD_CHECK(spmd_ctx_alloc(ctx, cur.ndim, shape, cur.dtype, &next));
        SPMD_CHECK(spmd_op_reduce(ctx, local, &cur, d, &next));
        cur = next;
    }
    if (w->finish == FINISH_SCATTER) {
        int64_t shape[SPMD_MAX_RANK];
        memcpy(shape, cur.shape, sizeof shape);
        shape[w->scatter_dim] /= w->group;
        spmd_block dst = spmd__block_view(&out[0], cur.ndim, shape);
        SPMD_CHECK(spmd_psum_scatter(ctx, &cur, &dst, w->axes, w->scatter_dim, 1));
    } else {
        spmd_block dst = spmd__block_view(&out[0], cur.ndim, cur.shape);
        if (w->finish == FINISH_REDUCE && w->kind == SPMD_REDUCE_MAX)
            SPMD_CHECK(spmd_pmax(ctx, &cur, &dst, w->axes));
        else if (w->finish == FINISH_REDUCE && w->kind == SPMD_REDUCE_MIN)
            SPMD_CHECK(spmd_pmin(ctx, &cur, &dst, w->axes));
        else if (w->finish == FINISH_REDUCE)
            SPMD_CHECK(spmd_psum(ctx, &cur, &dst, w->axes));
        else
            SPMD_CHECK(spmd_op_copy(ctx, &cur, &dst));
    }
    if (w->kind == SPMD_REDUCE_MEAN)
        SPMD_CHECK(spmd_op_binary_scalar(ctx, SPMD_BINARY_DIV, &out[0], w->count, &out[0]));
    return SPMD_OK;
}

/* Where out_sharding asks for the sum scattered over the reduced axes: the result dimension */
static int scatter_target(const reduce_args *w, const spmd__xtype *req, unsigned reduced_mask)
{
    if (req->unreduced || w->kind == SPMD_REDUCE_MAX || w->kind == SPMD_REDUCE_MIN ||
        is_arg(w->kind))
        return -1;
    int found = -1;
    for (int j = 0; j < req->ndim; j++) {
        if (spmd__xtype_dims_alike(req, j, &w->res, j))
            continue;
        if (found >= 0 || w->res.naxes[j] || spmd__xtype_dim_mask(req, j) != reduced_mask)
            return -1;
        found = j;
    }
    return found;
}

spmd_status spmd_array_reduce(spmd_reduce_kind kind, spmd_array *x, int naxes, const int *axes,
                              int keepdims, const spmd_sharding *out_sharding,
                              const spmd_op_options *opts, spmd_array **out)
{
    const char *api = "spmd_array_reduce", *name = kind_name(kind);
    spmd__xop op;
    SPMD_CHECK(spmd__xop_begin(&op, api, name ? name : "reduce", opts, out));
    SPMD_REQUIRE(name != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: kind %d is not a spmd_reduce_kind (SPMD_REDUCE_SUM .. "
                 "SPMD_REDUCE_ARGMIN)",
                 api, (int)kind);
    SPMD_CHECK(spmd__xop_operand(&op, x, "x"));
    SPMD_REQUIRE(kind == SPMD_REDUCE_SUM || spmd__dtype_is_number(x->dtype) ||
                     (kind == SPMD_REDUCE_MEAN && x->dtype != SPMD_DTYPE_BOOL),
                 SPMD_ERR_UNSUPPORTED,
                 "%s (%s): x is %s; this reduction takes float, int32 or int64 dtypes (convert "
                 "with spmd_array_astype first)",
                 api, name, spmd_dtype_name(x->dtype));
    SPMD_REQUIRE(keepdims == 0 || keepdims == 1, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: keepdims is %d; pass 0 or 1", api, keepdims);
    SPMD_REQUIRE(naxes >= -1 && naxes <= x->ndim, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: naxes is %d; pass -1 (every dimension) or 0 .. %d (the rank)", api, naxes,
                 x->ndim);
    SPMD_REQUIRE(naxes <= 0 || axes != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument 'axes' is NULL for naxes %d", api, naxes);
    reduce_args args;
    memset(&args, 0, sizeof args);
    reduce_args *w = &args;
    w->kind = kind;
    w->x = op.in_type[0];
    for (int i = 0; i < (naxes < 0 ? x->ndim : naxes); i++) {
        int d = naxes < 0 ? i : axes[i];
        SPMD_REQUIRE(d >= -x->ndim && d < x->ndim, SPMD_ERR_INVALID_ARGUMENT,
                     "%s (%s): axes[%d] is %d, out of range for x of rank %d", api, name, i, d,
                     x->ndim);
        d = d < 0 ? d + x->ndim : d;
        SPMD_REQUIRE(!w->reduced[d], SPMD_ERR_INVALID_ARGUMENT,
                     "%s (%s): dimension %d is listed twice in axes", api, name, d);
        w->reduced[d] = 1;
    }
    SPMD_REQUIRE(!is_arg(kind) || naxes == -1 || naxes == 1, SPMD_ERR_INVALID_ARGUMENT,
                 "%s (%s): naxes is %d; %s takes one dimension, or -1 for the flat index", api,
                 name, naxes, name);
    if (is_arg(kind))
        w->all = naxes == -1 && x->ndim != 1;
    /* the result's natural type */
    spmd_dtype dtype = x->dtype;
    w->acc = x->dtype;
    if (kind == SPMD_REDUCE_MEAN && !spmd__dtype_is_float(x->dtype))
        dtype = w->acc = SPMD_DTYPE_F32;
    if (kind == SPMD_REDUCE_SUM && (x->dtype == SPMD_DTYPE_BOOL || x->dtype == SPMD_DTYPE_U8))
        dtype = w->acc = SPMD_DTYPE_I32;
    if (is_arg(kind))
        dtype = SPMD_DTYPE_I32;
    w->key = spmd__dtype_is_float(x->dtype) ? SPMD_DTYPE_F64 : SPMD_DTYPE_I64;
    spmd__xtype *res = &w->res;
    spmd__xtype_replicated(op.mesh, 0, NULL, dtype, res);
    unsigned mask = 0;
    w->count = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (w->reduced[d]) {
            mask |= spmd__xtype_dim_mask(&w->x, d);
            w->count *= (double)x->shape[d];
            if (keepdims)
                res->shape[res->ndim++] = 1;
            continue;
        }
        res->shape[res->ndim] = x->shape[d];
        spmd__xtype_copy_dim(res, res->ndim++, &w->x, d);
    }
    spmd__axes_text_mask(op.mesh, mask, w->axes, sizeof w->axes);
    w->group = 1;
    for (int a = 0; a < op.mesh->ndim; a++)
        if (mask >> a & 1)
            w->group *= op.mesh->shape[a];
    spmd__xop_describe(&op, name);
    spmd__xop_describe_more(&op, ", axes (");
    for (int d = 0; d < x->ndim; d++)
        if (w->reduced[d])
            spmd__xop_describe_more(&op, "%d,", d);
    spmd__xop_describe_more(&op, "), keepdims %d", keepdims);
    spmd__xtype req;
    int given, done;
    SPMD_CHECK(spmd__xop_requested(&op, out_sharding, res, &req, &given));
    spmd__xtype body = *res;
    w->finish = mask ? FINISH_REDUCE : FINISH_NONE;
    if (given && req.unreduced) {
        SPMD_REQUIRE(req.unreduced == mask && (kind == SPMD_REDUCE_SUM || kind == SPMD_REDUCE_MEAN),
                     SPMD_ERR_SPEC,
                     "%s (%s): out_sharding is unreduced over other axes than those the reduced "
                     "dimensions were sharded over ('%s'); unreduced results are sums (of sum "
                     "and mean) over exactly those axes",
                     api, name, w->axes);
        body.unreduced = mask;
        w->finish = FINISH_NONE;
    } else if (given && mask) {
        int j = scatter_target(w, &req, mask);
        if (j >= 0) { /* a psum_scatter along j, in x's numbering */
            int xd = 0, rj = 0;
            for (xd = 0; xd < x->ndim; xd++) {
                if (w->reduced[xd] && !keepdims)
                    continue;
                if (rj++ == j)
                    break;
            }
            w->finish = FINISH_SCATTER;
            w->scatter_dim = xd;
            spmd__axes_text_dim(&req, j, w->axes, sizeof w->axes);
            spmd__xtype_copy_dim(&body, j, &req, j);
        }
    }
    if (w->finish != FINISH_NONE) {
        int64_t block[SPMD_MAX_RANK], kept[SPMD_MAX_RANK];
        spmd__xtype_block_shape(&w->x, block);
        kept_shape(w, block, kept);
        if (is_arg(kind) && w->group > 1) { /* axes of size 1 gather nothing */
            spmd__plan_collective(&op.plan, "all_gather", w->axes, w->key, x->ndim, kept, w->group);
            spmd__plan_collective(&op.plan, "all_gather", w->axes, SPMD_DTYPE_I64, x->ndim, kept,
                                  w->group);
        } else if (!is_arg(kind)) {
            const char *coll = w->finish == FINISH_SCATTER ? "psum_scatter"
                               : kind == SPMD_REDUCE_MAX   ? "pmax"
                               : kind == SPMD_REDUCE_MIN   ? "pmin"
                                                           : "psum";
            spmd__plan_collective(&op.plan, coll, w->axes, w->acc, x->ndim, kept, w->group);
        }
    }
    SPMD_CHECK(spmd__xop_plan(&op, &body, given ? &req : &body, &done, out));
    if (done)
        return SPMD_OK;
    op.fn = reduce_fn;
    op.user = w;
    return spmd__xop_run(&op, out);
}
