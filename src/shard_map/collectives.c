/*
 * Collectives inside fn. Each runs in three stages for its group:
 *   1. the local members (device threads of this process) meet at a rendezvous, where the last
 *      to arrive compares their fingerprints (sequence number, op, axes, dtype, shapes);
 *   2. the work on this process's data is split across those threads, and when the group spans
 *      processes its first local member checks that every process is in the same collective
 *      (with a deadline) and runs one MPI operation for the whole process;
 *   3. every member takes its result.
 * Any failure aborts the whole call, so no device is left waiting for another.
 *
 * This file is their frame: the axes, the rendezvous of the local members, the set-up and the
 * steps between processes that every collective shares, the trace, axis_index and axis_size
 * (collective_frame.h; the texts in collective_format.c). The data paths of each family are in
 * collectives_<family>.c (reduce, gather, scatter, permute, all_to_all): they call this file,
 * never the other way round.
 */
#include "shard_map/collective_frame.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/calls/trace.h"
#include "runtime/devices/worker.h"
#include "sharding/mesh_impl.h"
#include "array/copy.h"
#ifdef SPMD_HAVE_CUDA
#include "runtime/devices/backend/cuda.h"
#endif

/* How often a blocked device looks for an abort or a peer that finished without arriving. */
#define POLL_NS 100000000LL
/* Extra patience at the barriers after the first: the member doing the cross-process step
 * reports a missing process more precisely, and its own wait ends up to 2 s after the timeout. */
#define PHASE_GRACE_NS 3000000000LL

/* The public names of the forms with axis_index_groups, for messages. */
static const char *const group_op_names[] = {"",
                                             "psum_groups",
                                             "pmean_groups",
                                             "pmax_groups",
                                             "pmin_groups",
                                             "all_gather_groups",
                                             "psum_scatter_groups",
                                             "ppermute",
                                             "all_to_all_groups",
                                             "pbroadcast"};

/* ---- axes ---- */

/* Parses "i", "i,j", "('i', 'j')" into mesh axis indices, major first. */
static spmd_status parse_axes(const spmd_mesh *m, const char *text, int *axes, int *naxes)
{
    SPMD_REQUIRE(text != NULL, SPMD_ERR_INVALID_ARGUMENT,
                 "axes is NULL; name one or more mesh axes");
    *naxes = 0;
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '(' || *p == ')' || *p == '\'' || *p == '"' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *start = p;
        while (*p && *p != ',' && *p != ' ' && *p != ')' && *p != '\'' && *p != '"')
            p++;
        char name[SPMD_MAX_AXIS_NAME + 1];
        size_t len = (size_t)(p - start);
        int a = -1;
        if (len <= SPMD_MAX_AXIS_NAME) {
            memcpy(name, start, len);
            name[len] = '\0';
            a = spmd_mesh_axis_index(m, name);
        }
        if (a < 0) {
            char mesh_text[SPMD__MESH_TEXT];
            spmd__ignore(spmd_mesh_format(m, mesh_text, sizeof mesh_text));
            return SPMD_ERROR(SPMD_ERR_SPEC,
                              "unbound axis name '%.*s' in axes \"%s\": it is not an axis of %s",
                              (int)len, start, text, mesh_text);
        }
        for (int k = 0; k < *naxes; k++)
            SPMD_REQUIRE(axes[k] != a, SPMD_ERR_SPEC, "axes \"%s\" names axis '%s' twice", text,
                         name);
        axes[(*naxes)++] = a;
    }
    SPMD_REQUIRE(*naxes > 0, SPMD_ERR_SPEC, "axes \"%s\" names no mesh axis", text);
    return SPMD_OK;
}

static spmd_status ctx_axes(spmd_ctx *ctx, const char *text, int *axes, int *naxes)
{
    /* fn bodies pass the same few strings again and again: keep the last one parsed */
    if (!text || !text[0] || strcmp(text, ctx->axes_text) != 0) {
        SPMD_CHECK(parse_axes(ctx->call->mesh, text, ctx->axes, &ctx->naxes));
        size_t len = strlen(text);
        if (len < sizeof ctx->axes_text)
            memcpy(ctx->axes_text, text, len + 1);
        else
            ctx->axes_text[0] = '\0'; /* too long to keep: parsed every time */
    }
    *naxes = ctx->naxes;
    memcpy(axes, ctx->axes, (size_t)ctx->naxes * sizeof(int));
    return SPMD_OK;
}

/* The mesh axes `text` names, and the size of the group over them. */
spmd_status spmd__coll_group_of(const spmd_ctx *ctx, const char *text, int *axes, int *naxes,
                                int *size)
{
    SPMD_CHECK(parse_axes(ctx->call->mesh, text, axes, naxes));
    *size = 1;
    for (int k = 0; k < *naxes; k++)
        *size *= ctx->call->mesh->shape[axes[k]];
    return SPMD_OK;
}

/* The position along `axes` (in their order) of the device at mesh coordinates `coords`. */
static int position_at(const spmd_mesh *m, const int *axes, int naxes, const int *coords)
{
    int pos = 0;
    for (int k = 0; k < naxes; k++)
        pos = pos * m->shape[axes[k]] + coords[axes[k]];
    return pos;
}

/* The member index in the (sub)group of the device at mesh coordinates `coords`. */
static int member_position(const coll *c, const int *coords)
{
    int pos = position_at(c->mesh, c->axes, c->naxes, coords);
    return c->rank_in_subgroup ? c->rank_in_subgroup[pos] : pos;
}

static unsigned axes_mask(const int *axes, int naxes)
{
    unsigned mask = 0;
    for (int k = 0; k < naxes; k++)
        mask |= 1u << axes[k];
    return mask;
}

/* ---- failures ---- */

/* Argument errors abort the call too: the other devices would otherwise wait for this one. */
spmd_status spmd__coll_fail(coll *c, spmd_status st)
{
    char detail[SPMD__MESSAGE_CAPACITY];
    snprintf(detail, sizeof detail, "%s", spmd_last_error());
    return spmd__call_abort(c->call, SPMD_ERROR(st, "device %d: %s", c->ctx->device_id, detail));
}

spmd_status spmd__coll_fail_args(spmd_ctx *ctx, spmd_status st)
{
    char detail[SPMD__MESSAGE_CAPACITY];
    snprintf(detail, sizeof detail, "%s", spmd_last_error());
    return spmd__call_abort(ctx->call, SPMD_ERROR(st, "device %d: %s", ctx->device_id, detail));
}

/* ---- rendezvous of the local members ---- */

/* The mismatch when the local member at mesh position `flat` (which `returned` from fn, or not)
 * last arrived at another collective of this call in this one's place, or past it; SPMD_OK when
 * it did not (its record: spmd__device_at). */
static spmd_status issued_elsewhere(coll *c, int flat, int returned)
{
    unsigned long call = 0;
    unsigned seq = 0;
    uint64_t fingerprint = 0, what[2];
    spmd__device_at_read(&c->call->state->at[c->call->slot_of_flat[flat]], &call, &seq,
                         &fingerprint, what);
    if (call != c->call->seq || seq < c->seq || (seq == c->seq && fingerprint == c->fingerprint))
        return SPMD_OK;
    char other[160];
    spmd__collective_format(c->call, what, other, sizeof other);
    return SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH,
                      "devices issued different collectives: device %d waits in %s for device "
                      "%d, which %s %s as its #%u%s; every device must issue the same "
                      "collectives, with the same axis_index_groups, in the same order",
                      c->ctx->device_id, spmd__coll_describe(c), c->mesh->device_ids[flat],
                      seq == c->seq ? "issued" : "has gone on past it to", other, seq,
                      returned ? " and returned from fn" : "");
}

static spmd_status missing_members(coll *c, unsigned gen, int *any_finished)
{
    spmd__group *g = c->g;
    char list[256];
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, list, sizeof list);
    int shown = 0, finished_device = -1, finished_flat = 0;
    for (int k = 0; k < g->num_local; k++) {
        if (atomic_load(&g->slots[k].arrived) == gen + 1)
            continue;
        int f = g->local_flat[k];
        if (shown++ < 16)
            spmd__strbuf_printf(&sb, "%s%d", shown > 1 ? ", " : "", c->mesh->device_ids[f]);
        if (spmd__call_finished(c->call, f) && finished_device < 0) {
            finished_device = c->mesh->device_ids[f];
            finished_flat = f;
        }
    }
    *any_finished = finished_device >= 0;
    if (finished_device >= 0) {
        /* what it issued in this one's place, when it did: another grouping, say */
        spmd_status elsewhere = issued_elsewhere(c, finished_flat, 1);
        if (elsewhere != SPMD_OK)
            return elsewhere;
        return SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH,
                          "device %d waits in %s, but device %d returned from fn without calling "
                          "it; every device must issue the same collectives in the same order",
                          c->ctx->device_id, spmd__coll_describe(c), finished_device);
    }
    return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                      "device %d waited in %s for device(s) %s, which did not arrive within "
                      "SPMD_COLLECTIVE_TIMEOUT (%.3g s); every device must issue the same "
                      "collectives in the same order",
                      c->ctx->device_id, spmd__coll_describe(c), list,
                      (double)c->call->timeout_ns / 1e9);
}

/* A missing local member that arrived at another collective of this call in this one's place
 * (its number, another fingerprint) or past it: it will never come. SPMD_OK when none did. */
static spmd_status member_elsewhere(coll *c, unsigned gen)
{
    spmd__group *g = c->g;
    for (int k = 0; k < g->num_local; k++) {
        spmd_status st = atomic_load(&g->slots[k].arrived) == gen + 1
                             ? SPMD_OK
                             : issued_elsewhere(c, g->local_flat[k], 0);
        if (st != SPMD_OK)
            return st;
    }
    return SPMD_OK;
}

/* What a group's positions depend on: the collective's axis order, or its grouping. */
static uint64_t position_key(const coll *c)
{
    if (c->grouping)
        return c->grouping_hash | 1u;
    uint64_t key = (uint64_t)c->naxes << 1 | 1ull << 62; /* even and never 0 ("none yet") */
    for (int k = 0; k < c->naxes; k++)
        key |= (uint64_t)c->axes[k] << (8 + 6 * k);
    return key;
}

/* lists[3 * n]: each member's position, the member at each position, and each member's local
 * index or -1 (member_flat and local_flat both ascend: one walk of the two). */
static void list_members(const coll *c, int *lists)
{
    const spmd__group *g = c->g;
    int *pos = lists, *member_at = lists + c->n, *local_of = lists + 2 * (size_t)c->n;
    for (int k = 0, l = 0; k < c->n; k++) {
        int coords[SPMD_MAX_MESH_AXES];
        spmd__mesh_coords(c->mesh, g->member_flat[k], coords);
        pos[k] = member_position(c, coords);
        member_at[pos[k]] = k;
        while (l < g->num_local && g->local_flat[l] < g->member_flat[k])
            l++;
        local_of[k] = l < g->num_local && g->local_flat[l] == g->member_flat[k] ? l : -1;
    }
}

/* g's member lists for this collective's axis order, when they are for another one (made by
 * the last member to arrive, while the others wait: spmd__coll_members_init reads them). */
static spmd_status map_members(const coll *c)
{
    spmd__group *g = c->g;
    uint64_t key = c->order_key;
    if (g->members_key == key)
        return SPMD_OK;
    g->members_key = 0;
    int *lists = realloc(g->members_lists, 3 * (size_t)g->size * sizeof *lists);
    SPMD_REQUIRE(lists != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    g->members_lists = lists;
    list_members(c, lists);
    g->members_key = key;
    return SPMD_OK;
}

/* g->positions for this collective's axis order (or grouping), when it differs from the last
 * one's: which rank holds each position, and whether every rank holds an aligned block. From
 * the member lists of that order (map_members first). */
static spmd_status map_positions(const coll *c)
{
    spmd__group *g = c->g;
    spmd__position_map *pm = &g->positions;
    uint64_t key = c->order_key;
    if (pm->key == key)
        return SPMD_OK;
    pm->key = 0;
    int n = g->size, nr = g->num_ranks;
    int *store = realloc(pm->rank_of, (size_t)(n + nr) * sizeof *store);
    SPMD_REQUIRE(store != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    pm->rank_of = store;
    pm->rank_of_vrank = store + n;
    for (int i = 0; i < n; i++)
        pm->rank_of[g->members_lists[i]] = g->member_rank[i];
    int block = g->rank_members[0];
    for (int r = 1; r < nr; r++)
        if (g->rank_members[r] != block)
            block = 0;
    if (block & (block - 1))
        block = 0;
    for (int v = 0; block && v < nr; v++) {
        pm->rank_of_vrank[v] = pm->rank_of[v * block];
        for (int j = 1; j < block; j++)
            if (pm->rank_of[v * block + j] != pm->rank_of_vrank[v])
                block = 0;
        if (block && pm->rank_of_vrank[v] == spmd__comm_rank(g->comm))
            pm->my_vrank = v;
    }
    pm->block = block;
    pm->key = key;
    return SPMD_OK;
}

static int by_position(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* g->local_order: the local members in position order, the order reductions add in. */
static void order_locals(spmd__group *g)
{
    int nl = g->num_local, sorted = 1;
    for (int k = 0; k < nl; k++) {
        g->local_order[k] = k;
        sorted &= k == 0 || g->slots[k - 1].position < g->slots[k].position;
    }
    if (sorted)
        return;
    int *pairs = malloc(2 * (size_t)nl * sizeof *pairs);
    if (!pairs) { /* without memory: a slower sort in place */
        for (int k = 1; k < nl; k++)
            for (int j = k; j > 0 && g->slots[g->local_order[j - 1]].position >
                                         g->slots[g->local_order[j]].position;
                 j--) {
                int t = g->local_order[j];
                g->local_order[j] = g->local_order[j - 1];
                g->local_order[j - 1] = t;
            }
        return;
    }
    for (int k = 0; k < nl; k++) {
        pairs[2 * k] = g->slots[k].position;
        pairs[2 * k + 1] = k;
    }
    qsort(pairs, (size_t)nl, 2 * sizeof *pairs, by_position);
    for (int k = 0; k < nl; k++)
        g->local_order[k] = pairs[2 * k + 1];
    free(pairs);
}

/* The last arrival at the first barrier: same collective everywhere? scratch large enough? */
static spmd_status last_arrival(coll *c)
{
    spmd__group *g = c->g;
    for (int k = 1; k < g->num_local; k++)
        if (g->slots[k].fingerprint != g->slots[0].fingerprint) {
            char a[120], b[120]; /* every member is here: their views are alive */
            spmd__coll_describe_into(g->slots[0].coll, a, sizeof a);
            spmd__coll_describe_into(g->slots[k].coll, b, sizeof b);
            return SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH,
                              "devices issued different collectives: device %d called %s, device "
                              "%d called %s; every device must issue the same collectives with the "
                              "same shapes in the same order",
                              g->slots[0].device_id, a, g->slots[k].device_id, b);
        }
    order_locals(g);
    SPMD_CHECK(map_members(c));
    if (g->comm)
        SPMD_CHECK(map_positions(c));
    int blocks = c->scratch_if_blocks && g->comm && g->positions.block > 0;
    for (int i = 0; i < 3; i++)
        SPMD_CHECK(spmd__group_scratch(g, i, blocks ? c->scratch_blocks[i] : c->scratch_need[i]));
    return SPMD_OK;
}

/* The meeting of spmd__coll_barrier (collective_frame.h), which answers a lone member's
 * barrier itself; `arrive` also publishes this device's slot. */
spmd_status spmd__coll_meet(coll *c, int arrive)
{
    spmd__group *g = c->g;
    spmd__call *call = c->call;
    unsigned gen = atomic_load(&g->generation);
    if (arrive)
        atomic_store(&g->slots[c->li].arrived, gen + 1);
    if (atomic_fetch_add(&g->arrived, 1) + 1 == (unsigned)g->num_local) {
        spmd_status st = arrive ? last_arrival(c) : SPMD_OK;
        /* the call is aborted before the others are let go: they must not go on */
        if (st != SPMD_OK)
            st = spmd__coll_fail(c, st);
        atomic_store(&g->arrived, 0);
        atomic_store(&g->next_piece, 0);
        atomic_fetch_add(&g->generation, 1);
        spmd__event_signal(&g->event);
        if (st != SPMD_OK)
            return st;
    } else {
        int64_t deadline = spmd__now_ns() + call->timeout_ns + (arrive ? 0 : PHASE_GRACE_NS);
        atomic_fetch_add(&call->state->waiting, 1);
        spmd_status st = SPMD_OK;
        while (atomic_load(&g->generation) == gen && st == SPMD_OK) {
            if (atomic_load(&call->aborted))
                break;
            unsigned seen = spmd__event_seq(&g->event);
            if (atomic_load(&g->generation) != gen)
                break;
            int timed_out = spmd__event_wait_peers_until(&g->event, seen, deadline, POLL_NS);
            /* a local member that is late may be stuck in fn: other processes waiting for this
             * one hear where its devices are (calls.h), and the trace that it is alive */
            if (timed_out && call->mesh->num_processes > 1)
                spmd__calls_poll_notes();
            else if (timed_out)
                spmd__trace_alive();
            int any_finished = 0;
            if (arrive && atomic_load(&g->generation) == gen) {
                spmd_status why = SPMD_OK;
                if (timed_out || spmd__now_ns() > deadline)
                    why = missing_members(c, gen, &any_finished);
                else {
                    /* quick look: did a missing member already leave fn, or issue another
                     * collective (another grouping, say) in its place? */
                    for (int k = 0; k < g->num_local; k++)
                        if (atomic_load(&g->slots[k].arrived) != gen + 1 &&
                            spmd__call_finished(call, g->local_flat[k]))
                            any_finished = 1;
                    if (any_finished)
                        why = missing_members(c, gen, &any_finished);
                    else
                        why = member_elsewhere(c, gen);
                }
                if (why != SPMD_OK)
                    st = spmd__call_abort(call, why);
            } else if (timed_out) {
                st = spmd__call_abort(call,
                                      SPMD_ERROR(SPMD_ERR_TIMEOUT, "device %d timed out inside %s",
                                                 c->ctx->device_id, spmd__coll_describe(c)));
            }
        }
        atomic_fetch_sub(&call->state->waiting, 1);
    }
    if (atomic_load(&call->aborted))
        return spmd__call_aborted_status(call);
    return SPMD_OK;
}

/* ---- set-up shared by every collective ---- */

/* The end of a step between processes: any failure aborts the call, and marks what the end of
 * the call must clean up. */
spmd_status spmd__coll_crossed(coll *c, spmd_status st, const spmd__wait *w)
{
    if (st == SPMD_OK)
        return SPMD_OK;
    atomic_store(&c->call->abandoned, 1);
    if (w->data_pending)
        atomic_store(&c->call->data_abandoned, 1);
    if (w->peer_missing || st == SPMD_ERR_TIMEOUT) { /* a process never came, or stopped */
        int64_t none = 0; /* when this wait gave up (a data wait's deadline is not w's) */
        atomic_compare_exchange_strong(&c->call->missed_at, &none, spmd__now_ns());
        atomic_store(&c->call->peer_missing, 1);
    }
    if (atomic_load(&c->call->aborted))
        return spmd__call_aborted_status(c->call); /* the wait was cancelled by that abort */
    char detail[SPMD__MESSAGE_CAPACITY];
    spmd__copy_text(detail, sizeof detail, spmd_last_error());
    return spmd__call_abort(c->call, SPMD_ERROR(st, "device %d: %s", c->ctx->device_id, detail));
}

/* The agreement of a collective between processes: its fingerprint, described on demand. */
/* The parts of a collective's fingerprint, for a message whose descriptions read alike. */
static void details_of(const void *arg, spmd__details *d)
{
    const coll *c = arg;
    uint64_t what = mix((uint64_t)c->op, c->grouping_hash);
    for (int k = 0; k < c->naxes; k++)
        what = mix(what, (uint64_t)c->axes[k]);
    uint64_t block = mix((uint64_t)c->dtype, (uint64_t)c->ndim);
    for (int j = 0; j < c->ndim; j++)
        block = mix(block, (uint64_t)c->shape[j]);
    d->names[0] = "the collective (its op, axes and axis_index_groups)";
    d->hashes[0] = what;
    d->names[1] = "the block (dtype and shape)";
    d->hashes[1] = mix(block, (uint64_t)c->nblocks);
    d->names[2] = "the collective's number in fn";
    d->hashes[2] = c->seq;
    d->names[3] = "the call's number on the mesh";
    d->hashes[3] = c->call->seq;
    d->names[4] = "what the call runs (fn, specs, shapes)";
    d->hashes[4] = c->call->signature ^ c->call->thread_tag;
    d->names[5] = "the calling thread's name";
    d->hashes[5] = c->call->thread_tag;
    d->num_fields = 6;
}

spmd__agreement spmd__coll_agreement(const coll *c)
{
    spmd__agreement a = {c->fingerprint, spmd__coll_describe_into, c, details_of};
    return a;
}

/* The wait of a step between processes: the collective timeout, cut short when the call is
 * aborted (here or in another process). Messages describe the collective (spmd__coll_agreement). */
spmd__wait spmd__coll_cross_wait(coll *c)
{
    int64_t now = spmd__coarse_now_ns();
    spmd__wait w = {.deadline_ns = now + c->call->timeout_ns,
                    .begun_ns = now,
                    .cancelled = spmd__call_check_cancel,
                    .arg = c->call,
                    .late_told_later = 1,
                    .where = &c->where};
    return w;
}

/* ---- axis_index_groups ---- */

/* Checks `groups` against the n positions over the named axes (JAX's messages), into *gr. */
static spmd_status check_groups(const spmd_mesh *m, const int *axes, int naxes,
                                const spmd_axis_groups *groups, op_kind op, spmd__grouping *gr)
{
    const char *name = spmd__coll_op_names[op];
    memset(gr, 0, sizeof *gr);
    gr->naxes = naxes;
    memcpy(gr->axes, axes, (size_t)naxes * sizeof axes[0]);
    gr->total = 1;
    for (int k = 0; k < naxes; k++)
        gr->total *= m->shape[axes[k]];
    int n = gr->total;
    SPMD_REQUIRE(groups->num_groups >= 1 && groups->num_groups <= n && groups->positions,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: axis_index_groups needs 1..%d groups (the positions over the named axes) "
                 "and their positions; got num_groups %d, positions %s",
                 name, n, groups->num_groups, groups->positions ? "given" : "NULL");
    gr->num_groups = groups->num_groups;
    gr->sizes = groups->sizes;
    gr->positions = groups->positions;
    int64_t listed = 0; /* summed as int64: sizes up to n each */
    int even = 1;
    if (groups->sizes) {
        for (int k = 0; k < groups->num_groups; k++) {
            SPMD_REQUIRE(groups->sizes[k] >= 1 && groups->sizes[k] <= n, SPMD_ERR_INVALID_ARGUMENT,
                         "%s: axis_index_groups group %d has size %d; each group needs 1..%d "
                         "positions",
                         name, k, groups->sizes[k], n);
            listed += groups->sizes[k];
            even &= groups->sizes[k] == groups->sizes[0];
        }
    } else {
        SPMD_REQUIRE(n % groups->num_groups == 0, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: %d equal axis_index_groups cannot split the %d positions over the named "
                     "axes; pass sizes for uneven groups",
                     name, groups->num_groups, n);
        listed = n;
    }
    SPMD_REQUIRE(listed == n, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: axis_index_groups must cover all indices exactly once: the groups list %lld "
                 "positions, but the named axes have %d",
                 name, (long long)listed, n);
    if (!even && op != OP_PSUM && op != OP_PMAX && op != OP_PMIN) {
        if (op == OP_ALL_TO_ALL)
            return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                              "all_to_all: Replica groups must be equally sized (group 0 has %d "
                              "positions); uneven groups serve psum, pmax and pmin only",
                              groups->sizes[0]);
        return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                          "%s: axis_index_groups must all be the same size (group 0 has %d "
                          "positions); uneven groups serve psum, pmax and pmin only%s",
                          name, groups->sizes[0],
                          op == OP_PMEAN ? " (for a mean per uneven group, psum and divide by "
                                           "your group's size)"
                                         : "");
    }
    enum { STACK = 512 };
    unsigned char stack_seen[STACK];
    unsigned char *seen = n <= STACK ? stack_seen : calloc((size_t)n, 1);
    SPMD_REQUIRE(seen != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    if (seen == stack_seen)
        memset(seen, 0, (size_t)n);
    uint64_t h = mix(mix(0, (uint64_t)n), (uint64_t)groups->num_groups);
    spmd_status st = SPMD_OK;
    for (int i = 0, k = 0, in_group = 0; i < n && st == SPMD_OK; i++, in_group++) {
        int size = groups->sizes ? groups->sizes[k] : n / groups->num_groups;
        if (in_group == size)
            k++, in_group = 0;
        int p = groups->positions[i];
        if (p < 0 || p >= n || seen[p])
            st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                            "%s: axis_index_groups must cover all indices exactly once: position "
                            "%d (group %d) %s",
                            name, p, k,
                            p < 0 || p >= n ? "is out of range for the named axes"
                                            : "is listed twice");
        else
            seen[p] = 1;
        h = mix(h, ((uint64_t)(unsigned)k << 32) | (unsigned)p);
    }
    if (seen != stack_seen)
        free(seen);
    gr->hash = h;
    return st;
}

spmd_status spmd__coll_begin(spmd_ctx *ctx, const char *axes, op_kind op, const spmd_block *in,
                             const spmd_axis_groups *groups, coll *c)
{
    /* Kernels fn queued may still be writing `in`: peers read it once this device arrives. */
    spmd_status synced = spmd__ctx_sync(ctx);
    if (synced != SPMD_OK)
        return spmd__coll_fail_args(ctx, synced);
    /* field by field: the axes and shape past naxes and ndim, and the description past its
     * first byte ("" until a message needs it), are never read (a memset of the whole frame was
     * a tenth of a small collective's own time) */
    c->g = NULL;
    c->n = c->li = c->nl = c->pos = c->naxes = c->ndim = 0;
    c->fingerprint = 0;
    c->op = op;
    c->seq = 0;
    c->where = (spmd__wait_where){0};
    c->trace_in = NULL;
    c->trace_n = 0;
    c->rank_in_subgroup = NULL;
    c->grouping_hash = 0;
    c->grouping = NULL;
    c->order_key = 0;
    c->nblocks = 0;
    c->description[0] = '\0';
    memset(c->scratch_need, 0, sizeof c->scratch_need);
    c->scratch_if_blocks = 0;
    memset(c->scratch_blocks, 0, sizeof c->scratch_blocks);
    c->ctx = ctx;
    c->call = ctx->call;
    c->mesh = ctx->call->mesh;
    spmd_status st = ctx_axes(ctx, axes, c->axes, &c->naxes);
    spmd__grouping grouping;
    if (st == SPMD_OK && groups)
        st = check_groups(c->mesh, c->axes, c->naxes, groups, op, &grouping);
    if (st != SPMD_OK)
        return spmd__coll_fail_args(ctx, st);
    ctx->seq++;
    c->op = op;
    c->dtype = in->dtype;
    c->ndim = in->ndim;
    memcpy(c->shape, in->shape, (size_t)in->ndim * sizeof c->shape[0]);
    c->seq = ctx->seq;
    spmd__group_table *t = NULL;
    if (groups)
        st = spmd__mesh_state_grouped_table(c->call->mesh, c->call->state, &grouping, c->call->seq,
                                            &t);
    else
        st = spmd__mesh_state_table(c->call->mesh, c->call->state, axes_mask(c->axes, c->naxes),
                                    c->call->seq, &t);
    if (st != SPMD_OK)
        return spmd__coll_fail(c, st);
    c->g = t->groups[t->group_of_flat[ctx->flat]];
    /* never the in-process path for a group that spans processes */
    if (c->g->num_ranks > 1 && !c->g->comm)
        return spmd__coll_fail(
            c, SPMD_ERROR(SPMD_ERR_DISTRIBUTED,
                          "%s: this mesh's communicators were given up after an earlier "
                          "failure; destroy it and create a new mesh",
                          spmd__coll_op_names[op]));
    c->n = c->g->size;
    c->nl = c->g->num_local;
    c->li = spmd__group_local_index(c->g, ctx->flat);
    c->rank_in_subgroup = t->rank_in_subgroup;
    c->grouping = groups ? &t->grouping : NULL;
    c->pos = member_position(c, ctx->coords); /* the device's own: no division per axis */
    /* the call's number and what it runs too: collectives of different calls never look
     * alike */
    uint64_t h = mix(mix(mix(ctx->call->signature, ctx->call->seq), ctx->seq), (uint64_t)op);
    for (int k = 0; k < c->naxes; k++)
        h = mix(h, (uint64_t)c->axes[k]);
    if (groups) {
        h = mix(h, grouping.hash);
        c->grouping_hash = grouping.hash;
    }
    c->order_key = position_key(c);
    c->fingerprint = mix_block(h, in);
    if (ctx->packed_layout) { /* the blocks a packed collective carries must match too */
        c->fingerprint = mix(c->fingerprint, ctx->packed_layout);
        ctx->packed_layout = 0;
    }
    c->trace_in = in;
    c->trace_n = 1;
    c->where = (spmd__wait_where){(int)c->seq, ctx->device_id, c->g->rank_device};
    return SPMD_OK;
}

/* ---- the trace (spmd/trace.h) ---- */

/* The axes along which every member gets the same out: a reduction's or an all_gather's over
 * the whole of its axes (groups make it alike only within each group). */
static unsigned proven_axes(const coll *c)
{
    int alike = c->op == OP_PSUM || c->op == OP_PMEAN || c->op == OP_PMAX || c->op == OP_PMIN ||
                c->op == OP_ALL_GATHER || c->op == OP_PBROADCAST;
    return alike && !c->grouping ? axes_mask(c->axes, c->naxes) : 0;
}

/* The axes along which JAX types the out as varying (its vma keeps them), even where the
 * values agree (an all_gather's, a pbroadcast's); spmd_all_gather_invariant clears them. */
static unsigned varying_axes(const coll *c)
{
    int varies = c->op == OP_ALL_GATHER || c->op == OP_PSUM_SCATTER || c->op == OP_PPERMUTE ||
                 c->op == OP_ALL_TO_ALL || c->op == OP_PBROADCAST;
    return varies ? axes_mask(c->axes, c->naxes) : 0;
}

static void trace_begin(const coll *c)
{
    char what[SPMD_TRACE_TEXT];
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, what, sizeof what);
    spmd__coll_describe_op(c, &sb);
    c->ctx->traced_collective = spmd__trace_begin(
        SPMD_TRACE_COLLECTIVE, c->call->number, c->call->seq, c->ctx->device_id, c->seq,
        c->fingerprint, spmd__ctx_trace_digest(c->ctx, c->trace_n, c->trace_in), what);
}

/* The end of a collective on this worker: its trace record (if trace_begin made one), and
 * what it proved of the out blocks (all members' tokens agree: their fingerprints do). */
spmd_status spmd__coll_finished(spmd_ctx *ctx, spmd_status st, int n, const spmd_block *out)
{
    /* a failure may come from ctx itself (NULL, or kept after its fn returned): not read then */
    if (st != SPMD_OK && !spmd__worker_context_is_live(ctx))
        return st;
    uint64_t handle = ctx->traced_collective;
    if (handle) {
        ctx->traced_collective = 0;
        spmd__trace_end(handle, st,
                        st == SPMD_OK && n > 0 && out ? spmd__ctx_trace_digest(ctx, n, out) : 0);
    }
    if (!ctx->proofs)
        return st;
    for (int i = 0; st == SPMD_OK && out && i < n; i++) {
        size_t bytes = spmd__block_bytes(&out[i]);
        if (out[i].data == ctx->apart_data && bytes == ctx->apart_bytes)
            continue; /* the last note found it apart from fn's outputs: nothing to note */
        spmd__proof each = ctx->pending_proof;
        each.token = mix(ctx->pending_proof.token, (uint64_t)i);
        if (spmd__ctx_note(ctx, &out[i], &each))
            ctx->apart_data = out[i].data, ctx->apart_bytes = bytes;
    }
    ctx->pending_proof = (spmd__proof){0};
    return st;
}

/* The many forms' outs were written on the host after the packed collective: no proof, but
 * they vary by type as the collective's out did. */
spmd_status spmd__coll_finished_many(spmd_ctx *ctx, spmd_status st, int n, spmd_block *out,
                                     const char *name)
{
    unsigned varying = st == SPMD_OK ? ctx->pending_proof.varying : 0;
    st = spmd__coll_finished(ctx, st, 0, NULL);
    for (int i = 0; st == SPMD_OK && i < n; i++)
        spmd__ctx_note(ctx, &out[i], &(spmd__proof){.varying = varying, .varying_by = name});
    return st;
}

/* Publishes this device's buffers and meets the other local members. */
spmd_status spmd__coll_arrive(coll *c, const void *in, void *out, const void *extra)
{
    if (spmd__tracing())
        trace_begin(c);
    if (c->ctx->proofs)
        c->ctx->pending_proof = (spmd__proof){
            .token = c->fingerprint,
            .axes = proven_axes(c),
            .varying = varying_axes(c),
            .varying_by = c->grouping ? group_op_names[c->op] : spmd__coll_op_names[c->op]};
    /* where this device is, for the other processes' notes (its fingerprint is final now) */
    uint64_t what[2] = {(uint64_t)c->op | (uint64_t)c->naxes << 8, c->grouping_hash};
    for (int k = 0; k < c->naxes; k++)
        what[0] |= (uint64_t)c->axes[k] << (16 + 4 * k);
    /* word by word: a 16-byte copy of words just stored one by one waits for both stores to
     * land (a store-forwarding stall of a tenth of a small collective's own time) */
    c->ctx->last_what[0] = what[0];
    c->ctx->last_what[1] = what[1];
    spmd__device_at_publish(&c->call->state->at[c->call->slot_of_flat[c->ctx->flat]], c->call->seq,
                            c->seq, c->fingerprint, what);
    spmd__calls_device(c->ctx->ordinal, c->ctx->device_id, SPMD__DEVICE_WAITING, c->seq,
                       c->fingerprint, what);
    /* the call's end compares what every process's devices issued: collectives within one
     * process (axis_index_groups that differ between processes, say) meet nobody else */
    c->ctx->digest = mix(c->ctx->digest, c->fingerprint);
    spmd__slot *s = &c->g->slots[c->li];
    s->fingerprint = c->fingerprint;
    s->device_id = c->ctx->device_id;
    s->position = c->pos;
    s->in = in;
    s->out = out;
    s->extra = extra;
    s->coll = c;
    if (c->nl == 1)
        return last_arrival(c) == SPMD_OK ? SPMD_OK : spmd__coll_fail(c, SPMD_ERR_OUT_OF_MEMORY);
    return spmd__coll_barrier(c, 1);
}

/* ---- argument checks ---- */

void spmd__coll_shape_text(const spmd_block *b, char *buf, size_t size)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, buf, size);
    spmd__strbuf_printf(&sb, "%s[", spmd_dtype_name(b->dtype));
    for (int j = 0; j < b->ndim; j++)
        spmd__strbuf_printf(&sb, j ? ",%lld" : "%lld", (long long)b->shape[j]);
    spmd__strbuf_printf(&sb, "]");
}

/* out must have exactly `ndim`/`shape` and `dtype`. */
spmd_status spmd__coll_check_out_shape(const spmd_block *out, spmd_dtype dtype, int ndim,
                                       const int64_t *shape, const char *op)
{
    if (!spmd__block_has_layout(out, dtype, ndim, shape)) {
        spmd_block want = {NULL, dtype, ndim, {0}};
        memcpy(want.shape, shape, (size_t)ndim * sizeof(int64_t));
        char w[128], g[128];
        spmd__coll_shape_text(&want, w, sizeof w);
        spmd__coll_shape_text(out, g, sizeof g);
        return SPMD_ERROR(SPMD_ERR_SHAPE, "%s: out is %s but must be %s", op, g, w);
    }
    return SPMD_OK;
}

/* ---- helpers for the data-movement collectives ---- */

spmd_status spmd__coll_members_init(const coll *c, members *m)
{
    const spmd__group *g = c->g;
    m->owned = NULL;
    /* the rendezvous that made them is this collective's or an earlier one's: none of this
     * group writes them again before this member arrives at its next collective */
    const int *lists = g->members_key == c->order_key ? g->members_lists : NULL;
    if (!lists) {
        int *made =
            c->n <= SPMD__MEMBERS_INLINE ? m->inline_lists : malloc(3 * (size_t)c->n * sizeof(int));
        SPMD_REQUIRE(made != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
        list_members(c, made);
        m->owned = made != m->inline_lists ? made : NULL;
        lists = made;
    }
    m->pos = lists;
    m->member_at = lists + c->n;
    m->local_of = lists + 2 * (size_t)c->n;
    return SPMD_OK;
}

void spmd__coll_members_free(members *m)
{
    free(m->owned);
    m->owned = NULL;
    m->pos = NULL;
}

/* ---- where a collective's copies run ---- */

copier spmd__coll_copier_for(spmd_ctx *ctx, size_t bytes, int n, const void *const *ptrs)
{
    copier cp = {ctx, spmd__ctx_kernel_queue(ctx, bytes, n, ptrs)};
    return cp;
}

int spmd__coll_copy_rows(void *arg, void *dst, size_t dpitch, const void *src, size_t spitch,
                         size_t width, size_t height)
{
    const copier *cp = arg;
#ifdef SPMD_HAVE_CUDA
    if (cp->queue)
        return spmd__cuda_copy_rows(cp->queue, dst, dpitch, src, spitch, width, height);
#else
    (void)cp;
#endif
    return spmd__copy_rows_host(NULL, dst, dpitch, src, spitch, width, height);
}

/* The copies' status (0 or a spmd_status), once they are done. */
spmd_status spmd__coll_copier_finish(const copier *cp, int rc)
{
    if (rc != 0 || !cp->queue)
        return (spmd_status)rc;
    return spmd__ctx_sync(cp->ctx);
}

/* ---- axis_index / axis_size ---- */

spmd_status spmd__axis_index_checked(const spmd_ctx *ctx, const char *axes, int *index)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_axis_index"));
    SPMD_REQUIRE_NOT_NULL(index, "spmd_axis_index");
    int a[SPMD_MAX_MESH_AXES], n = 0;
    SPMD_CHECK(parse_axes(ctx->call->mesh, axes, a, &n));
    *index = position_at(ctx->call->mesh, a, n, ctx->coords);
    return SPMD_OK;
}

static spmd_status spmd_axis_size_checked(const spmd_ctx *ctx, const char *axes, int *size)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_axis_size"));
    SPMD_REQUIRE_NOT_NULL(size, "spmd_axis_size");
    int a[SPMD_MAX_MESH_AXES], n = 0;
    return spmd__coll_group_of(ctx, axes, a, &n, size);
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_axis_index(const spmd_ctx *ctx, const char *axes, int *index)
{
    return spmd__error_in(spmd__axis_index_checked(ctx, axes, index), "spmd_axis_index");
}

spmd_status spmd_axis_size(const spmd_ctx *ctx, const char *axes, int *size)
{
    return spmd__error_in(spmd_axis_size_checked(ctx, axes, size), "spmd_axis_size");
}
