/* The steps every array op shares: its arguments, the output asked for, its plan and budget,
 * and the run (reshards before, one shard_map, a reshard after), recorded in the trace. */
#include "array_ops/driver.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd/reshard.h>

#include "array/array_impl.h"
#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/calls/trace.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"

/* Not a sharding: its first word is no sharding's magic, so a function of another layer that is
 * given SPMD_REPLICATED refuses it (reading no further than this object). */
const uint64_t spmd_replicated_marker[8] = {0x5250454c49434154ull};

spmd_status spmd_op_options_init(spmd_op_options *opts, unsigned int version)
{
    SPMD_REQUIRE_NOT_NULL(opts, "spmd_op_options_init");
    SPMD_REQUIRE(version == SPMD_OP_OPTIONS_VERSION, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_op_options_init: version %u is not SPMD_OP_OPTIONS_VERSION (%u)", version,
                 SPMD_OP_OPTIONS_VERSION);
    spmd_op_options init = SPMD_OP_OPTIONS_INIT;
    *opts = init;
    return SPMD_OK;
}

spmd_status spmd__xop_begin(spmd__xop *op, const char *api, const char *plan_name,
                            const spmd_op_options *opts, spmd_array **out)
{
    memset(op, 0, sizeof *op);
    op->api = api;
    op->opts = opts;
    op->has_body = 1;
    spmd__plan_begin(&op->plan, plan_name);
    SPMD_REQUIRE(out != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument 'out' is NULL", api);
    *out = NULL;
    if (opts) {
        SPMD_REQUIRE(opts->version == SPMD_OP_OPTIONS_VERSION, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: opts->version is %u, not SPMD_OP_OPTIONS_VERSION (%u); initialize "
                     "the options with SPMD_OP_OPTIONS_INIT or spmd_op_options_init",
                     api, opts->version, SPMD_OP_OPTIONS_VERSION);
        SPMD_REQUIRE(opts->dry_run == 0 || opts->dry_run == 1, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: opts->dry_run is %d; pass 0 (run) or 1 (plan only)", api, opts->dry_run);
        SPMD_REQUIRE(!opts->dry_run || opts->plan, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: opts->dry_run is 1 but opts->plan is NULL; give a spmd_op_plan to "
                     "receive the plan",
                     api);
        const spmd_comm_budget *b = opts->budget;
        SPMD_REQUIRE(!b || (b->max_bytes_per_device >= -1 && b->max_collectives >= -1 &&
                            b->bytes_per_device >= 0 && b->collectives >= 0),
                     SPMD_ERR_INVALID_ARGUMENT,
                     "%s: opts->budget holds negative numbers (limits -1 mean none; what was "
                     "spent starts at 0)",
                     api);
    }
    return SPMD_OK;
}

/* "Mesh('x': 4) on devices [4, 5, 6, 7]": meshes of one shape differ in their devices */
static void mesh_text(const spmd_mesh *mesh, char *buf, size_t size)
{
    char shape[SPMD__MESH_TEXT];
    if (spmd_mesh_format(mesh, shape, sizeof shape) != SPMD_OK)
        snprintf(shape, sizeof shape, "a mesh");
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, buf, size);
    spmd__strbuf_printf(&sb, "%s on devices ", shape);
    spmd__strbuf_int_list(&sb, mesh->device_ids, mesh->size);
}

static spmd_status same_mesh(const spmd__xop *op, const spmd_mesh *mesh, const char *arg)
{
    if (!op->mesh || spmd_mesh_equal(op->mesh, mesh))
        return SPMD_OK;
    char a[SPMD__MESH_TEXT + 128], b[SPMD__MESH_TEXT + 128];
    mesh_text(op->mesh, a, sizeof a);
    mesh_text(mesh, b, sizeof b);
    return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                      "%s: %s is on %s, but the earlier operands are on %s; an op takes arrays "
                      "of one mesh: move it there with spmd_reshard first",
                      op->api, arg, b, a);
}

spmd_status spmd__xop_operand(spmd__xop *op, spmd_array *x, const char *arg)
{
    SPMD_CHECK(spmd__array_check(x, op->api, arg));
    SPMD_CHECK(same_mesh(op, x->sharding->mesh, arg));
    if (!op->mesh)
        op->mesh = x->sharding->mesh;
    int i = op->nin++;
    op->in[i] = x;
    spmd__xtype_of(x, &op->in_type[i]);
    if (x->sharding->unreduced_mask) {
        char type[192];
        spmd__xtype_format(&op->in_type[i], type, sizeof type);
        return SPMD_ERROR(SPMD_ERR_SPEC,
                          "%s: %s is %s, unreduced (its devices hold partial sums); add them up "
                          "first with spmd_array_reshard_to(x, a sharding without unreduced "
                          "axes)",
                          op->api, arg, type);
    }
    return SPMD_OK;
}

spmd_status spmd__xop_mesh(spmd__xop *op, spmd_mesh *mesh)
{
    SPMD_CHECK(spmd__mesh_check_current(mesh, op->api, "mesh"));
    SPMD_CHECK(spmd__mesh_refuse_abstract(mesh, op->api, "mesh"));
    op->mesh = mesh;
    return SPMD_OK;
}

spmd_status spmd__xop_requested(const spmd__xop *op, const spmd_sharding *out_sharding,
                                const spmd__xtype *like, spmd__xtype *req, int *given)
{
    *given = out_sharding != NULL;
    if (!out_sharding) {
        *req = *like;
        return SPMD_OK;
    }
    if (out_sharding == SPMD_REPLICATED) {
        spmd__xtype_replicated(like->mesh, like->ndim, like->shape, like->dtype, req);
        return SPMD_OK;
    }
    SPMD_CHECK(spmd__sharding_check(out_sharding, op->api, "out_sharding"));
    if (!spmd_mesh_equal(out_sharding->mesh, like->mesh)) {
        char a[SPMD__MESH_TEXT + 128], b[SPMD__MESH_TEXT + 128];
        mesh_text(out_sharding->mesh, a, sizeof a);
        mesh_text(like->mesh, b, sizeof b);
        return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                          "%s: out_sharding is on %s, but the operands are on %s; give a "
                          "sharding on the operands' mesh (move the result with spmd_reshard "
                          "after)",
                          op->api, a, b);
    }
    SPMD_REQUIRE(out_sharding->length <= like->ndim, SPMD_ERR_SPEC,
                 "%s: out_sharding has %d entries, but the result has rank %d", op->api,
                 out_sharding->length, like->ndim);
    spmd__xtype_with_sharding(like, out_sharding, req);
    return spmd__xtype_check_divisible(req, op->api, "the result under out_sharding");
}

void spmd__xop_reshard_operand(spmd__xop *op, int i, const spmd__xtype *to)
{
    if (spmd__xtype_same_layout(&op->in_type[i], to))
        return;
    spmd__plan_reshard(&op->plan, &op->in_type[i], to);
    op->in_type[i] = *to;
    op->reshard_in[i] = 1;
}

void spmd__xop_describe_more(spmd__xop *op, const char *fmt, ...)
{
    size_t len = strlen(op->what);
    if (len && op->what[len - 1] == ')')
        len--; /* the parameters go inside the parentheses */
    if (len > sizeof op->what - 2)
        len = sizeof op->what - 2; /* a text cut short keeps room for its ')' */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(op->what + len, sizeof op->what - len - 1, fmt, ap);
    va_end(ap);
    len = strlen(op->what);
    op->what[len] = ')';
    op->what[len + 1] = '\0';
}

void spmd__xop_describe(spmd__xop *op, const char *name)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, op->what, sizeof op->what);
    spmd__strbuf_printf(&sb, "%s(", name);
    for (int i = 0; i < op->nin; i++) {
        char type[192];
        spmd__xtype_format(&op->in_type[i], type, sizeof type);
        spmd__strbuf_printf(&sb, "%s%s", i ? ", " : "", type);
    }
    spmd__strbuf_printf(&sb, ")");
}

static spmd_status charge_budget(const spmd__xop *op)
{
    spmd_comm_budget *b = op->opts ? op->opts->budget : NULL;
    if (!b)
        return SPMD_OK;
    int64_t bytes = b->bytes_per_device + op->plan.bytes_per_device;
    int colls = b->collectives + op->plan.nsteps;
    if ((b->max_bytes_per_device >= 0 && bytes > b->max_bytes_per_device) ||
        (b->max_collectives >= 0 && colls > b->max_collectives)) {
        char steps[512];
        spmd__plan_steps_text(&op->plan, steps, sizeof steps);
        return SPMD_ERROR(SPMD_ERR_SPEC,
                          "%s: over the communication budget: %s (%s) needs %s, %lld B per "
                          "device, after %d collectives and %lld B spent, against limits of "
                          "%d collectives and %lld B (-1: none); nothing ran",
                          op->api, op->what, op->plan.out_type, steps,
                          (long long)op->plan.bytes_per_device, b->collectives,
                          (long long)b->bytes_per_device, b->max_collectives,
                          (long long)b->max_bytes_per_device);
    }
    return SPMD_OK;
}

/* what an op that ran (or was planned dry) spent */
static void spend_budget(const spmd__xop *op)
{
    spmd_comm_budget *b = op->opts ? op->opts->budget : NULL;
    if (!b)
        return;
    b->bytes_per_device += op->plan.bytes_per_device;
    b->collectives += op->plan.nsteps;
}

spmd_status spmd__xop_plan(spmd__xop *op, const spmd__xtype *body, const spmd__xtype *out,
                           int *done, spmd_array **result)
{
    *done = 0;
    op->body = *body;
    op->out = *out;
    SPMD_CHECK(spmd__xtype_check_divisible(body, op->api, "the result"));
    if (out->unreduced && !spmd__xtype_same_layout(body, out)) {
        char a[192], b[192];
        spmd__xtype_format(body, a, sizeof a);
        spmd__xtype_format(out, b, sizeof b);
        return SPMD_ERROR(SPMD_ERR_SPEC,
                          "%s: the result is %s, and out_sharding asks for %s: only a "
                          "reduction or a contraction leaves partial sums, over exactly the axes "
                          "it reduces, in its own layout (a reshard never makes them); ask for "
                          "that, or for an out_sharding without unreduced axes",
                          op->api, a, b);
    }
    if (!spmd__xtype_same_layout(body, out) && op->has_body)
        spmd__plan_reshard(&op->plan, body, out);
    spmd__plan_finish(&op->plan, out);
    SPMD_CHECK(charge_budget(op));
    if (op->opts && op->opts->dry_run) {
        *op->opts->plan = op->plan;
        *result = NULL;
        *done = 1;
        spend_budget(op);
    }
    return SPMD_OK;
}

/* reshards `x` to type t into *out (a new array) */
static spmd_status reshard_to(spmd_array *x, const spmd__xtype *t, spmd_array **out)
{
    spmd_sharding *sh = NULL;
    SPMD_CHECK(spmd__xtype_sharding(t, &sh));
    spmd_status st = spmd_reshard(x, sh, NULL, out);
    spmd_sharding_destroy(sh);
    return st;
}

static spmd_status run_body(spmd__xop *op, spmd_array *const *ins, spmd_array **out)
{
    spmd_sharding *in_sh[SPMD__XOP_MAX_IN] = {0}, *out_sh = NULL;
    const spmd_spec *in_specs[SPMD__XOP_MAX_IN], *out_spec = NULL;
    spmd_status st = SPMD_OK;
    for (int i = 0; i < op->nin && st == SPMD_OK; i++) {
        st = spmd__xtype_sharding(&op->in_type[i], &in_sh[i]);
        if (st == SPMD_OK)
            in_specs[i] = spmd_sharding_spec(in_sh[i]);
    }
    if (st == SPMD_OK)
        st = spmd__xtype_sharding(&op->body, &out_sh);
    if (st == SPMD_OK) {
        out_spec = spmd_sharding_spec(out_sh);
        spmd_out_desc desc;
        memset(&desc, 0, sizeof desc);
        desc.ndim = op->body.ndim;
        desc.dtype = op->body.dtype;
        for (int d = 0; d < desc.ndim; d++)
            desc.shape[d] = op->body.shape[d];
        /* the rules make the result alike where its type says it is replicated */
        spmd_shard_map_options smo = SPMD_SHARD_MAP_OPTIONS_INIT;
        smo.check_replication = 0;
        st = spmd_shard_map(op->mesh, op->fn, op->user, op->nin, ins, in_specs, 1, &desc, &out_spec,
                            &smo, out);
    }
    for (int i = 0; i < op->nin; i++)
        spmd_sharding_destroy(in_sh[i]);
    spmd_sharding_destroy(out_sh);
    return st;
}

static spmd_status run_locked(spmd__xop *op, spmd_array **out)
{
    spmd_array *ins[SPMD__XOP_MAX_IN] = {0}, *moved[SPMD__XOP_MAX_IN] = {0}, *body = NULL;
    spmd_status st = SPMD_OK;
    for (int i = 0; i < op->nin && st == SPMD_OK; i++) {
        ins[i] = op->in[i];
        if (op->reshard_in[i]) {
            st = reshard_to(op->in[i], &op->in_type[i], &moved[i]);
            ins[i] = moved[i];
        }
    }
    if (st == SPMD_OK && op->has_body)
        st = run_body(op, ins, &body);
    else if (st == SPMD_OK) {
        body = ins[0] == op->in[0] ? NULL : ins[0];
        moved[0] = NULL;
        if (!body)
            st = spmd_array_copy(op->in[0], &body);
    }
    for (int i = 0; i < op->nin; i++)
        spmd_array_destroy(moved[i]);
    if (st == SPMD_OK && op->has_body && !spmd__xtype_same_layout(&op->body, &op->out)) {
        spmd_array *final = NULL;
        st = reshard_to(body, &op->out, &final);
        spmd_array_destroy(body);
        body = final;
    }
    if (st == SPMD_OK)
        *out = body;
    else
        spmd_array_destroy(body);
    return st;
}

spmd_status spmd__xop_run(spmd__xop *op, spmd_array **out)
{
    spmd__call_entry entry;
    SPMD_CHECK(spmd__calls_enter(op->api, &entry));
    if (spmd__tracing()) {
        char text[SPMD_TRACE_TEXT], steps[512];
        spmd__plan_steps_text(&op->plan, steps, sizeof steps);
        spmd__strbuf sb;
        spmd__strbuf_init(&sb, text, sizeof text);
        spmd__strbuf_printf(
            &sb, "%s%s%s: %s -> %s: %s", op->api, op->opts && op->opts->where ? " at " : "",
            op->opts && op->opts->where ? op->opts->where : "", op->what, op->plan.out_type, steps);
        uint64_t fp = spmd__fnv1a(SPMD__FNV1A_SEED, op->api, strlen(op->api));
        fp = spmd__fnv1a(fp, op->what, strlen(op->what));
        spmd__trace_call_describe(0, fp, text);
    }
    uint64_t tag = spmd__fnv1a(SPMD__FNV1A_SEED, op->api, strlen(op->api));
    tag = spmd__fnv1a(tag, op->what, strlen(op->what));
    tag = spmd__fnv1a(tag, op->plan.out_type, strlen(op->plan.out_type));
    spmd__calls_set_op(op->what, tag | 1);
    spmd_status st = run_locked(op, out);
    spmd__calls_set_op(NULL, 0);
    spmd__calls_exit(&entry, st);
    if (st == SPMD_OK && op->opts && op->opts->plan)
        *op->opts->plan = op->plan;
    if (st == SPMD_OK)
        spend_budget(op);
    return st;
}

spmd_status spmd__xop_block_start(spmd_ctx *ctx, const spmd__xtype *t, int64_t *start)
{
    for (int d = 0; d < t->ndim; d++) {
        start[d] = 0;
        if (!t->naxes[d])
            continue;
        char axes[SPMD__AXES_TEXT];
        int index = 0;
        spmd__axes_text_dim(t, d, axes, sizeof axes);
        SPMD_CHECK(spmd_axis_index(ctx, axes, &index));
        start[d] = (int64_t)index * (t->shape[d] / spmd__xtype_shards(t, d));
    }
    return SPMD_OK;
}

void spmd__xop_plan_gathers(spmd__xop *op, const spmd__xtype *t, const int *gather)
{
    spmd__xtype cur = *t;
    for (int d = 0; d < t->ndim; d++) {
        if (!gather[d])
            continue;
        int64_t block[SPMD_MAX_RANK];
        char axes[SPMD__AXES_TEXT];
        spmd__xtype_block_shape(&cur, block);
        spmd__axes_text_dim(t, d, axes, sizeof axes);
        spmd__plan_collective(&op->plan, "all_gather", axes, t->dtype, t->ndim, block,
                              (int)spmd__xtype_shards(t, d));
        cur.naxes[d] = 0;
    }
}

spmd_status spmd__xop_gather_dims(spmd_ctx *ctx, const spmd__xtype *t, const int *gather,
                                  spmd_block *x)
{
    for (int d = 0; d < t->ndim; d++) {
        if (!gather[d])
            continue;
        char axes[SPMD__AXES_TEXT];
        int n = 1;
        spmd__axes_text_dim(t, d, axes, sizeof axes);
        SPMD_CHECK(spmd_axis_size(ctx, axes, &n));
        int64_t shape[SPMD_MAX_RANK];
        memcpy(shape, x->shape, sizeof shape);
        shape[d] *= n;
        spmd_block whole;
        SPMD_CHECK(spmd_ctx_alloc(ctx, x->ndim, shape, x->dtype, &whole));
        SPMD_CHECK(spmd_all_gather_invariant(ctx, x, &whole, axes, d, 1));
        *x = whole;
    }
    return SPMD_OK;
}

spmd_block spmd__block_view(const spmd_block *b, int ndim, const int64_t *shape)
{
    spmd_block v;
    memset(&v, 0, sizeof v);
    v.data = b->data;
    v.dtype = b->dtype;
    v.ndim = ndim;
    for (int d = 0; d < ndim; d++)
        v.shape[d] = shape[d];
    return v;
}
