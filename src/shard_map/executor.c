/* spmd_shard_map and spmd_plan: validation once, then per call: run fn on every local device
 * of the mesh, agree on the outcome with the other processes, check claimed replication (its
 * digests and sums in replication.c; the spmd_ctx fn runs with in context.c). */
#include "shard_map/executor.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

#include "runtime/calls/calls.h"
#include "runtime/base/log.h"
#include "runtime/runtime_impl.h"
#include "runtime/base/digest.h"
#include "runtime/calls/trace.h"
#include "runtime/devices/worker.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"
#include "sharding/spec_impl.h"
#include "array/array_impl.h"
#include "shard_map/plan.h"

#define SPMD__MAGIC_PLAN 0x504c414eu /* "PLAN" */

spmd_status spmd_shard_map_options_init(spmd_shard_map_options *opts, unsigned int version)
{
    SPMD_REQUIRE_NOT_NULL(opts, "spmd_shard_map_options_init");
    SPMD_REQUIRE(version == SPMD_SHARD_MAP_OPTIONS_VERSION, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_shard_map_options_init: version %u is not supported; use "
                 "SPMD_SHARD_MAP_OPTIONS_VERSION (%d)",
                 version, SPMD_SHARD_MAP_OPTIONS_VERSION);
    const spmd_shard_map_options defaults = SPMD_SHARD_MAP_OPTIONS_INIT;
    *opts = defaults;
    return SPMD_OK;
}

/* ---- plan construction ---- */

void spmd_plan_destroy(spmd_plan *plan)
{
    if (!plan || plan->magic != SPMD__MAGIC_PLAN)
        return;
    plan->magic = SPMD__MAGIC_DEAD;
    free(plan->trace_text);
    for (int i = 0; i < plan->nin && plan->in_shardings; i++)
        spmd_sharding_destroy(plan->in_shardings[i]);
    for (int j = 0; j < plan->nout && plan->out_shardings; j++)
        spmd_sharding_destroy(plan->out_shardings[j]);
    free(plan->in_descs);
    free(plan->in_shardings);
    for (int i = 0; i < plan->nin && plan->accepted; i++)
        spmd_sharding_destroy(plan->accepted[i]);
    free(plan->accepted);
    free(plan->out_descs);
    free(plan->out_shardings);
    free(plan->out_blocks);
    free(plan->in_blocks);
    free(plan->check_output);
    free(plan->in_alike);
    free(plan->typed_output);
    free(plan->donate);
    free(plan->donate_to);
    free(plan->local_flat);
    free(plan->slot_of_ordinal);
    free(plan->slot_of_flat);
    spmd_mesh_destroy(plan->mesh);
    free(plan);
}

static spmd_status make_sharding(spmd_mesh *mesh, const spmd_spec *spec, const char *which, int k,
                                 spmd_sharding **out)
{
    char arg[32];
    snprintf(arg, sizeof arg, "%s[%d]", which, k);
    SPMD_CHECK(spmd__spec_check(spec, "spmd_shard_map", arg));
    spmd_status st = spmd_sharding_create(mesh, spec, out);
    if (st != SPMD_OK) {
        char detail[SPMD__MESSAGE_CAPACITY];
        snprintf(detail, sizeof detail, "%s", spmd_last_error());
        return SPMD_ERROR(st, "spmd_shard_map: %s: %s", arg, detail);
    }
    return SPMD_OK;
}

/* The mesh axes (of size > 1 unless `any_size`) that the spec leaves out, as bits: those it
 * claims replication along (0: none). Unreduced axes claim none: their devices hold partial
 * sums. */
static int left_out_axes(const spmd_sharding *sh, int any_size)
{
    const spmd_mesh *m = sh->mesh;
    int used[SPMD_MAX_MESH_AXES] = {0}, mask = 0;
    for (int j = 0; j < sh->length; j++)
        for (int k = 0; k < sh->spec->entry_size[j]; k++)
            used[sh->entry_mesh_axis[j][k]] = 1;
    for (int a = 0; a < m->ndim; a++)
        if (!used[a] && (any_size || m->shape[a] > 1) && !(sh->unreduced_mask >> a & 1))
            mask |= 1 << a;
    return mask;
}

static int replicated_axes(const spmd_sharding *sh) { return left_out_axes(sh, 0); }

static spmd_status check_desc(const spmd_out_desc *d, const char *which, int k)
{
    SPMD_REQUIRE(d->ndim >= 0 && d->ndim <= SPMD_MAX_RANK, SPMD_ERR_SHAPE,
                 "spmd_shard_map: %s[%d] has rank %d; use 0..%d", which, k, d->ndim, SPMD_MAX_RANK);
    SPMD_REQUIRE(spmd_dtype_size(d->dtype) != 0, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_shard_map: %s[%d] has dtype %d, which is not a dtype", which, k,
                 (int)d->dtype);
    return SPMD_OK;
}

static spmd_status block_shape(const spmd_sharding *sh, const spmd_out_desc *d, const char *what,
                               int64_t *block)
{
    SPMD_CHECK(spmd__sharding_check_shape(sh, d->ndim, d->shape, "spmd_shard_map", what));
    for (int j = 0; j < d->ndim; j++)
        block[j] = d->shape[j] / spmd__sharding_blocks(sh, j);
    return SPMD_OK;
}

/* Donated input i can hand its buffers to the first output of the same block and dtype. */
static void match_donations(spmd_plan *p)
{
    int *taken = calloc((size_t)(p->nout ? p->nout : 1), sizeof *taken);
    for (int i = 0; i < p->nin; i++) {
        p->donate_to[i] = -1;
        if (p->donate[i] != SPMD_DONATE_IN_PLACE || !taken)
            continue;
        for (int j = 0; j < p->nout; j++) {
            if (taken[j] || p->out_descs[j].dtype != p->in_descs[i].dtype ||
                p->out_descs[j].ndim != p->in_descs[i].ndim ||
                memcmp(p->out_blocks[j], p->in_blocks[i],
                       (size_t)p->in_descs[i].ndim * sizeof(int64_t)) != 0)
                continue;
            taken[j] = 1;
            p->donate_to[i] = j;
            break;
        }
    }
    free(taken);
}

static spmd_status plan_fill(spmd_plan *p, const spmd_in_desc *in_descs,
                             const spmd_spec *const *in_specs, const spmd_out_desc *out_descs,
                             const spmd_spec *const *out_specs)
{
    int nin = p->nin, nout = p->nout;
    size_t ni = (size_t)(nin ? nin : 1), no = (size_t)(nout ? nout : 1);
    p->in_descs = calloc(ni, sizeof *p->in_descs);
    p->in_shardings = calloc(ni, sizeof *p->in_shardings);
    p->accepted = calloc(ni, sizeof *p->accepted);
    p->in_blocks = calloc(ni, sizeof *p->in_blocks);
    p->donate = calloc(ni, sizeof *p->donate);
    p->donate_to = calloc(ni, sizeof *p->donate_to);
    p->out_descs = calloc(no, sizeof *p->out_descs);
    p->out_shardings = calloc(no, sizeof *p->out_shardings);
    p->out_blocks = calloc(no, sizeof *p->out_blocks);
    p->check_output = calloc(no, sizeof *p->check_output);
    p->in_alike = calloc(ni, sizeof *p->in_alike);
    p->typed_output = calloc(no, sizeof *p->typed_output);
    p->local_flat = malloc(2 * (size_t)(p->mesh->num_local ? p->mesh->num_local : 1) * sizeof(int));
    p->slot_of_ordinal = malloc((size_t)spmd_local_device_count() * sizeof(int) + 1);
    p->slot_of_flat = malloc((size_t)p->mesh->size * sizeof(int));
    SPMD_REQUIRE(p->in_descs && p->in_shardings && p->accepted && p->in_blocks && p->donate &&
                     p->donate_to && p->out_descs && p->out_shardings && p->out_blocks &&
                     p->check_output && p->in_alike && p->typed_output && p->local_flat &&
                     p->slot_of_ordinal && p->slot_of_flat,
                 SPMD_ERR_OUT_OF_MEMORY, "spmd_shard_map: out of memory");
    p->local_ordinal = p->local_flat + p->mesh->num_local;
    for (int i = 0; i < nin; i++) {
        char what[48];
        snprintf(what, sizeof what, "input %d", i);
        SPMD_CHECK(check_desc(&in_descs[i], "in_descs", i));
        p->in_descs[i] = in_descs[i];
        SPMD_CHECK(make_sharding(p->mesh, in_specs ? in_specs[i] : NULL, "in_specs", i,
                                 &p->in_shardings[i]));
        SPMD_CHECK(block_shape(p->in_shardings[i], &in_descs[i], what, p->in_blocks[i]));
        p->in_alike[i] = replicated_axes(p->in_shardings[i]);
    }
    for (int j = 0; j < nout; j++) {
        char what[48];
        snprintf(what, sizeof what, "output %d", j);
        SPMD_CHECK(check_desc(&out_descs[j], "out_descs", j));
        p->out_descs[j] = out_descs[j];
        SPMD_CHECK(make_sharding(p->mesh, out_specs ? out_specs[j] : NULL, "out_specs", j,
                                 &p->out_shardings[j]));
        SPMD_CHECK(block_shape(p->out_shardings[j], &out_descs[j], what, p->out_blocks[j]));
        p->check_output[j] = p->check_replication ? replicated_axes(p->out_shardings[j]) : 0;
        p->typed_output[j] = p->check_replication ? left_out_axes(p->out_shardings[j], 1) : 0;
    }
    const spmd__runtime *rt = spmd__runtime_get("spmd_shard_map");
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    p->num_local = p->mesh->num_local;
    for (int f = 0; f < p->mesh->size; f++)
        p->slot_of_flat[f] = -1;
    for (int k = 0; k < p->num_local; k++) {
        p->local_flat[k] = p->mesh->position_of[p->mesh->local_ids[k]];
        p->local_ordinal[k] = p->mesh->local_ids[k] - rt->first_local;
        p->slot_of_ordinal[p->local_ordinal[k]] = k;
        p->slot_of_flat[p->local_flat[k]] = k;
    }
    return SPMD_OK;
}

/* fn as every process of the same program sees it: its offset in the object that holds it
 * (processes load objects at different addresses), with the object's name. */
static uint64_t fn_identity(spmd_fn fn)
{
    uint64_t h = SPMD__FNV1A_SEED;
    Dl_info info;
    void *address = NULL;
    memcpy(&address, &fn, sizeof address < sizeof fn ? sizeof address : sizeof fn);
    if (dladdr(address, &info) && info.dli_fbase) {
        uintptr_t offset = (uintptr_t)address - (uintptr_t)info.dli_fbase;
        const char *name = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
        name = name ? name + 1 : info.dli_fname ? info.dli_fname : "";
        h = spmd__fnv1a(h, name, strlen(name));
        return spmd__fnv1a(h, &offset, sizeof offset);
    }
    return h; /* unknown: calls are then told apart by the rest alone */
}

static uint64_t hash_sharding(uint64_t h, const spmd_sharding *sh)
{
    char text[SPMD__SPEC_TEXT];
    spmd__ignore(spmd_spec_format(sh->spec, text, sizeof text));
    return spmd__fnv1a(h, text, strlen(text));
}

/* What the plan runs, alike on every process of the program: calls that differ in it must not
 * pair with each other (their data would land in the other's). */
static uint64_t plan_signature(const spmd_plan *p, const int *donate)
{
    uint64_t h = fn_identity(p->fn);
    h = spmd__fnv1a(h, &p->nin, sizeof p->nin);
    h = spmd__fnv1a(h, &p->nout, sizeof p->nout);
    for (int i = 0; i < p->nin; i++) {
        h = spmd__fnv1a(h, &p->in_descs[i].dtype, sizeof p->in_descs[i].dtype);
        h = spmd__fnv1a(h, p->in_descs[i].shape, (size_t)p->in_descs[i].ndim * sizeof(int64_t));
        h = hash_sharding(h, p->in_shardings[i]);
        int d = donate ? donate[i] : 0;
        h = spmd__fnv1a(h, &d, sizeof d);
    }
    for (int j = 0; j < p->nout; j++) {
        h = spmd__fnv1a(h, &p->out_descs[j].dtype, sizeof p->out_descs[j].dtype);
        h = spmd__fnv1a(h, p->out_descs[j].shape, (size_t)p->out_descs[j].ndim * sizeof(int64_t));
        h = hash_sharding(h, p->out_shardings[j]);
    }
    return spmd__fnv1a(h, &p->check_replication, sizeof p->check_replication);
}

static spmd_status spmd_plan_create_checked(spmd_mesh *mesh, spmd_fn fn, void *user, int nin,
                                            const spmd_in_desc *in_descs,
                                            const spmd_spec *const *in_specs, int nout,
                                            const spmd_out_desc *out_descs,
                                            const spmd_spec *const *out_specs,
                                            const spmd_shard_map_options *options, spmd_plan **out)
{
    const char *f = "spmd_plan_create";
    SPMD_REQUIRE_NOT_NULL(out, f);
    *out = NULL;
    SPMD_CHECK(spmd__mesh_check(mesh, f, "mesh"));
    SPMD_CHECK(spmd__mesh_refuse_abstract(mesh, f, "mesh"));
    const spmd__runtime *rt = spmd__runtime_get_session(f, mesh->session);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    SPMD_REQUIRE_NOT_NULL(fn, f);
    SPMD_REQUIRE(nin >= 0 && nin <= 4096 && nout >= 0 && nout <= 4096, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: nin=%d and nout=%d must each be in 0..4096", f, nin, nout);
    SPMD_REQUIRE(nin == 0 || (in_descs && in_specs), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: in_descs or in_specs is NULL but nin is %d", f, nin);
    SPMD_REQUIRE(nout == 0 || (out_descs && out_specs), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: out_descs or out_specs is NULL but nout is %d", f, nout);
    spmd_shard_map_options opts = SPMD_SHARD_MAP_OPTIONS_INIT;
    if (options) {
        SPMD_REQUIRE(options->version == SPMD_SHARD_MAP_OPTIONS_VERSION, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: options.version is %u; initialize options with "
                     "SPMD_SHARD_MAP_OPTIONS_INIT",
                     f, options->version);
        opts = *options;
    }
    SPMD_REQUIRE(opts.check_replication >= 0 &&
                     opts.check_replication <= SPMD_CHECK_REPLICATION_STRICT,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: options.check_replication is %d; use 1 (check), 0 (trust) or "
                 "SPMD_CHECK_REPLICATION_STRICT (2: hash every block)",
                 f, opts.check_replication);
    spmd_plan *p = calloc(1, sizeof *p);
    SPMD_REQUIRE(p != NULL, SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", f);
    p->magic = SPMD__MAGIC_PLAN;
    p->mesh = spmd_mesh_retain(mesh);
    p->fn = fn;
    p->user = user;
    p->nin = nin;
    p->nout = nout;
    p->check_replication = opts.check_replication != 0;
    p->strict_replication =
        opts.check_replication == SPMD_CHECK_REPLICATION_STRICT || rt->strict_replication;
    spmd_status st = plan_fill(p, in_descs, in_specs, out_descs, out_specs);
    if (st == SPMD_OK)
        p->signature = plan_signature(p, opts.donate);
    for (int i = 0; st == SPMD_OK && opts.donate && i < nin; i++)
        if (opts.donate[i] < 0 || opts.donate[i] > SPMD_DONATE_IN_PLACE)
            st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                            "%s: options.donate[%d] is %d; use 0, SPMD_DONATE (1) or "
                            "SPMD_DONATE_IN_PLACE (2)",
                            f, i, opts.donate[i]);
    if (st == SPMD_OK && opts.donate) {
        for (int i = 0; i < nin; i++)
            p->donate[i] = opts.donate[i];
        match_donations(p);
    } else if (st == SPMD_OK) {
        for (int i = 0; i < nin; i++)
            p->donate_to[i] = -1;
    }
    if (st != SPMD_OK) {
        spmd_plan_destroy(p);
        return st;
    }
    *out = p;
    return SPMD_OK;
}

/* ---- input checks at execution ---- */

static void device_list(spmd__strbuf *sb, const spmd_mesh *m)
{
    spmd__strbuf_int_list(sb, m->device_ids, m->size);
}

static spmd_status check_input(spmd_plan *p, int i, const spmd_array *a)
{
    char arg[32] = "in_arrays";
    if (!a || a->magic != SPMD__MAGIC_ARRAY || a->deleted) /* formatted only for the message */
        snprintf(arg, sizeof arg, "in_arrays[%d]", i);
    SPMD_CHECK(spmd__array_check(a, "spmd_shard_map", arg));
    const spmd_in_desc *d = &p->in_descs[i];
    int same_shape = a->ndim == d->ndim && a->dtype == d->dtype;
    for (int j = 0; same_shape && j < d->ndim; j++)
        same_shape = a->shape[j] == d->shape[j];
    if (!same_shape) {
        char want[256], got[256];
        spmd__strbuf sb;
        spmd__strbuf_init(&sb, want, sizeof want);
        spmd__strbuf_printf(&sb, "%s", spmd_dtype_name(d->dtype));
        spmd__strbuf_shape(&sb, d->shape, d->ndim);
        spmd__strbuf_init(&sb, got, sizeof got);
        spmd__strbuf_printf(&sb, "%s", spmd_dtype_name(a->dtype));
        spmd__strbuf_shape(&sb, a->shape, a->ndim);
        return SPMD_ERROR(SPMD_ERR_SHAPE, "spmd_shard_map: input %d is %s but the plan expects %s",
                          i, got, want);
    }
    if (p->accepted[i] == a->sharding)
        return SPMD_OK;
    if (!spmd_sharding_is_equivalent(a->sharding, p->in_shardings[i], d->ndim)) {
        char have[SPMD__MESSAGE_CAPACITY / 4], want[SPMD__MESSAGE_CAPACITY / 4];
        spmd__strbuf sb;
        spmd__strbuf_init(&sb, have, sizeof have);
        char text[SPMD__SHARDING_TEXT];
        spmd__ignore(spmd_sharding_format(a->sharding, text, sizeof text));
        spmd__strbuf_printf(&sb, "%s on devices ", text);
        device_list(&sb, a->sharding->mesh);
        spmd__strbuf_init(&sb, want, sizeof want);
        spmd__ignore(spmd_sharding_format(p->in_shardings[i], text, sizeof text));
        spmd__strbuf_printf(&sb, "%s on devices ", text);
        device_list(&sb, p->mesh);
        return SPMD_ERROR(SPMD_ERR_INCOMPATIBLE_DEVICES,
                          "spmd_shard_map: input %d is laid out as %s, but in_specs[%d] on this "
                          "mesh needs %s; reshard it first (spmd_reshard to that sharding), or "
                          "change in_specs",
                          i, have, i, want);
    }
    spmd_sharding_destroy(p->accepted[i]);
    p->accepted[i] = spmd_sharding_retain(a->sharding);
    return SPMD_OK;
}

/* ---- the call ---- */

typedef struct abort_record {
    unsigned long seq;
    int32_t status;
    int32_t process;
    char message[1000];
} abort_record;

spmd_status spmd__call_aborted_status(spmd__call *call)
{
    pthread_mutex_lock(&call->abort_lock);
    spmd_status st = call->abort_status;
    char message[SPMD__MESSAGE_CAPACITY];
    snprintf(message, sizeof message, "%s", call->abort_message);
    pthread_mutex_unlock(&call->abort_lock);
    spmd__error_set_raw(message);
    return st;
}

static int record_abort(spmd__call *call, spmd_status st, const char *message, int consequence)
{
    pthread_mutex_lock(&call->abort_lock);
    int first = !atomic_load(&call->aborted);
    if (first) {
        call->abort_status = st;
        call->abort_is_consequence = consequence;
        snprintf(call->abort_message, sizeof call->abort_message, "%s", message);
        atomic_store(&call->aborted, 1);
    }
    pthread_mutex_unlock(&call->abort_lock);
    if (first)
        spmd__mesh_state_wake_all(call->state);
    return first;
}

static spmd_status abort_call(spmd__call *call, spmd_status st, int consequence)
{
    char message[SPMD__MESSAGE_CAPACITY];
    snprintf(message, sizeof message, "%s", spmd_last_error());
    if (record_abort(call, st, message, consequence) && call->state->control) {
        abort_record r;
        memset(&r, 0, sizeof r);
        r.seq = call->seq;
        r.status = st;
        r.process = spmd_process_index();
        spmd__copy_text(r.message, sizeof r.message, message);
        spmd__comm_post_abort(call->state->control, &r, sizeof r);
    }
    return st;
}

spmd_status spmd__call_abort(spmd__call *call, spmd_status st) { return abort_call(call, st, 0); }

spmd_status spmd__call_abort_consequence(spmd__call *call, spmd_status st)
{
    return abort_call(call, st, 1);
}

spmd_status spmd__call_check_cancel(void *arg)
{
    spmd__call *call = arg;
    if (atomic_load(&call->aborted))
        return spmd__call_aborted_status(call);
    if (spmd__calls_has_verdict()) { /* the notes between processes ended the call */
        spmd_status st = spmd__calls_verdict(NULL);
        char message[SPMD__MESSAGE_CAPACITY];
        spmd__copy_text(message, sizeof message, spmd_last_error());
        record_abort(call, st, message, 0);
        return spmd__call_aborted_status(call);
    }
    abort_record r;
    if (call->state->control &&
        spmd__comm_poll_abort(call->state->control, call->seq, &r, sizeof r)) {
        char message[SPMD__MESSAGE_CAPACITY];
        snprintf(message, sizeof message, "process %d failed: %s", r.process, r.message);
        record_abort(call, (spmd_status)r.status, message, 1);
        return spmd__call_aborted_status(call);
    }
    return SPMD_OK;
}

typedef struct call_job {
    spmd_plan *plan;
    spmd__call *call;
    spmd_array *const *inputs;
    spmd_array **outputs;
    const int *aliased;             /* per output: a donated input's buffers were handed over */
    spmd__proof *proofs;            /* [local slot][output] (NULL: nothing to prove) */
    spmd__allocation **allocations; /* per local device: its spmd_ctx_alloc temporaries */
    uint64_t first_digest;          /* the collectives of the first local device's fn */
    unsigned first_count;           /* ... how many */
    uint64_t first_last[2];         /* ... the last */
} call_job;

/* `keep`: data movement between processes was given up, and MPI may still read or write the
 * temporaries fn passed to collectives: they then live until the process ends. */
static void free_allocations(spmd__allocation *list, int keep)
{
    while (list) {
        spmd__allocation *a = list;
        list = a->next;
        if (keep)
            spmd__comm_keep(a->buffer);
        else
            spmd__buffer_release(a->buffer); /* large ones stay in the pool for the next call */
        free(a);
    }
}

static const uint64_t no_collective[2] = {0, 0};

static void set_formatter(void) { spmd__calls_set_formatter(spmd__collective_format); }

static spmd_status device_task(int ordinal, void *arg)
{
    call_job *job = arg;
    spmd_plan *p = job->plan;
    int k = p->slot_of_ordinal[ordinal];
    spmd_ctx ctx;
    memset(&ctx, 0, offsetof(spmd_ctx, axes_text));
    ctx.axes_text[0] = '\0';
    ctx.call = job->call;
    ctx.flat = p->local_flat[k];
    ctx.ordinal = ordinal;
    ctx.device_id = p->mesh->device_ids[ctx.flat];
    spmd__mesh_coords(p->mesh, ctx.flat, ctx.coords);

    enum { STACK_BLOCKS = 8 };
    spmd_block stack_blocks[2 * STACK_BLOCKS];
    spmd_block *in = stack_blocks, *out = stack_blocks + STACK_BLOCKS;
    if (p->nin > STACK_BLOCKS || p->nout > STACK_BLOCKS) {
        in = malloc((size_t)(p->nin + p->nout) * sizeof *in);
        if (!in)
            return spmd__call_abort(job->call, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY,
                                                          "out of memory for the blocks of fn"));
        out = in + p->nin;
    }
    if (job->proofs) {
        ctx.proofs = job->proofs + (size_t)k * (size_t)p->nout;
        ctx.outs = out;
        ctx.nout = p->nout;
        ctx.ins = in;
        ctx.nin = p->by_value ? 0 : p->nin; /* pmap's unmapped inputs are each process's own */
        ctx.in_alike = p->in_alike;
    }
    spmd_status st = SPMD_OK;
    for (int i = 0; i < p->nin; i++) {
        const spmd_array *a = job->inputs[i];
        int s = spmd__array_shard_of_device(a, ctx.device_id);
        spmd__fill_block(&in[i], a->shards[s].buffer->data, a->dtype, a->ndim, p->in_blocks[i]);
    }
    int failed_output = -1;
    for (int j = 0; j < p->nout && st == SPMD_OK; j++) {
        spmd_array *o = job->outputs[j];
        spmd__shard_slot *slot = &o->shards[k];
        if (!job->aliased[j])
            st = spmd__buffer_create(ctx.device_id, o->shard_bytes, &slot->buffer);
        if (st == SPMD_OK)
            spmd__fill_block(&out[j], slot->buffer->data, o->dtype, o->ndim, p->out_blocks[j]);
        else
            failed_output = j;
        if (st == SPMD_OK && j < SPMD__CTX_OUT_BYTES) {
            ctx.out_data[j] = out[j].data;
            ctx.out_bytes[j] = spmd__block_bytes(&out[j]);
        }
    }
    if (st == SPMD_OK) {
        spmd_clear_error(); /* a message left by earlier work on this thread is not fn's */
        spmd__calls_device(ordinal, ctx.device_id, SPMD__DEVICE_RUNNING, 0, 0, no_collective);
        spmd__worker_set_context(&ctx);
        uint64_t traced = 0;
        if (spmd__tracing())
            traced = spmd__trace_begin(SPMD_TRACE_FN, job->call->number, job->call->seq,
                                       ctx.device_id, 0, job->call->signature,
                                       spmd__ctx_trace_digest(&ctx, p->nin, in), "fn");
        st = p->fn(&ctx, p->nin, in, p->nout, out, p->user);
        if (st == SPMD_OK && ctx.pending_sends)
            st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                            "fn returned on device %d with %d spmd_psend(s) that no spmd_precv "
                            "took; every psend needs its precv, with the same axes and pairs "
                            "(JAX: precv takes the token psend returns)",
                            ctx.device_id, ctx.pending_sends);
        /* fn's kernels must be done before anyone reads its outputs */
        spmd_status synced = spmd__ctx_sync(&ctx);
        if (st == SPMD_OK)
            st = synced;
        if (traced)
            spmd__trace_end(traced, st, spmd__ctx_trace_digest(&ctx, p->nout, out));
        if (st == SPMD_OK && ctx.proofs)
            spmd__replication_take_digests(p, &ctx, out);
        spmd__worker_set_context(NULL);
    }
    /* Temporaries outlive fn until every device is done: after an abort, a device's peers may
     * still be finishing a collective that reads or writes them. */
    if (ctx.allocations) /* a write only when needed: the devices' entries share lines */
        job->allocations[k] = ctx.allocations;
    if (k == 0) {
        job->first_digest = ctx.digest;
        job->first_count = ctx.seq;
        memcpy(job->first_last, ctx.last_what, sizeof job->first_last);
    }
    if (in != stack_blocks)
        free(in);
    /* fn's own error is the cause: record it before the others can see this device finished
     * and call it a collective mismatch */
    if (st != SPMD_OK && !atomic_load(&job->call->aborted)) {
        if (spmd_last_error()[0] == '\0')
            SPMD_ERROR(st, "fn returned %s without a message", spmd_status_name(st));
        char detail[SPMD__MESSAGE_CAPACITY];
        snprintf(detail, sizeof detail, "%s", spmd_last_error());
        if (failed_output >= 0) /* fn never ran */
            spmd__call_abort(job->call,
                             SPMD_ERROR(st,
                                        "could not allocate output %d's block (%zu bytes) on "
                                        "device %d (process %d), so fn did not run: %s",
                                        failed_output, job->outputs[failed_output]->shard_bytes,
                                        ctx.device_id, spmd_process_index(), detail));
        else
            spmd__call_abort(job->call, SPMD_ERROR(st, "fn failed on device %d (process %d): %s",
                                                   ctx.device_id, spmd_process_index(), detail));
    }
    /* Devices still waiting for this one in a collective can now tell it never will come;
     * so can other processes (calls.h). */
    spmd__calls_device(ordinal, ctx.device_id, SPMD__DEVICE_RETURNED, ctx.seq, 0, NULL);
    atomic_store(&job->call->state->returned[k].value, job->call->seq);
    if (atomic_load(&job->call->state->waiting) > 0)
        spmd__mesh_state_wake_all(job->call->state);
    return st;
}

/* ---- agreement between processes at the end of a call ---- */

/* What every process learns at the end of a call: reduced over the processes, never gathered. */
typedef struct outcome {
    uint64_t replication; /* the sum of the replication check (0: the claims hold) */
    uint64_t signature;   /* the least of the calls' signatures ... */
    int32_t status;       /* of the failure reported, SPMD_OK when none */
    int32_t process;      /* ... and where it happened */
    int32_t consequence;  /* ... only following from another process's */
    int32_t flags;        /* OUTCOME_ABANDONED, OUTCOME_SIGNATURES */
    uint32_t message_bytes;
    char message[1000];
} outcome;
enum {
    OUTCOME_ABANDONED = 1, /* some process gave up a wait: communicators are suspect */
    OUTCOME_SIGNATURES = 2 /* ... which differ: the processes ran other calls as this one */
};
#define OUTCOME_FIXED offsetof(outcome, message)

/* The failure every process reports: a root cause before a consequence, then the lowest
 * process. */
static int reported_before(const outcome *a, const outcome *b)
{
    if ((a->status != SPMD_OK) != (b->status != SPMD_OK))
        return a->status != SPMD_OK;
    if (a->consequence != b->consequence)
        return !a->consequence;
    return a->process < b->process;
}

static void merge_outcome(void *mine, const void *theirs, size_t bytes, void *arg)
{
    outcome *m = mine;
    const outcome *t = theirs;
    if (bytes < OUTCOME_FIXED)
        return;
    m->replication += t->replication;
    m->flags |= t->flags;
    if (t->signature != m->signature)
        m->flags |= OUTCOME_SIGNATURES;
    if (t->signature < m->signature)
        m->signature = t->signature;
    if (t->status != SPMD_OK && reported_before(t, m)) {
        m->status = t->status;
        m->process = t->process;
        m->consequence = t->consequence;
        m->message_bytes = bytes - OUTCOME_FIXED < sizeof m->message
                               ? (uint32_t)(bytes - OUTCOME_FIXED)
                               : (uint32_t)sizeof m->message;
        memcpy(m->message, t->message, m->message_bytes);
        *(size_t *)arg = OUTCOME_FIXED + m->message_bytes;
    }
}

static void describe_call(const void *arg, char *text, size_t size)
{
    const spmd__call *call = arg;
    snprintf(text, size, "the end of call #%lu on this mesh (its call #%lu, %s)", call->seq,
             call->number, call->thread_text);
}

/* "call #3 on this mesh: fn test_fn, 1 in, 1 out (...) (its call #7, thread 2)":
 * what the processes compare when their calls' signatures differ. */
static void describe_signature(const void *arg, char *text, size_t size)
{
    const spmd__call *call = arg;
    const spmd_plan *p = call->plan;
    char fn[96] = "";
    Dl_info info;
    void *address = NULL;
    memcpy(&address, &p->fn, sizeof address < sizeof p->fn ? sizeof address : sizeof p->fn);
    if (dladdr(address, &info) && info.dli_sname)
        snprintf(fn, sizeof fn, " fn %s", info.dli_sname);
    else if (dladdr(address, &info) && info.dli_fbase)
        snprintf(fn, sizeof fn, " fn at +0x%lx",
                 (unsigned long)((uintptr_t)address - (uintptr_t)info.dli_fbase));
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, size);
    spmd__strbuf_printf(&sb, "call #%lu on this mesh:%s, %d in, %d out", call->seq, fn, p->nin,
                        p->nout);
    for (int i = 0; i < p->nin && i < 2; i++) {
        char spec[64];
        spmd__ignore(spmd_spec_format(p->in_shardings[i]->spec, spec, sizeof spec));
        spmd__strbuf_printf(&sb, "%s%s", i ? " " : " (in ", spmd_dtype_name(p->in_descs[i].dtype));
        spmd__strbuf_shape(&sb, p->in_descs[i].shape, p->in_descs[i].ndim);
        spmd__strbuf_printf(&sb, " %s%s", spec, i + 1 == p->nin || i == 1 ? ")" : ",");
    }
    spmd__strbuf_printf(&sb, " (its call #%lu, %s)", call->number, call->thread_text);
    if (call->op_text[0])
        spmd__strbuf_printf(&sb, ", made by %s", call->op_text);
    if (call->first_count) { /* where fn's collectives differ, the last may show how */
        char last[SPMD__NOTE_WHAT];
        spmd__collective_format(call, call->first_last, last, sizeof last);
        spmd__strbuf_printf(&sb, "; its first device's collective #%u: %s", call->first_count,
                            last);
    }
}

/* The parts of a call's signature, for a message whose descriptions read alike. */
static void details_signature(const void *arg, spmd__details *d)
{
    const spmd__call *call = arg;
    const spmd_plan *p = call->plan;
    uint64_t in = SPMD__FNV1A_SEED, out = SPMD__FNV1A_SEED;
    for (int i = 0; i < p->nin; i++) {
        in = spmd__fnv1a(in, &p->in_descs[i], sizeof p->in_descs[i]);
        in = hash_sharding(in, p->in_shardings[i]);
        in = spmd__fnv1a(in, &p->donate[i], sizeof p->donate[i]);
    }
    for (int j = 0; j < p->nout; j++) {
        out = spmd__fnv1a(out, &p->out_descs[j], sizeof p->out_descs[j]);
        out = hash_sharding(out, p->out_shardings[j]);
    }
    d->names[0] = "fn";
    d->hashes[0] = fn_identity(p->fn);
    d->names[1] = "the inputs (dtypes, shapes, in_specs, donation)";
    d->hashes[1] = in;
    d->names[2] = "the outputs (dtypes, shapes, out_specs, the replication check)";
    d->hashes[2] = spmd__fnv1a(out, &p->check_replication, sizeof p->check_replication);
    d->names[3] = "the calling thread's name";
    d->hashes[3] = call->thread_tag;
    d->names[4] = "the collectives fn issued (their ops, axes, axis_index_groups and blocks)";
    d->hashes[4] = call->digest;
    d->names[5] = "the array op that made the call (its operands' types and parameters)";
    d->hashes[5] = call->op_tag;
    d->num_fields = 6;
}

/* What the call ran, with what its fn issued, as every process compares it at the end. */
static uint64_t call_signature(const spmd__call *call)
{
    return mix64(call->signature ^ mix64(call->digest));
}

/* The outcome's wait ends only with the exchange; meanwhile abort records that reach this
 * process go on down their trees (a process that never looked would cut its subtree off). */
static spmd_status pass_on_aborts(void *control)
{
    spmd__comm_pass_on_aborts(control);
    return SPMD_OK;
}

/* Every process learns every other's outcome, reduced (so that all return the same status: a
 * failure anywhere fails the call everywhere), and the sum of the replication check. */
static spmd_status exchange_outcomes(spmd__call *call, spmd_status local, uint64_t *replication,
                                     int *abandoned, int *everyone_finished)
{
    spmd__mesh_state *s = call->state;
    outcome mine;
    memset(&mine, 0, OUTCOME_FIXED);
    mine.replication = *replication;
    mine.status = local;
    mine.process = spmd_process_index();
    mine.flags = atomic_load(&call->abandoned) ? OUTCOME_ABANDONED : 0;
    mine.signature = call_signature(call);
    mine.consequence = atomic_load(&call->aborted) && call->abort_is_consequence;
    if (local != SPMD_OK) {
        spmd__copy_text(mine.message, sizeof mine.message, spmd_last_error());
        mine.message_bytes = (uint32_t)strlen(mine.message) + 1;
    }
    size_t bytes = OUTCOME_FIXED + mine.message_bytes;
    /* A process whose fn is done may find the others still waiting in a collective for a
     * process that never comes: they arrive here after the timeout, so it waits that long and a
     * grace period. After a full timeout spent on a process that never came, that one will not
     * answer here either: the others, which time out at about the same moment, only need the
     * grace period. */
    int64_t grace = spmd__comm_grace_ns();
    int64_t now = spmd__coarse_now_ns(), deadline = now + call->timeout_ns + grace;
    if (atomic_load(&call->peer_missing)) {
        /* counted from the wait that gave up, so that the call ends by its deadline + grace;
         * yet long enough for the others, which gave up at about the same moment */
        int64_t missed_at = atomic_load(&call->missed_at);
        deadline = (missed_at ? missed_at : now) + grace;
        if (deadline < now + grace / 5)
            deadline = now + grace / 5;
    }
    /* Tags of each call's own: a call abandoned without this exchange (calls.h) leaves no
     * message that a later one could take; processes at different calls tell each other by
     * their notes instead. Only a verdict that abandons the call ends it early: a mismatch
     * found meanwhile is reported through it. */
    static const spmd__wait_where end = {SPMD__PHASE_END, -1, NULL};
    spmd__agreement a = {mix64(call->seq), describe_call, call, NULL};
    spmd__wait w = {.deadline_ns = deadline,
                    .what = "spmd_shard_map (agreeing on the outcome)",
                    .key = call->seq * 1024 + 299,
                    .where = &end,
                    .cancelled = pass_on_aborts,
                    .arg = s->control,
                    .settled_only = 1,
                    .grace_in_deadline = 1};
    spmd_status st = spmd__comm_reduce_record(s->control, &a, &mine, &bytes, sizeof mine,
                                              merge_outcome, &bytes, &w);
    /* a mismatch means every process took part to the end (a message of another call, left
     * by one abandoned, met this exchange): nothing of it lingers */
    *everyone_finished = st == SPMD_OK || (st == SPMD_ERR_COLLECTIVE_MISMATCH && !w.peer_missing);
    if (st != SPMD_OK) {
        *abandoned = 1;
        if (local != SPMD_OK) { /* the call's own failure is the cause; who went missing helps */
            char after[SPMD__MESSAGE_CAPACITY];
            spmd__copy_text(after, sizeof after, spmd_last_error());
            char own[sizeof mine.message];
            spmd__copy_text(own, sizeof own, mine.message);
            /* Every process still running reaches this exchange, so the ones missing here are
             * gone; the call's own failure may name one that was only stuck in an earlier
             * collective, or nobody (data that stopped coming): who is gone comes first. */
            if (w.peer_missing)
                st = SPMD_ERROR(st, "%s; before that: %s", after, own);
            else
                st = SPMD_ERROR(local, "%s; then %s", own, after);
        }
        return st;
    }
    *abandoned |= (mine.flags & OUTCOME_ABANDONED) != 0;
    *replication = mine.replication;
    if (mine.status == SPMD_OK && (mine.flags & OUTCOME_SIGNATURES)) {
        /* The processes ran different calls as this one (another fn, specs, shapes, or thread
         * name): its outputs are not one call's. A second exchange, on the failure path only,
         * quotes two of them. */
        spmd__agreement sig = {call_signature(call), describe_signature, call, details_signature};
        spmd__wait again = {.deadline_ns = spmd__now_ns() + grace,
                            .what = "spmd_shard_map (comparing the calls)",
                            .key = call->seq * 1024 + 298,
                            .settled_only = 1};
        spmd_status found = spmd__comm_check(s->control, &sig, &again);
        if (found == SPMD_OK) /* nothing differs after all: say so rather than pass */
            found = SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH,
                               "call #%lu on this mesh: the processes ran calls "
                               "with different fn, specs, shapes or thread names",
                               call->seq);
        if (found != SPMD_ERR_COLLECTIVE_MISMATCH)
            *everyone_finished = 0; /* a process stopped meanwhile */
        return found;
    }
    if (mine.status == SPMD_OK)
        return SPMD_OK;
    mine.message[sizeof mine.message - 1] = '\0';
    /* a message relayed from yet another process already says where it came from */
    if (mine.process == spmd_process_index() || strncmp(mine.message, "process ", 8) == 0)
        spmd__error_set_raw(mine.message);
    else
        SPMD_ERROR((spmd_status)mine.status, "process %d failed: %s", (int)mine.process,
                   mine.message);
    return (spmd_status)mine.status;
}

/* ---- execution ---- */

static spmd_status create_outputs(spmd_plan *p, spmd_array **outputs)
{
    for (int j = 0; j < p->nout; j++)
        SPMD_CHECK(spmd__array_create_empty(p->out_shardings[j], p->out_descs[j].ndim,
                                            p->out_descs[j].shape, p->out_descs[j].dtype,
                                            "spmd_shard_map", &outputs[j]));
    return SPMD_OK;
}

/* Hands the buffers of inputs donated in place to their outputs when no other array shares
 * them. (Other donated inputs give their memory back when the call ends.) */
static void apply_donations(spmd_plan *p, spmd_array *const *inputs, spmd_array **outputs,
                            int *aliased)
{
    for (int i = 0; i < p->nin; i++) {
        if (p->donate[i] != SPMD_DONATE_IN_PLACE)
            continue;
        spmd_array *a = inputs[i];
        int j = p->donate_to[i], exclusive = 1;
        for (int s = 0; s < a->num_shards; s++)
            exclusive &= spmd__buffer_is_exclusive(a->shards[s].buffer);
        if (j < 0 || !exclusive) {
            SPMD_WARN("spmd_shard_map: donated input %d %s; it is deleted without being reused", i,
                      j < 0 ? "matches no output of the same block shape and dtype"
                            : "shares its buffers with another array");
            continue;
        }
        spmd_array *o = outputs[j];
        for (int k = 0; k < o->num_shards; k++) {
            int s = spmd__array_shard_of_device(a, o->shards[k].device_id);
            o->shards[k].buffer = spmd__buffer_retain(a->shards[s].buffer);
        }
        aliased[j] = 1;
    }
}

static spmd_status run_call(const char *entry, spmd_plan *p, call_job *job, spmd__call *call,
                            spmd_array *const *inputs, spmd_array **outputs, spmd__proof *proofs)
{
    enum { ON_STACK = 8 }; /* a small call allocates nothing here */
    int aliased_here[ON_STACK] = {0};
    spmd__allocation *allocations_here[ON_STACK] = {NULL};
    int *aliased = p->nout <= ON_STACK ? aliased_here : calloc((size_t)p->nout, sizeof *aliased);
    spmd__allocation **allocations = p->num_local <= ON_STACK
                                         ? allocations_here
                                         : calloc((size_t)p->num_local, sizeof *allocations);
    if (!aliased || !allocations) {
        if (aliased != aliased_here)
            free(aliased);
        if (allocations != allocations_here)
            free(allocations);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_shard_map: out of memory");
    }
    apply_donations(p, inputs, outputs, aliased);
    *job = (call_job){.plan = p,
                      .call = call,
                      .inputs = inputs,
                      .outputs = outputs,
                      .aliased = aliased,
                      .proofs = proofs,
                      .allocations = allocations};
    spmd_status st = spmd__run_on_devices(spmd__worker_entry_or(entry), p->num_local,
                                          p->local_ordinal, device_task, job);
    for (int k = 0; k < p->num_local; k++)
        free_allocations(allocations[k], atomic_load(&call->data_abandoned));
    if (allocations != allocations_here)
        free(allocations);
    if (atomic_load(&call->aborted))
        st = spmd__call_aborted_status(call); /* the root cause, not a bystander's error */
    call->digest = job->first_digest;
    call->first_count = job->first_count;
    memcpy(call->first_last, job->first_last, sizeof call->first_last);
    if (aliased != aliased_here)
        free(aliased);
    return st;
}

/* After data movement between processes was given up, MPI may still read the inputs and
 * write the outputs: their buffers then live until the process ends. */
static void keep_buffers(spmd_plan *p, spmd_array *const *inputs, spmd_array **outputs)
{
    for (int k = 0; k < p->nin + p->nout; k++)
        spmd__array_keep_buffers(k < p->nin ? inputs[k] : outputs[k - p->nin]);
}

/* "spmd_shard_map on Mesh('i': 4, axis_types=(Auto,)) (devices [0, 1, 2, 3]), call #3 on that mesh"
 */
/* "spmd_shard_map on Mesh('i': 4, axis_types=(Auto,)) (devices [0, 1, 2, 3]" */
static void mesh_part(const spmd__call *call, spmd__strbuf *sb)
{
    char mesh[SPMD__MESH_TEXT];
    spmd__ignore(spmd_mesh_format(call->mesh, mesh, sizeof mesh));
    spmd__strbuf_printf(sb, "spmd_shard_map on %s (devices ", mesh);
    spmd__strbuf_int_list(sb, call->mesh->device_ids, call->mesh->size);
}

static void describe_mesh_call(const void *arg, char *text, size_t size)
{
    const spmd__call *call = arg;
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, size);
    mesh_part(call, &sb);
    spmd__strbuf_printf(&sb, "), call #%lu on that mesh", call->seq);
}

/* The trace's text of the call; the mesh's part is formatted once per plan (the call lock
 * orders the calls that use a plan). */
static void trace_call(spmd_plan *p, const spmd__call *call)
{
    char what[SPMD_TRACE_TEXT];
    if (!p->trace_text) { /* cut to leave room for the call's number */
        spmd__strbuf sb;
        spmd__strbuf_init(&sb, what, SPMD_TRACE_TEXT - 40);
        mesh_part(call, &sb);
        p->trace_text = strdup(what);
    }
    snprintf(what, sizeof what, "%s), call #%lu on that mesh", p->trace_text ? p->trace_text : "",
             call->seq);
    spmd__trace_call_describe(call->seq, call->signature, what);
}

/* A call another process abandoned is dropped here too, with the tables its peers dropped. */
static const char *abandon_then_discard(spmd__mesh_state *state, const char *reason)
{
    spmd__mesh_state_discard_comms(state, 0);
    return reason;
}

static spmd_status execute(const char *entry, spmd_plan *p, spmd_array *const *inputs,
                           spmd_array **outputs)
{
    const spmd__runtime *rt = spmd__runtime_get_session("spmd_shard_map", p->mesh->session);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    spmd__mesh_state *state = spmd__mesh_state_get(p->mesh);
    if (!state)
        return SPMD_ERR_OUT_OF_MEMORY;
    static pthread_once_t formatter_once = PTHREAD_ONCE_INIT;
    pthread_once(&formatter_once, set_formatter);
    for (int j = 0; j < p->nout; j++)
        outputs[j] = NULL;
    /* The job and the head of the call, which every device thread reads first, side by side. */
    struct call_frame {
        call_job job;
        spmd__call call;
    } frame;
    /* all but the failure message, which is written before anyone reads it */
    memset(&frame, 0, offsetof(struct call_frame, call) + offsetof(spmd__call, abort_message));
    spmd__call *const call = &frame.call;
    call->mesh = p->mesh;
    call->state = state;
    call->plan = p;
    /* numbered first: a set-up that fails counts as a call on every process alike */
    call->seq = ++state->call_seq;
    call->number = spmd__calls_number();
    call->thread = spmd__thread_number();
    spmd__thread_text(call->thread_text, sizeof call->thread_text);
    call->thread_tag = spmd__thread_tag();
    snprintf(call->op_text, sizeof call->op_text, "%s",
             spmd__calls_op_text() ? spmd__calls_op_text() : "");
    call->op_tag = spmd__calls_op_tag();
    call->signature = p->signature ^ call->thread_tag ^ mix64(call->op_tag);
    if (spmd__tracing())
        trace_call(p, call);
    call->timeout_ns = rt->collective_timeout_ns;
    call->platform = rt->platform;
    call->slot_of_flat = p->slot_of_flat;
    int spans = p->mesh->num_processes > 1;
    spmd__call_about about = {
        0, call->seq, p->mesh->processes, p->mesh->num_processes, describe_mesh_call, call};
    if (spans) { /* what this process is doing, for the others' notes (calls.h) */
        char reason[SPMD__NOTE_TEXT];
        about.comm_id = spmd__mesh_state_identity(p->mesh, state);
        /* another process gave up on this call: it issued its calls in another order */
        SPMD_REQUIRE(!spmd__calls_start(&about, reason, sizeof reason),
                     SPMD_ERR_COLLECTIVE_MISMATCH, "spmd_shard_map: call #%lu on this mesh: %s",
                     call->seq, abandon_then_discard(state, reason));
    }
    SPMD_CHECK(spmd__mesh_state_setup(p->mesh, state, rt->collective_timeout_ns, call->seq));
    if (spans) {
        /* never the in-process path for a mesh that spans processes */
        SPMD_REQUIRE(state->control != NULL, SPMD_ERR_DISTRIBUTED,
                     "spmd_shard_map: this mesh's communicators were given up after an earlier "
                     "failure; destroy it and create a new mesh");
    }
    pthread_mutex_init(&call->abort_lock, NULL);

    int checked = 0, checked_shards = 0, typed = 0;
    for (int j = 0; j < p->nout; j++) {
        typed |= p->typed_output[j] != 0;
        if (p->check_output[j]) {
            checked++;
            checked_shards += p->num_local;
        }
    }
    /* how fn's blocks were written (typed_output covers check_output); NULL: nothing to check */
    enum { ON_STACK = 8 }; /* a small call's records take no heap memory */
    spmd__proof proofs_here[ON_STACK];
    size_t num_proofs = (size_t)p->num_local * (size_t)p->nout;
    spmd__proof *proofs = NULL;
    if (typed && num_proofs <= ON_STACK) {
        memset(proofs_here, 0, num_proofs * sizeof *proofs);
        proofs = proofs_here;
    } else if (typed) {
        proofs = calloc(num_proofs, sizeof *proofs);
    }
    spmd_status st = typed && !proofs
                         ? SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_shard_map: out of memory")
                         : SPMD_OK;
    if (st == SPMD_OK)
        st = create_outputs(p, outputs);
    int ran = st == SPMD_OK;
    if (ran)
        st = run_call(entry, p, &frame.job, call, inputs, outputs, proofs);
    if (st == SPMD_OK)
        st = spmd__replication_refuse_varying(p, proofs);

    int abandoned = atomic_load(&call->abandoned), everyone_finished = 0, settled = 0;
    if (spans && spmd__calls_has_verdict() == 2) {
        /* abandoned without the final agreement: every process taking part does the same */
        st = spmd__calls_verdict(&settled);
    } else if (spans) {
        /* this process's digests, and the sum that checks them everywhere at once */
        uint64_t digests_here[ON_STACK] = {0};
        uint64_t *local = checked_shards <= ON_STACK
                              ? digests_here
                              : calloc((size_t)checked_shards, sizeof *local);
        if (!local && st == SPMD_OK)
            st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_shard_map: out of memory");
        if (local && st == SPMD_OK)
            spmd__replication_shard_digests(p, outputs, proofs, 1, local);
        uint64_t sum =
            st == SPMD_OK && checked ? spmd__replication_sum(p, outputs, local, 0, INT64_MAX) : 0;
        st = exchange_outcomes(call, st, &sum, &abandoned, &everyone_finished);
        if (st != SPMD_OK && spmd__calls_has_verdict() == 2)
            st = spmd__calls_verdict(&settled); /* abandoned while agreeing */
        if (st == SPMD_OK && sum != 0) {
            /* every process: the bytes of every block now, as some were only proven */
            spmd__replication_shard_digests(p, outputs, proofs, 0, local);
            st = spmd__replication_find_differing(p, call, outputs, local, checked);
            if (st != SPMD_ERR_SPEC && st != SPMD_OK) { /* a process stopped during the search */
                abandoned = 1;
                everyone_finished = 0;
            }
        }
        if (local != digests_here)
            free(local);
    } else if (st == SPMD_OK && checked) {
        size_t digest_bytes = (size_t)checked * (size_t)p->mesh->size * sizeof(uint64_t);
        uint64_t *digests = calloc(1, digest_bytes);
        st =
            digests ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_shard_map: out of memory");
        if (st == SPMD_OK) {
            spmd__replication_local_digests(p, outputs, proofs, 1, digests);
            st = spmd__replication_check(p, digests);
        }
        if (st == SPMD_ERR_SPEC && proofs) { /* some were only proven: their bytes decide */
            spmd__replication_local_digests(p, outputs, proofs, 0, digests);
            st = spmd__replication_check(p, digests);
        }
        free(digests);
    }
    if (proofs != proofs_here)
        free(proofs);

    if (st != SPMD_OK)
        spmd__mesh_state_drain(state, call->seq); /* what no wait consumed would pile up */
    /* Waits given up across processes may have left exchanges half done in the group
     * communicators: replace them when every process made it to the end, else give up on the
     * mesh (a process is stuck or gone, and creating communicators would wait for it). */
    /* After any failure between processes the tables go too: some processes may have built
     * tables (and numbered groupings) in the failed call that others never reached. */
    /* An abandoned call (calls.h) is dropped alike by every process taking part: the tables
     * go, and no message of it can meet a later call (its exchanges had tags of their own). */
    if (settled || ((abandoned || (st != SPMD_OK && spans)) && everyone_finished))
        spmd__mesh_state_discard_comms(state, atomic_load(&call->data_abandoned));
    else if (abandoned)
        spmd__mesh_state_break(state, spmd_last_error());
    if (atomic_load(&call->data_abandoned))
        keep_buffers(p, inputs, outputs);
    /* Donated inputs are gone once the call ran, whatever its outcome; only now, once MPI
     * can no longer read them or they are kept for it. */
    for (int i = 0; ran && i < p->nin; i++)
        if (p->donate[i])
            spmd__array_mark_deleted(inputs[i], "spmd_shard_map");
    if (atomic_load(&call->aborted))
        spmd__mesh_state_reset_rendezvous(state);
    pthread_mutex_destroy(&call->abort_lock);
    if (st != SPMD_OK)
        for (int j = 0; j < p->nout; j++) {
            spmd_array_destroy(outputs[j]);
            outputs[j] = NULL;
        }
    return st;
}

static spmd_status check_call(spmd_plan *plan, spmd_array *const *in_arrays,
                              spmd_array **out_arrays);

/* A process that owns no device of the mesh runs nothing and meets nobody, as a JAX process
 * outside a computation's devices: its outputs are the same global arrays with no shards (what
 * spmd_process_allgather and spmd_reshard take from every process). */
static spmd_status outside_the_mesh(spmd_plan *plan, spmd_array *const *in_arrays,
                                    spmd_array **out_arrays)
{
    /* the call lock, unnumbered: the plan's accepted shardings are the call's alone (no
     * number, so that no process's calls are numbered differently for taking no part) */
    spmd__call_entry lock;
    SPMD_CHECK(spmd__calls_enter_unnumbered("spmd_shard_map", &lock));
    spmd_status st = check_call(plan, in_arrays, out_arrays);
    if (st == SPMD_OK)
        st = create_outputs(plan, out_arrays);
    for (int j = 0; st != SPMD_OK && j < plan->nout; j++) {
        spmd_array_destroy(out_arrays[j]);
        out_arrays[j] = NULL;
    }
    for (int i = 0; st == SPMD_OK && i < plan->nin; i++) /* gone here too, as where it ran */
        if (plan->donate[i])
            spmd__array_mark_deleted(in_arrays[i], "spmd_shard_map");
    spmd__calls_exit(&lock, st);
    return st;
}

/* One call at a time in a process (calls.h): the plan's accepted shardings, the mesh's numbering
 * and its communicators are the call's alone. */
static spmd_status spmd_plan_execute_checked(const char *entry, spmd_plan *plan,
                                             spmd_array *const *in_arrays, spmd_array **out_arrays)
{
    if (plan && plan->magic == SPMD__MAGIC_PLAN && plan->num_local == 0)
        return outside_the_mesh(plan, in_arrays, out_arrays);
    spmd__call_entry lock;
    SPMD_CHECK(spmd__calls_enter(entry, &lock));
    spmd_status st = check_call(plan, in_arrays, out_arrays);
    if (st == SPMD_OK)
        st = execute(entry, plan, in_arrays, out_arrays);
    spmd__calls_exit(&lock, st);
    return st;
}

static spmd_status check_call(spmd_plan *plan, spmd_array *const *in_arrays,
                              spmd_array **out_arrays)
{
    SPMD_REQUIRE(plan != NULL && plan->magic == SPMD__MAGIC_PLAN, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_plan_execute: argument 'plan' is NULL or not a live spmd_plan");
    SPMD_REQUIRE(plan->nout == 0 || out_arrays != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_plan_execute: out_arrays is NULL but the plan has %d outputs", plan->nout);
    for (int j = 0; j < plan->nout; j++)
        out_arrays[j] = NULL;
    SPMD_REQUIRE(plan->nin == 0 || in_arrays != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_plan_execute: in_arrays is NULL but the plan has %d inputs", plan->nin);
    for (int i = 0; i < plan->nin; i++) {
        SPMD_CHECK(check_input(plan, i, in_arrays[i]));
        for (int k = 0; k < i; k++)
            SPMD_REQUIRE(!(plan->donate[i] || plan->donate[k]) || in_arrays[k] != in_arrays[i],
                         SPMD_ERR_INVALID_ARGUMENT,
                         "spmd_shard_map: inputs %d and %d are the same array and one of them is "
                         "donated; a donated array can be passed only once (its buffers become an "
                         "output's)",
                         k, i);
    }
    return SPMD_OK;
}

static spmd_status
spmd_shard_map_checked(spmd_mesh *mesh, spmd_fn fn, void *user, int nin,
                       spmd_array *const *in_arrays, const spmd_spec *const *in_specs, int nout,
                       const spmd_out_desc *out_descs, const spmd_spec *const *out_specs,
                       const spmd_shard_map_options *options, spmd_array **out_arrays)
{
    SPMD_CHECK(spmd__worker_refuse_nested("spmd_shard_map"));
    SPMD_REQUIRE(nout == 0 || out_arrays != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_shard_map: out_arrays is NULL but nout is %d", nout);
    SPMD_REQUIRE(nout >= 0 && nout <= 4096, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_shard_map: nout=%d must be in 0..4096", nout);
    for (int j = 0; j < nout; j++)
        out_arrays[j] = NULL;
    SPMD_REQUIRE(nin == 0 || in_arrays != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_shard_map: in_arrays is NULL but nin is %d", nin);
    SPMD_REQUIRE(nin >= 0 && nin <= 4096, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_shard_map: nin=%d must be in 0..4096", nin);
    spmd_in_desc stack_descs[8] = {{0}};
    spmd_in_desc *descs = nin <= 8 ? stack_descs : malloc((size_t)nin * sizeof *descs);
    SPMD_REQUIRE(descs != NULL, SPMD_ERR_OUT_OF_MEMORY, "spmd_shard_map: out of memory");
    spmd_status st = SPMD_OK;
    for (int i = 0; i < nin && st == SPMD_OK; i++) {
        char arg[32];
        snprintf(arg, sizeof arg, "in_arrays[%d]", i);
        st = spmd__array_check(in_arrays[i], "spmd_shard_map", arg);
        if (st == SPMD_OK) {
            descs[i].ndim = in_arrays[i]->ndim;
            descs[i].dtype = in_arrays[i]->dtype;
            memcpy(descs[i].shape, in_arrays[i]->shape, sizeof descs[i].shape);
        }
    }
    spmd_plan *plan = NULL;
    if (st == SPMD_OK)
        st = spmd_plan_create_checked(mesh, fn, user, nin, descs, in_specs, nout, out_descs,
                                      out_specs, options, &plan);
    if (descs != stack_descs)
        free(descs);
    if (st == SPMD_OK)
        st = spmd_plan_execute_checked("spmd_shard_map", plan, in_arrays, out_arrays);
    spmd_plan_destroy(plan);
    return st;
}

spmd_status spmd_shard_map(spmd_mesh *mesh, spmd_fn fn, void *user, int nin,
                           spmd_array *const *in_arrays, const spmd_spec *const *in_specs, int nout,
                           const spmd_out_desc *out_descs, const spmd_spec *const *out_specs,
                           const spmd_shard_map_options *options, spmd_array **out_arrays)
{
    return spmd__error_in(spmd_shard_map_checked(mesh, fn, user, nin, in_arrays, in_specs, nout,
                                                 out_descs, out_specs, options, out_arrays),
                          "spmd_shard_map");
}

spmd_status spmd_plan_create(spmd_mesh *mesh, spmd_fn fn, void *user, int nin,
                             const spmd_in_desc *in_descs, const spmd_spec *const *in_specs,
                             int nout, const spmd_out_desc *out_descs,
                             const spmd_spec *const *out_specs,
                             const spmd_shard_map_options *options, spmd_plan **out)
{
    return spmd__error_in(spmd_plan_create_checked(mesh, fn, user, nin, in_descs, in_specs, nout,
                                                   out_descs, out_specs, options, out),
                          "spmd_plan_create");
}

spmd_status spmd_plan_execute(spmd_plan *plan, spmd_array *const *in_arrays,
                              spmd_array **out_arrays)
{
    return spmd__error_in(
        spmd_plan_execute_checked("spmd_plan_execute", plan, in_arrays, out_arrays),
        "spmd_plan_execute");
}
