/* Contractions of global arrays: dot_general, with matmul and two-operand einsum as its
 * spellings. The four cases of JAX's explicit mode: free dimensions on distinct axes (local);
 * a contracting dimension sharded on both sides (refused unless out_sharding says replicated,
 * scattered or unreduced); on one side only (that operand all-gathered along it); one axis on
 * free dimensions of both (refused). */
#include <stdio.h>
#include <string.h>

#include "array_ops/driver.h"
#include "array/array_impl.h"
#include "runtime/base/check.h"
#include "sharding/mesh_impl.h"

typedef struct dot_args {
    int nbatch, ncontract;
    int a_batch[SPMD_MAX_RANK], b_batch[SPMD_MAX_RANK];
    int a_contract[SPMD_MAX_RANK], b_contract[SPMD_MAX_RANK];
    int a_free[SPMD_MAX_RANK], b_free[SPMD_MAX_RANK], na_free, nb_free;
    int a_gather[SPMD_MAX_RANK], b_gather[SPMD_MAX_RANK]; /* gather that dimension first */
    spmd__xtype a, b;                                     /* as given to fn */
    spmd__xtype nat;                /* the product's type: batch, a free, b free */
    int finish, scatter_dim;        /* scatter_dim in nat's numbering */
    char sum_axes[SPMD__AXES_TEXT]; /* the contracted axes, for the psum / psum_scatter */
    int perm[SPMD_MAX_RANK];        /* einsum: out dimension j is nat's perm[j] */
    int permuted;
} dot_args;

/* x permuted to the dimensions `order` (no copy when it is already so) */
static spmd_status arrange(spmd_ctx *ctx, const spmd_block *x, const int *order, spmd_block *y)
{
    int identity = 1;
    int64_t shape[SPMD_MAX_RANK];
    for (int j = 0; j < x->ndim; j++) {
        identity &= order[j] == j;
        shape[j] = x->shape[order[j]];
    }
    if (identity) {
        *y = *x;
        return SPMD_OK;
    }
    SPMD_CHECK(spmd_ctx_alloc(ctx, x->ndim, shape, x->dtype, y));
    return spmd_op_transpose(ctx, x, order, y);
}

static int64_t product(const spmd_block *x, int from, int to)
{
    int64_t n = 1;
    for (int j = from; j < to; j++)
        n *= x->shape[j];
    return n;
}

static spmd_status local_product(spmd_ctx *ctx, const dot_args *w, spmd_block *A, spmd_block *B,
                                 spmd_block *C)
{
    int nb = w->nbatch, nk = w->ncontract;
    /* two 2-D operands: gemm's transposes serve, no copy */
    if (!nb && nk == 1 && A->ndim == 2 && B->ndim == 2)
        return spmd_op_gemm(ctx, w->a_contract[0] == 0, w->b_contract[0] == 1, 1.0, A, B, 0.0, C);
    int ao[SPMD_MAX_RANK], bo[SPMD_MAX_RANK], n = 0;
    for (int i = 0; i < nb; i++)
        ao[n++] = w->a_batch[i];
    for (int i = 0; i < w->na_free; i++)
        ao[n++] = w->a_free[i];
    for (int i = 0; i < nk; i++)
        ao[n++] = w->a_contract[i];
    n = 0;
    for (int i = 0; i < nb; i++)
        bo[n++] = w->b_batch[i];
    for (int i = 0; i < nk; i++)
        bo[n++] = w->b_contract[i];
    for (int i = 0; i < w->nb_free; i++)
        bo[n++] = w->b_free[i];
    spmd_block a, b;
    SPMD_CHECK(arrange(ctx, A, ao, &a));
    SPMD_CHECK(arrange(ctx, B, bo, &b));
    int64_t batch = product(&a, 0, nb), m = product(&a, nb, nb + w->na_free);
    int64_t k = product(&a, nb + w->na_free, a.ndim), cols = product(&b, nb + nk, b.ndim);
    size_t es = spmd_dtype_size(a.dtype);
    for (int64_t i = 0; i < batch; i++) {
        spmd_block av = a, bv = b, cv = *C;
        av.ndim = bv.ndim = cv.ndim = 2;
        av.shape[0] = m, av.shape[1] = k;
        bv.shape[0] = k, bv.shape[1] = cols;
        cv.shape[0] = m, cv.shape[1] = cols;
        av.data = (char *)a.data + (size_t)(i * m * k) * es;
        bv.data = (char *)b.data + (size_t)(i * k * cols) * es;
        cv.data = (char *)C->data + (size_t)(i * m * cols) * spmd_dtype_size(C->dtype);
        SPMD_CHECK(spmd_op_gemm(ctx, 0, 0, 1.0, &av, &bv, 0.0, &cv));
    }
    return SPMD_OK;
}

static spmd_status dot_fn(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    const dot_args *w = user;
    (void)nin;
    (void)nout;
    spmd_block A = in[0], B = in[1];
    SPMD_CHECK(spmd__xop_gather_dims(ctx, &w->a, w->a_gather, &A));
    SPMD_CHECK(spmd__xop_gather_dims(ctx, &w->b, w->b_gather, &B));
    int64_t full[SPMD_MAX_RANK], fin[SPMD_MAX_RANK];
    spmd__xtype whole = w->nat; /* the local product: the contracted axes split nothing */
    spmd__xtype_block_shape(&whole, full);
    memcpy(fin, full, sizeof fin);
    if (w->finish == FINISH_SCATTER) {
        int n = 1;
        SPMD_CHECK(spmd_axis_size(ctx, w->sum_axes, &n));
        fin[w->scatter_dim] /= n;
    }
    spmd_block nat_out = spmd__block_view(&out[0], w->nat.ndim, fin);
    spmd_block prod = nat_out;
    if (w->permuted)
        SPMD_CHECK(spmd_ctx_alloc(ctx, w->nat.ndim, fin, out[0].dtype, &nat_out));
    if (w->finish != FINISH_NONE)
        SPMD_CHECK(spmd_ctx_alloc(ctx, w->nat.ndim, full, out[0].dtype, &prod));
    else
        prod = nat_out;
    SPMD_CHECK(local_product(ctx, w, &A, &B, &prod));
    if (w->finish == FINISH_REDUCE)
        SPMD_CHECK(spmd_psum(ctx, &prod, &nat_out, w->sum_axes));
    else if (w->finish == FINISH_SCATTER)
        SPMD_CHECK(spmd_psum_scatter(ctx, &prod, &nat_out, w->sum_axes, w->scatter_dim, 1));
    if (w->permuted)
        SPMD_CHECK(spmd_op_transpose(ctx, &nat_out, w->perm, &out[0]));
    return SPMD_OK;
}

static void permute_type(const spmd__xtype *nat, const int *perm, int permuted, spmd__xtype *t)
{
    *t = *nat;
    if (!permuted)
        return;
    for (int j = 0; j < nat->ndim; j++) {
        t->shape[j] = nat->shape[perm[j]];
        spmd__xtype_copy_dim(t, j, nat, perm[j]);
    }
}

static void unpermute_type(const spmd__xtype *t, const int *perm, int permuted, spmd__xtype *nat)
{
    *nat = *t;
    if (!permuted)
        return;
    for (int j = 0; j < t->ndim; j++) {
        nat->shape[perm[j]] = t->shape[j];
        spmd__xtype_copy_dim(nat, perm[j], t, j);
    }
}

/* b laid out with its dimension db on a's dimension da's axes (taken off b's other ones) */
static void b_like_a(const spmd__xtype *a, int da, const spmd__xtype *b, int db, spmd__xtype *out)
{
    *out = *b;
    unsigned m = spmd__xtype_dim_mask(a, da);
    for (int d = 0; d < b->ndim; d++) {
        int n = 0;
        for (int k = 0; k < b->naxes[d]; k++)
            if (!(m >> b->axes[d][k] & 1))
                out->axes[d][n++] = b->axes[d][k];
        out->naxes[d] = n;
    }
    spmd__xtype_copy_dim(out, db, a, da);
}

static spmd_status check_dims(const char *api, const char *arg, int n, const int *dims, int ndim,
                              int *used)
{
    SPMD_REQUIRE(n == 0 || dims != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: argument '%s' is NULL for %d dimensions", api, arg, n);
    for (int i = 0; i < n; i++) {
        SPMD_REQUIRE(dims[i] >= 0 && dims[i] < ndim, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: %s[%d] is %d, out of range for an operand of rank %d", api, arg, i,
                     dims[i], ndim);
        SPMD_REQUIRE(!used[dims[i]], SPMD_ERR_INVALID_ARGUMENT,
                     "%s: dimension %d appears twice among the batch and contracting dimensions "
                     "(%s[%d])",
                     api, dims[i], arg, i);
        used[dims[i]] = 1;
    }
    return SPMD_OK;
}

/* The legal answers of case (ii), each with its collective and bytes per device. */
static void legal_answers(const dot_args *w, unsigned mask, int group, spmd__strbuf *sb)
{
    int64_t bytes = spmd__xtype_block_bytes(&w->nat);
    spmd__xtype t = w->nat;
    char type[192], axes[SPMD__AXES_TEXT];
    spmd__axes_text_mask(w->nat.mesh, mask, axes, sizeof axes);
    spmd__xtype_format(&t, type, sizeof type);
    int64_t psum = 2 * (group - 1) * bytes / group;
    spmd__strbuf_printf(sb, " %s%s (psum over '%s', %lld B per device);",
                        spmd__xtype_used(&t) ? "" : "SPMD_REPLICATED, ", type, axes,
                        (long long)psum);
    for (int j = 0; j < t.ndim; j++) {
        if (t.naxes[j] || t.shape[j] % (int64_t)(group * spmd__xtype_shards(&t, j)))
            continue;
        spmd__xtype s = w->nat;
        s.naxes[j] = 0;
        for (int a = 0; a < s.mesh->ndim; a++)
            if (mask >> a & 1)
                s.axes[j][s.naxes[j]++] = a;
        spmd__xtype_format(&s, type, sizeof type);
        spmd__strbuf_printf(sb, " %s (psum_scatter over '%s', %lld B per device);", type, axes,
                            (long long)((group - 1) * bytes / group));
    }
    t.unreduced = mask;
    spmd__xtype_format(&t, type, sizeof type);
    spmd__strbuf_printf(sb, " %s (unreduced: no communication)", type);
    if (spmd__xtype_used(&w->nat)) { /* replicated whole: the psum, then a gather */
        spmd__xtype rep;
        spmd__xtype_replicated(t.mesh, t.ndim, t.shape, t.dtype, &rep);
        spmd__xtype_format(&rep, type, sizeof type);
        spmd__strbuf_printf(sb,
                            "; SPMD_REPLICATED, %s (psum over '%s', then a reshard: %lld B "
                            "per device)",
                            type, axes, (long long)(psum + spmd__reshard_bytes(&w->nat, &rep)));
    }
}

static spmd_status run_dot(spmd__xop *op, dot_args *w, const spmd_sharding *out_sharding,
                           spmd_array **out)
{
    const char *api = op->api;
    spmd__xtype *a = &op->in_type[0], *b = &op->in_type[1];
    char ta[192], tb[192];
    spmd__xtype_format(a, ta, sizeof ta);
    spmd__xtype_format(b, tb, sizeof tb);
    SPMD_REQUIRE(a->dtype == b->dtype, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: a is %s and b is %s; convert one with spmd_array_astype first", api, ta, tb);
    int used_a[SPMD_MAX_RANK] = {0}, used_b[SPMD_MAX_RANK] = {0};
    SPMD_CHECK(check_dims(api, "a_batch", w->nbatch, w->a_batch, a->ndim, used_a));
    SPMD_CHECK(check_dims(api, "a_contract", w->ncontract, w->a_contract, a->ndim, used_a));
    SPMD_CHECK(check_dims(api, "b_batch", w->nbatch, w->b_batch, b->ndim, used_b));
    SPMD_CHECK(check_dims(api, "b_contract", w->ncontract, w->b_contract, b->ndim, used_b));
    w->a = *a;
    w->b = *b;
    unsigned sum_mask = 0;
    for (int i = 0; i < w->nbatch; i++) {
        int da = w->a_batch[i], db = w->b_batch[i];
        SPMD_REQUIRE(a->shape[da] == b->shape[db], SPMD_ERR_SHAPE,
                     "%s: batch dimension %d of a (%lld) and %d of b (%lld) differ: %s, %s", api,
                     da, (long long)a->shape[da], db, (long long)b->shape[db], ta, tb);
        if (!spmd__xtype_dims_alike(a, da, b, db)) {
            spmd__xtype bb;
            b_like_a(a, da, b, db, &bb);
            char want[192];
            spmd__xtype_format(&bb, want, sizeof want);
            return SPMD_ERROR(SPMD_ERR_SPEC,
                              "%s: batch dimensions must be sharded alike, but dimension %d of "
                              "a (%s) and %d of b (%s) differ; reshard b to %s (%lld B per "
                              "device) or a alike",
                              api, da, ta, db, tb, want, (long long)spmd__reshard_bytes(b, &bb));
        }
    }
    for (int i = 0; i < w->ncontract; i++) {
        int da = w->a_contract[i], db = w->b_contract[i];
        SPMD_REQUIRE(a->shape[da] == b->shape[db], SPMD_ERR_SHAPE,
                     "%s: contracting dimension %d of a (%lld) and %d of b (%lld) differ: %s @ "
                     "%s",
                     api, da, (long long)a->shape[da], db, (long long)b->shape[db], ta, tb);
        int sa = a->naxes[da] > 0, sb = b->naxes[db] > 0;
        if (sa && sb) {
            if (!spmd__xtype_dims_alike(a, da, b, db)) {
                char xa[96], xb[96];
                spmd__xtype_dim_text(a, da, xa, sizeof xa);
                spmd__xtype_dim_text(b, db, xb, sizeof xb);
                spmd__xtype bb;
                b_like_a(a, da, b, db, &bb);
                char want[192];
                spmd__xtype_format(&bb, want, sizeof want);
                return SPMD_ERROR(SPMD_ERR_SPEC,
                                  "%s: %s @ %s: contracting dimension %d of a is on '%s' and "
                                  "%d of b on '%s'; no output sharding settles it: reshard b "
                                  "to %s (%lld B per device) and give an out_sharding, or "
                                  "reshard one side whole along it",
                                  api, ta, tb, da, xa, db, xb, want,
                                  (long long)spmd__reshard_bytes(b, &bb));
            }
            sum_mask |= spmd__xtype_dim_mask(a, da);
        } else if (sa) {
            w->a_gather[da] = 1;
        } else if (sb) {
            w->b_gather[db] = 1;
        }
    }
    int rank = a->ndim + b->ndim - w->nbatch - 2 * w->ncontract;
    SPMD_REQUIRE(rank <= SPMD_MAX_RANK, SPMD_ERR_SHAPE,
                 "%s: %s @ %s would have rank %d, beyond SPMD_MAX_RANK (%d)", api, ta, tb, rank,
                 SPMD_MAX_RANK);
    SPMD_REQUIRE(spmd__dtype_is_float(a->dtype), SPMD_ERR_UNSUPPORTED,
                 "%s: %s @ %s: contractions take float32, float64, float16 or bfloat16, not %s; "
                 "convert with spmd_array_astype first",
                 api, ta, tb, spmd_dtype_name(a->dtype));
    /* the product's type: batch, a's free dimensions, b's */
    spmd__xtype *nat = &w->nat;
    spmd__xtype_replicated(op->mesh, 0, NULL, a->dtype, nat);
    for (int i = 0; i < w->nbatch; i++) {
        nat->shape[nat->ndim] = a->shape[w->a_batch[i]];
        spmd__xtype_copy_dim(nat, nat->ndim++, a, w->a_batch[i]);
    }
    for (int d = 0; d < a->ndim; d++)
        if (!used_a[d]) {
            w->a_free[w->na_free++] = d;
            nat->shape[nat->ndim] = a->shape[d];
            spmd__xtype_copy_dim(nat, nat->ndim++, a, d);
        }
    for (int d = 0; d < b->ndim; d++)
        if (!used_b[d]) {
            w->b_free[w->nb_free++] = d;
            nat->shape[nat->ndim] = b->shape[d];
            spmd__xtype_copy_dim(nat, nat->ndim++, b, d);
        }
    unsigned seen = sum_mask;
    for (int j = 0; j < nat->ndim; j++) {
        unsigned m = spmd__xtype_dim_mask(nat, j);
        if (seen & m) {
            int axis = __builtin_ctz(seen & m);
            int64_t ga = 0, gb = 0; /* gathering one side's free dimension instead */
            for (int i = 0; i < w->na_free; i++)
                if (spmd__xtype_dim_mask(a, w->a_free[i]) & m) {
                    spmd__xtype t = *a;
                    t.naxes[w->a_free[i]] = 0;
                    ga = spmd__reshard_bytes(a, &t);
                }
            for (int i = 0; i < w->nb_free; i++)
                if (spmd__xtype_dim_mask(b, w->b_free[i]) & m) {
                    spmd__xtype t = *b;
                    t.naxes[w->b_free[i]] = 0;
                    gb = spmd__reshard_bytes(b, &t);
                }
            return SPMD_ERROR(SPMD_ERR_SPEC,
                              "%s: %s @ %s would use mesh axis '%s' twice in its result (on "
                              "free dimensions of both operands, or on a free and a contracted "
                              "one); reshard a's dimension on '%s' whole (%lld B per device) or "
                              "b's (%lld B per device) first",
                              api, ta, tb, op->mesh->names[axis], op->mesh->names[axis],
                              (long long)ga, (long long)gb);
        }
        seen |= m;
    }
    int group = 1;
    for (int x = 0; x < op->mesh->ndim; x++)
        if (sum_mask >> x & 1)
            group *= op->mesh->shape[x];
    spmd__axes_text_mask(op->mesh, sum_mask, w->sum_axes, sizeof w->sum_axes);
    spmd__xtype final_nat, req, req_nat;
    permute_type(nat, w->perm, w->permuted, &final_nat);
    int given, done;
    SPMD_CHECK(spmd__xop_requested(op, out_sharding, &final_nat, &req, &given));
    unpermute_type(&req, w->perm, w->permuted, &req_nat);
    if (sum_mask && !given) {
        char text[1536];
        spmd__strbuf sb;
        spmd__strbuf_init(&sb, text, sizeof text);
        legal_answers(w, sum_mask, group, &sb);
        return SPMD_ERROR(SPMD_ERR_SPEC,
                          "%s: %s @ %s: contracting dimensions are sharded on both sides over "
                          "'%s', and it is ambiguous how the result should be sharded. Give an "
                          "out_sharding:%s",
                          api, ta, tb, w->sum_axes, text);
    }
    spmd__xtype body = *nat;
    w->finish = sum_mask ? FINISH_REDUCE : FINISH_NONE;
    if (sum_mask && req_nat.unreduced == sum_mask) {
        body.unreduced = sum_mask;
        w->finish = FINISH_NONE;
    } else if (sum_mask && !req_nat.unreduced) {
        int found = -1, ok = 1;
        for (int j = 0; j < nat->ndim && ok; j++) {
            if (spmd__xtype_dims_alike(&req_nat, j, nat, j))
                continue;
            if (found >= 0 || nat->naxes[j] || spmd__xtype_dim_mask(&req_nat, j) != sum_mask)
                ok = 0;
            found = j;
        }
        if (ok && found >= 0) {
            w->finish = FINISH_SCATTER;
            w->scatter_dim = found;
            spmd__axes_text_dim(&req_nat, found, w->sum_axes, sizeof w->sum_axes);
            spmd__xtype_copy_dim(&body, found, &req_nat, found);
        }
    } else if (req_nat.unreduced) {
        char want[96];
        spmd__axes_text_mask(op->mesh, req_nat.unreduced, want, sizeof want);
        return SPMD_ERROR(SPMD_ERR_SPEC,
                          "%s: %s @ %s: out_sharding is unreduced over '%s', but the product "
                          "sums over '%s' only%s; ask for those, or for no unreduced axes",
                          api, ta, tb, want, w->sum_axes[0] ? w->sum_axes : "no mesh axis",
                          w->sum_axes[0] ? ""
                                         : " (its contracting dimensions are not sharded "
                                           "on both sides)");
    }
    /* the plan: the gathers, then the reduction */
    spmd__xop_plan_gathers(op, a, w->a_gather);
    spmd__xop_plan_gathers(op, b, w->b_gather);
    if (w->finish != FINISH_NONE) {
        int64_t block[SPMD_MAX_RANK];
        spmd__xtype_block_shape(nat, block);
        spmd__plan_collective(&op->plan, w->finish == FINISH_SCATTER ? "psum_scatter" : "psum",
                              w->sum_axes, nat->dtype, nat->ndim, block, group);
    }
    spmd__xtype body_final;
    permute_type(&body, w->perm, w->permuted, &body_final);
    SPMD_CHECK(spmd__xop_plan(op, &body_final, given ? &req : &body_final, &done, out));
    if (done)
        return SPMD_OK;
    op->fn = dot_fn;
    op->user = w;
    return spmd__xop_run(op, out);
}

static spmd_status begin_dot(spmd__xop *op, const char *api, const char *name, spmd_array *a,
                             spmd_array *b, const spmd_op_options *opts, spmd_array **out)
{
    SPMD_CHECK(spmd__xop_begin(op, api, name, opts, out));
    SPMD_CHECK(spmd__xop_operand(op, a, "a"));
    SPMD_CHECK(spmd__xop_operand(op, b, "b"));
    spmd__xop_describe(op, name);
    return SPMD_OK;
}

spmd_status spmd_array_dot_general(spmd_array *a, spmd_array *b, int nbatch, const int *a_batch,
                                   const int *b_batch, int ncontract, const int *a_contract,
                                   const int *b_contract, const spmd_sharding *out_sharding,
                                   const spmd_op_options *opts, spmd_array **out)
{
    const char *api = "spmd_array_dot_general";
    spmd__xop op;
    SPMD_CHECK(begin_dot(&op, api, "dot_general", a, b, opts, out));
    SPMD_REQUIRE(nbatch >= 0 && ncontract >= 0 && nbatch <= a->ndim && ncontract <= a->ndim &&
                     nbatch + ncontract <= a->ndim && nbatch + ncontract <= b->ndim,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: nbatch %d and ncontract %d must be >= 0 and together at most the ranks "
                 "(%d and %d)",
                 api, nbatch, ncontract, a->ndim, b->ndim);
    dot_args w;
    memset(&w, 0, sizeof w);
    w.nbatch = nbatch;
    w.ncontract = ncontract;
    for (int i = 0; i < nbatch && a_batch && b_batch; i++)
        w.a_batch[i] = a_batch[i], w.b_batch[i] = b_batch[i];
    for (int i = 0; i < ncontract && a_contract && b_contract; i++)
        w.a_contract[i] = a_contract[i], w.b_contract[i] = b_contract[i];
    SPMD_REQUIRE((!nbatch || (a_batch && b_batch)) && (!ncontract || (a_contract && b_contract)),
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: a dimension list is NULL while its count is positive", api);
    spmd__xop_describe_more(&op, ", batch %d, contract %d:", nbatch, ncontract);
    for (int i = 0; i < nbatch; i++)
        spmd__xop_describe_more(&op, " %d/%d", w.a_batch[i], w.b_batch[i]);
    for (int i = 0; i < ncontract; i++)
        spmd__xop_describe_more(&op, " %d/%d", w.a_contract[i], w.b_contract[i]);
    return run_dot(&op, &w, out_sharding, out);
}

spmd_status spmd_array_matmul(spmd_array *a, spmd_array *b, const spmd_sharding *out_sharding,
                              const spmd_op_options *opts, spmd_array **out)
{
    const char *api = "spmd_array_matmul";
    spmd__xop op;
    SPMD_CHECK(begin_dot(&op, api, "matmul", a, b, opts, out));
    int r = a->ndim;
    SPMD_REQUIRE(r >= 2 && b->ndim == r, SPMD_ERR_SHAPE,
                 "%s: a has rank %d and b rank %d; matmul takes two operands of one rank >= 2 "
                 "(leading dimensions are batch dimensions); use spmd_array_dot_general or "
                 "spmd_array_reshape for others",
                 api, a->ndim, b->ndim);
    dot_args w;
    memset(&w, 0, sizeof w);
    w.nbatch = r - 2;
    for (int i = 0; i < r - 2; i++)
        w.a_batch[i] = w.b_batch[i] = i;
    w.ncontract = 1;
    w.a_contract[0] = r - 1;
    w.b_contract[0] = r - 2;
    return run_dot(&op, &w, out_sharding, out);
}

static int letter_at(const char *s, int n, char c)
{
    for (int i = 0; i < n; i++)
        if (s[i] == c)
            return i;
    return -1;
}

spmd_status spmd_array_einsum(const char *subscripts, spmd_array *a, spmd_array *b,
                              const spmd_sharding *out_sharding, const spmd_op_options *opts,
                              spmd_array **out)
{
    const char *api = "spmd_array_einsum";
    spmd__xop op;
    SPMD_CHECK(begin_dot(&op, api, "einsum", a, b, opts, out));
    SPMD_REQUIRE(subscripts != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument 'subscripts' is NULL",
                 api);
    char sa[SPMD_MAX_RANK + 1], sb[SPMD_MAX_RANK + 1], so[SPMD_MAX_RANK + 1];
    int na = 0, nb = 0, no = 0, part = 0, bad = 0;
    for (const char *p = subscripts; *p && !bad; p++) {
        if (*p == ' ')
            continue;
        if (*p == ',' && part == 0)
            part = 1;
        else if (*p == '-' && p[1] == '>' && part == 1)
            part = 2, p++;
        else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
            char *dst = part == 0 ? sa : part == 1 ? sb : so;
            int *n = part == 0 ? &na : part == 1 ? &nb : &no;
            if (*n >= SPMD_MAX_RANK || letter_at(dst, *n, *p) >= 0)
                bad = 1;
            else
                dst[(*n)++] = *p;
        } else
            bad = 1;
    }
    SPMD_REQUIRE(!bad && part == 2, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: subscripts \"%s\" are not of the form \"ij,jk->ik\" (letters, each at most "
                 "once per operand, an explicit '->' output)",
                 api, subscripts);
    SPMD_REQUIRE(na == a->ndim && nb == b->ndim, SPMD_ERR_SHAPE,
                 "%s: subscripts \"%s\" give a %d and b %d dimensions, but they have ranks %d "
                 "and %d",
                 api, subscripts, na, nb, a->ndim, b->ndim);
    dot_args w;
    memset(&w, 0, sizeof w);
    for (int i = 0; i < na; i++) {
        int j = letter_at(sb, nb, sa[i]), o = letter_at(so, no, sa[i]);
        SPMD_REQUIRE(j >= 0 || o >= 0, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: '%c' appears in a only; sum it first with spmd_array_reduce", api, sa[i]);
        if (j >= 0 && o >= 0)
            w.a_batch[w.nbatch] = i, w.b_batch[w.nbatch++] = j;
        else if (j >= 0)
            w.a_contract[w.ncontract] = i, w.b_contract[w.ncontract++] = j;
    }
    for (int j = 0; j < nb; j++)
        SPMD_REQUIRE(letter_at(sa, na, sb[j]) >= 0 || letter_at(so, no, sb[j]) >= 0,
                     SPMD_ERR_INVALID_ARGUMENT,
                     "%s: '%c' appears in b only; sum it first with spmd_array_reduce", api, sb[j]);
    /* the dot_general's order (batch, a free, b free) against the output's */
    char nat[3 * SPMD_MAX_RANK];
    int nn = 0;
    for (int i = 0; i < w.nbatch; i++)
        nat[nn++] = sa[w.a_batch[i]];
    for (int i = 0; i < na; i++)
        if (letter_at(sb, nb, sa[i]) < 0)
            nat[nn++] = sa[i];
    for (int j = 0; j < nb; j++)
        if (letter_at(sa, na, sb[j]) < 0)
            nat[nn++] = sb[j];
    SPMD_REQUIRE(nn == no, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: the output of \"%s\" has %d letters, but the operands give %d free and "
                 "batch letters",
                 api, subscripts, no, nn);
    for (int j = 0; j < no; j++) {
        w.perm[j] = letter_at(nat, nn, so[j]);
        SPMD_REQUIRE(w.perm[j] >= 0, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: output letter '%c' of \"%s\" is in neither operand", api, so[j],
                     subscripts);
        w.permuted |= w.perm[j] != j;
    }
    spmd__xop_describe_more(&op, ", \"%.64s\"", subscripts);
    return run_dot(&op, &w, out_sharding, out);
}
