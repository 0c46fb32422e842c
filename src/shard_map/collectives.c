/*
 * Collectives inside fn. Each runs in three stages for its group:
 *   1. the local members (device threads of this process) meet at a rendezvous, where the last
 *      to arrive compares their fingerprints (sequence number, op, axes, dtype, shapes);
 *   2. the work on this process's data is split across those threads, and when the group spans
 *      processes its first local member checks that every process is in the same collective
 *      (with a deadline) and runs one MPI operation for the whole process;
 *   3. every member takes its result.
 * Any failure aborts the whole call, so no device is left waiting for another.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/base/dtype.h"
#include "runtime/base/log.h"
#include "runtime/calls/trace.h"
#include "sharding/mesh_impl.h"
#include "array/copy.h"
#include "shard_map/executor.h"
#include "shard_map/reduce.h"
#ifdef SPMD_HAVE_CUDA
#include "runtime/devices/backend/cuda.h"
#endif

/* Below this many bytes one thread does a reduction alone: splitting costs more than it saves. */
#define SPLIT_BYTES (64 * 1024)
/* How often a blocked device looks for an abort or a peer that finished without arriving. */
#define POLL_NS 100000000LL
/* Extra patience at the barriers after the first: the member doing the cross-process step
 * reports a missing process more precisely, and its own wait ends up to 2 s after the timeout. */
#define PHASE_GRACE_NS 3000000000LL

typedef enum op_kind {
    OP_PSUM = 1,
    OP_PMEAN,
    OP_PMAX,
    OP_PMIN,
    OP_ALL_GATHER,
    OP_PSUM_SCATTER,
    OP_PPERMUTE,
    OP_ALL_TO_ALL,
    OP_PBROADCAST
} op_kind;

static const char *const op_names[] = {"",           "psum",       "pmean",        "pmax",
                                       "pmin",       "all_gather", "psum_scatter", "ppermute",
                                       "all_to_all", "pbroadcast"};
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

/* One device's view of the collective in progress. */
typedef struct coll {
    spmd_ctx *ctx;
    spmd__call *call;
    const spmd_mesh *mesh;
    spmd__group *g;
    int n;                       /* group size */
    int li;                      /* this device's index among the group's local members */
    int nl;                      /* local members */
    int pos;                     /* this device's position in the group (axis order of the call) */
    const int *rank_in_subgroup; /* axis_index_groups: a position's member index; else NULL */
    uint64_t grouping_hash;      /* tells groupings apart in messages */
    const spmd__grouping *grouping; /* the table's copy of the call's groups; else NULL */
    int naxes;
    int axes[SPMD_MAX_MESH_AXES];
    uint64_t fingerprint;
    /* what the description says, formatted only for a message */
    op_kind op;
    spmd_dtype dtype;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    unsigned seq;
    int nblocks;                /* > 0: a collective over that many blocks (shape: the first's) */
    spmd__wait_where where;     /* for the notes between processes (calls.h) */
    char description[240];      /* "" until formatted */
    const spmd_block *trace_in; /* the blocks given, for the trace's digest */
    int trace_n;
    size_t scratch_need[3];
    /* where every process holds an aligned block of positions (g->positions), these instead */
    int scratch_if_blocks;
    size_t scratch_blocks[3];
} coll;

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
static spmd_status group_of(const spmd_ctx *ctx, const char *text, int *axes, int *naxes, int *size)
{
    SPMD_CHECK(parse_axes(ctx->call->mesh, text, axes, naxes));
    *size = 1;
    for (int k = 0; k < *naxes; k++)
        *size *= ctx->call->mesh->shape[axes[k]];
    return SPMD_OK;
}

static int position_of(const spmd_mesh *m, const int *axes, int naxes, int flat)
{
    int c[SPMD_MAX_MESH_AXES], pos = 0;
    spmd__mesh_coords(m, flat, c);
    for (int k = 0; k < naxes; k++)
        pos = pos * m->shape[axes[k]] + c[axes[k]];
    return pos;
}

/* The member index in the (sub)group of the device at `flat`. */
static int member_position(const coll *c, int flat)
{
    int pos = position_of(c->mesh, c->axes, c->naxes, flat);
    return c->rank_in_subgroup ? c->rank_in_subgroup[pos] : pos;
}

static unsigned axes_mask(const int *axes, int naxes)
{
    unsigned mask = 0;
    for (int k = 0; k < naxes; k++)
        mask |= 1u << axes[k];
    return mask;
}

/* ---- fingerprints ---- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t mix_block(uint64_t h, const spmd_block *b)
{
    h = mix(h, (uint64_t)b->dtype);
    h = mix(h, (uint64_t)b->ndim);
    for (int j = 0; j < b->ndim; j++)
        h = mix(h, (uint64_t)b->shape[j]);
    return h;
}

/* Appends "[[0, 2], [1, 3]]", cut with "..." once past `budget` characters. */
static void grouping_text(spmd__strbuf *sb, const spmd__grouping *g, size_t budget)
{
    size_t start = sb->len;
    spmd__strbuf_printf(sb, "[");
    for (int k = 0, i = 0; k < g->num_groups; k++) {
        int size = g->sizes ? g->sizes[k] : g->total / g->num_groups;
        spmd__strbuf_printf(sb, k ? ", [" : "[");
        for (int m = 0; m < size; m++, i++) {
            if (sb->len - start > budget) {
                spmd__strbuf_printf(sb, "%s...]]", m ? ", " : "");
                return;
            }
            spmd__strbuf_printf(sb, m ? ", %d" : "%d", g->positions[i]);
        }
        spmd__strbuf_printf(sb, "]");
    }
    spmd__strbuf_printf(sb, "]");
}

/* The grouping of this process's current call with hash `hash`: its table is in use by the
 * call, so it is neither freed nor changed while the call lasts; NULL when none. */
static const spmd__grouping *find_grouping(const spmd__call *call, uint64_t hash)
{
    for (unsigned k = 1u << SPMD_MAX_MESH_AXES; k < SPMD__NUM_TABLES; k++) {
        const spmd__group_table *t = atomic_load(&call->state->tables[k]);
        if (t && t->grouping.hash == hash)
            return &t->grouping;
    }
    return NULL;
}

/* "psum float32[4,3] over ('i') #2": what a device called. */
static void describe_op(const coll *c, spmd__strbuf *sb)
{
    if (c->nblocks)
        spmd__strbuf_printf(sb, "%s of %d blocks (the first %s[", op_names[c->op], c->nblocks,
                            spmd_dtype_name(c->dtype));
    else
        spmd__strbuf_printf(sb, "%s %s[", op_names[c->op], spmd_dtype_name(c->dtype));
    for (int j = 0; j < c->ndim; j++)
        spmd__strbuf_printf(sb, j ? ",%lld" : "%lld", (long long)c->shape[j]);
    spmd__strbuf_printf(sb, c->nblocks ? "]) over (" : "] over (");
    for (int k = 0; k < c->naxes; k++)
        spmd__strbuf_printf(sb, "%s'%s'", k ? ", " : "", c->mesh->names[c->axes[k]]);
    if (c->grouping) {
        spmd__strbuf_printf(sb, ") in axis_index_groups ");
        grouping_text(sb, c->grouping, 120);
        spmd__strbuf_printf(sb, " #%u", c->seq);
    } else
        spmd__strbuf_printf(sb, ") #%u", c->seq);
}

/* ... with the call, for messages. */
static void describe_into(const void *arg, char *text, size_t size)
{
    const coll *c = arg;
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, size);
    describe_op(c, &sb);
    /* which call: processes whose threads' calls crossed differ here */
    spmd__strbuf_printf(&sb, " (call #%lu on this mesh; its call #%lu, %s)", c->call->seq,
                        c->call->number, c->call->thread_text);
}

static const char *describe(coll *c)
{
    if (!c->description[0])
        describe_into(c, c->description, sizeof c->description);
    return c->description;
}

void spmd__collective_format(const void *arg, const uint64_t *what, char *text, size_t size)
{
    const spmd__call *call = arg;
    unsigned op = (unsigned)(what[0] & 0xff), naxes = (unsigned)(what[0] >> 8 & 0xff);
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, size);
    spmd__strbuf_printf(&sb, "%s over (",
                        op < sizeof op_names / sizeof op_names[0] ? op_names[op] : "a collective");
    for (unsigned k = 0; k < naxes && k < SPMD_MAX_MESH_AXES; k++) {
        int a = (int)(what[0] >> (16 + 4 * k) & 0xf);
        spmd__strbuf_printf(&sb, "%s'%s'", k ? ", " : "",
                            a < call->mesh->ndim ? call->mesh->names[a] : "?");
    }
    spmd__strbuf_printf(&sb, ")");
    if (what[1]) {
        const spmd__grouping *g = find_grouping(call, what[1]);
        spmd__strbuf_printf(&sb, " in axis_index_groups ");
        if (g)
            grouping_text(&sb, g, 40);
        else
            spmd__strbuf_printf(&sb, "%04x", (unsigned)(what[1] >> 48));
    }
}

/* ---- failures ---- */

/* Argument errors abort the call too: the other devices would otherwise wait for this one. */
static spmd_status fail(coll *c, spmd_status st)
{
    char detail[SPMD__MESSAGE_CAPACITY];
    snprintf(detail, sizeof detail, "%s", spmd_last_error());
    return spmd__call_abort(c->call, SPMD_ERROR(st, "device %d: %s", c->ctx->device_id, detail));
}

static spmd_status fail_args(spmd_ctx *ctx, spmd_status st)
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
                      c->ctx->device_id, describe(c), c->mesh->device_ids[flat],
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
                          c->ctx->device_id, describe(c), finished_device);
    }
    return SPMD_ERROR(SPMD_ERR_TIMEOUT,
                      "device %d waited in %s for device(s) %s, which did not arrive within "
                      "SPMD_COLLECTIVE_TIMEOUT (%.3g s); every device must issue the same "
                      "collectives in the same order",
                      c->ctx->device_id, describe(c), list, (double)c->call->timeout_ns / 1e9);
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

/* g->positions for this collective's axis order (or grouping), when it differs from the last
 * one's: which rank holds each position, and whether every rank holds an aligned block. */
static spmd_status map_positions(const coll *c)
{
    spmd__group *g = c->g;
    spmd__position_map *pm = &g->positions;
    uint64_t key = (uint64_t)c->naxes << 1;
    for (int k = 0; k < c->naxes; k++)
        key |= (uint64_t)c->axes[k] << (8 + 6 * k);
    if (c->grouping)
        key = c->grouping_hash | 1u;
    if (pm->key == key)
        return SPMD_OK;
    pm->key = 0;
    int n = g->size, nr = g->num_ranks;
    int *store = realloc(pm->rank_of, (size_t)(n + nr) * sizeof *store);
    SPMD_REQUIRE(store != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    pm->rank_of = store;
    pm->rank_of_vrank = store + n;
    for (int i = 0; i < n; i++)
        pm->rank_of[member_position(c, g->member_flat[i])] = g->member_rank[i];
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
            describe_into(g->slots[0].coll, a, sizeof a);
            describe_into(g->slots[k].coll, b, sizeof b);
            return SPMD_ERROR(SPMD_ERR_COLLECTIVE_MISMATCH,
                              "devices issued different collectives: device %d called %s, device "
                              "%d called %s; every device must issue the same collectives with the "
                              "same shapes in the same order",
                              g->slots[0].device_id, a, g->slots[k].device_id, b);
        }
    order_locals(g);
    if (g->comm)
        SPMD_CHECK(map_positions(c));
    int blocks = c->scratch_if_blocks && g->comm && g->positions.block > 0;
    for (int i = 0; i < 3; i++)
        SPMD_CHECK(spmd__group_scratch(g, i, blocks ? c->scratch_blocks[i] : c->scratch_need[i]));
    return SPMD_OK;
}

/* A barrier of the group's local members; `arrive` also publishes this device's slot. */
static spmd_status barrier(coll *c, int arrive)
{
    spmd__group *g = c->g;
    spmd__call *call = c->call;
    if (g->num_local == 1 && !arrive) /* no local member to meet */
        return atomic_load(&call->aborted) ? spmd__call_aborted_status(call) : SPMD_OK;
    unsigned gen = atomic_load(&g->generation);
    if (arrive)
        atomic_store(&g->slots[c->li].arrived, gen + 1);
    if (atomic_fetch_add(&g->arrived, 1) + 1 == (unsigned)g->num_local) {
        spmd_status st = arrive ? last_arrival(c) : SPMD_OK;
        /* the call is aborted before the others are let go: they must not go on */
        if (st != SPMD_OK)
            st = fail(c, st);
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
            int timed_out = spmd__event_wait_until(&g->event, seen, deadline, POLL_NS);
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
                                                 c->ctx->device_id, describe(c)));
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
static spmd_status crossed(coll *c, spmd_status st, const spmd__wait *w)
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

static spmd__agreement agreement_of(const coll *c)
{
    spmd__agreement a = {c->fingerprint, describe_into, c, details_of};
    return a;
}

/* A reduction between processes, on accumulator-dtype elements: acc op= in. */
typedef struct reduction {
    spmd_dtype acc_dtype;
    spmd__reduce_op op;
} reduction;

static void combine(void *acc, const void *in, size_t bytes, void *arg)
{
    const reduction *r = arg;
    spmd__reduce_into(r->acc_dtype, r->op, acc, in, bytes / spmd_dtype_size(r->acc_dtype));
}

/* The wait of a step between processes: the collective timeout, cut short when the call is
 * aborted (here or in another process). Messages describe the collective (agreement_of). */
static spmd__wait cross_wait(coll *c)
{
    spmd__wait w = {.deadline_ns = spmd__coarse_now_ns() + c->call->timeout_ns,
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
    const char *name = op_names[op];
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

/* A many-block collective run as one collective of its blocks packed into bytes: a digest of
 * their shapes and dtypes, which begin() mixes into the fingerprint (then 0 again). */
static _Thread_local uint64_t packed_layout;

static spmd_status begin(spmd_ctx *ctx, const char *axes, op_kind op, const spmd_block *in,
                         const spmd_axis_groups *groups, coll *c)
{
    /* Kernels fn queued may still be writing `in`: peers read it once this device arrives. */
    spmd_status synced = spmd__ctx_sync(ctx);
    if (synced != SPMD_OK)
        return fail_args(ctx, synced);
    memset(c, 0, sizeof *c);
    c->ctx = ctx;
    c->call = ctx->call;
    c->mesh = ctx->call->mesh;
    spmd_status st = ctx_axes(ctx, axes, c->axes, &c->naxes);
    spmd__grouping grouping;
    if (st == SPMD_OK && groups)
        st = check_groups(c->mesh, c->axes, c->naxes, groups, op, &grouping);
    if (st != SPMD_OK)
        return fail_args(ctx, st);
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
        return fail(c, st);
    c->g = t->groups[t->group_of_flat[ctx->flat]];
    /* never the in-process path for a group that spans processes */
    if (c->g->num_ranks > 1 && !c->g->comm)
        return fail(c, SPMD_ERROR(SPMD_ERR_DISTRIBUTED,
                                  "%s: this mesh's communicators were given up after an earlier "
                                  "failure; destroy it and create a new mesh",
                                  op_names[op]));
    c->n = c->g->size;
    c->nl = c->g->num_local;
    c->li = spmd__group_local_index(c->g, ctx->flat);
    c->rank_in_subgroup = t->rank_in_subgroup;
    c->grouping = groups ? &t->grouping : NULL;
    c->pos = member_position(c, ctx->flat);
    /* the call's number and what it runs too: collectives of different calls never look
     * alike */
    uint64_t h = mix(mix(mix(ctx->call->signature, ctx->call->seq), ctx->seq), (uint64_t)op);
    for (int k = 0; k < c->naxes; k++)
        h = mix(h, (uint64_t)c->axes[k]);
    if (groups) {
        h = mix(h, grouping.hash);
        c->grouping_hash = grouping.hash;
    }
    c->fingerprint = mix_block(h, in);
    if (packed_layout) { /* the blocks a packed collective carries must match too */
        c->fingerprint = mix(c->fingerprint, packed_layout);
        packed_layout = 0;
    }
    c->trace_in = in;
    c->trace_n = 1;
    c->where = (spmd__wait_where){(int)c->seq, ctx->device_id, c->g->rank_device};
    return SPMD_OK;
}

/* ---- the trace (spmd/trace.h) ---- */

/* This worker's collective under way in the trace (a device's collectives follow each other). */
static _Thread_local uint64_t traced_collective;
/* ... and what it proves of its out: alike along its axes by construction (executor.h) */
static _Thread_local spmd__proof pending_proof;

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
    describe_op(c, &sb);
    traced_collective = spmd__trace_begin(
        SPMD_TRACE_COLLECTIVE, c->call->number, c->call->seq, c->ctx->device_id, c->seq,
        c->fingerprint, spmd__ctx_trace_digest(c->ctx, c->trace_n, c->trace_in), what);
}

/* The end of a collective on this worker: its trace record (if trace_begin made one), and
 * what it proved of the out blocks (all members' tokens agree: their fingerprints do). */
static spmd_status finished(spmd_ctx *ctx, spmd_status st, int n, const spmd_block *out)
{
    uint64_t handle = traced_collective;
    if (handle) {
        traced_collective = 0;
        spmd__trace_end(handle, st,
                        st == SPMD_OK && n > 0 && out ? spmd__ctx_trace_digest(ctx, n, out) : 0);
    }
    spmd__proof proof = pending_proof;
    pending_proof = (spmd__proof){0};
    for (int i = 0; st == SPMD_OK && ctx->proofs && out && i < n; i++) {
        spmd__proof each = proof;
        each.token = mix(proof.token, (uint64_t)i);
        spmd__ctx_note(ctx, &out[i], each);
    }
    return st;
}

/* Publishes this device's buffers and meets the other local members. */
static spmd_status arrive(coll *c, const void *in, void *out, const void *extra)
{
    if (spmd__tracing())
        trace_begin(c);
    if (c->ctx->proofs)
        pending_proof =
            (spmd__proof){.token = c->fingerprint,
                          .axes = proven_axes(c),
                          .varying = varying_axes(c),
                          .varying_by = c->grouping ? group_op_names[c->op] : op_names[c->op]};
    /* where this device is, for the other processes' notes (its fingerprint is final now) */
    uint64_t what[2] = {(uint64_t)c->op | (uint64_t)c->naxes << 8, c->grouping_hash};
    for (int k = 0; k < c->naxes; k++)
        what[0] |= (uint64_t)c->axes[k] << (16 + 4 * k);
    memcpy(c->ctx->last_what, what, sizeof what);
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
        return last_arrival(c) == SPMD_OK ? SPMD_OK : fail(c, SPMD_ERR_OUT_OF_MEMORY);
    return barrier(c, 1);
}

/* ---- argument checks ---- */

static void shape_text(const spmd_block *b, char *buf, size_t size)
{
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, buf, size);
    spmd__strbuf_printf(&sb, "%s[", spmd_dtype_name(b->dtype));
    for (int j = 0; j < b->ndim; j++)
        spmd__strbuf_printf(&sb, j ? ",%lld" : "%lld", (long long)b->shape[j]);
    spmd__strbuf_printf(&sb, "]");
}

/* out must have exactly `ndim`/`shape` and `dtype`. */
static spmd_status check_out_shape(const spmd_block *out, spmd_dtype dtype, int ndim,
                                   const int64_t *shape, const char *op)
{
    int same = out->dtype == dtype && out->ndim == ndim;
    for (int j = 0; same && j < ndim; j++)
        same = out->shape[j] == shape[j];
    if (!same) {
        spmd_block want = {NULL, dtype, ndim, {0}};
        memcpy(want.shape, shape, (size_t)ndim * sizeof(int64_t));
        char w[128], g[128];
        shape_text(&want, w, sizeof w);
        shape_text(out, g, sizeof g);
        return SPMD_ERROR(SPMD_ERR_SHAPE, "%s: out is %s but must be %s", op, g, w);
    }
    return SPMD_OK;
}

static int normalize_axis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

static size_t block_bytes(const spmd_block *b)
{
    return (size_t)spmd_block_size(b) * spmd_dtype_size(b->dtype);
}

/* ---- psum / pmax / pmin / pmean ---- */

static void slice_of(size_t count, int parts, int index, size_t *begin, size_t *end)
{
    /* multiples of 16 elements keep different threads off each other's cache lines */
    size_t per = (count / (size_t)parts + 15) / 16 * 16;
    *begin = per * (size_t)index < count ? per * (size_t)index : count;
    *end = *begin + per < count ? *begin + per : count;
    if (index == parts - 1)
        *end = count;
}

/* Host memory: MPI may move a collective's data straight between the blocks (CUDA blocks go
 * through host staging), and host threads may share out the work. Every member of every process
 * answers alike. */
static int blocks_on_host(const spmd_ctx *ctx) { return spmd__ctx_platform_is_host(ctx); }

/* Pieces of `count` elements that the local members claim one at a time: a thread the
 * scheduler runs more takes more of them, so none waits on a descheduled peer's fixed share
 * (devices outnumber cores on a laptop). */
static size_t piece_elements(size_t count, int nl, size_t elem)
{
    size_t piece = count / ((size_t)nl * 8);
    size_t least = SPLIT_BYTES / elem;
    piece = piece > least ? piece : least;
    return (piece + 63) / 64 * 64; /* whole cache lines for the streamed stores */
}

/* Claims the next of `pieces` pieces for this thread: its index, or -1 when none is left. */
static long claim_piece(spmd__group *g, size_t pieces)
{
    size_t k = atomic_fetch_add_explicit(&g->next_piece, 1, memory_order_relaxed);
    return k < pieces ? (long)k : -1;
}

/* Reduces slice [b, e) of the n inputs into every output: as one kernel on the device's stream,
 * finished before the peers go on, where the blocks (`bytes` each) allow it, else on the host. */
static spmd_status reduce_slice(spmd_ctx *ctx, spmd_dtype dtype, spmd__reduce_op rop,
                                void *const *dsts, int n, const void *const *srcs, size_t b,
                                size_t e, size_t bytes)
{
#ifdef SPMD_HAVE_CUDA
    if (n <= SPMD__CUDA_MAX_PEERS) { /* fn may pass host memory as in or out */
        const void *ptrs[2 * SPMD__CUDA_MAX_PEERS];
        for (int k = 0; k < n; k++) {
            ptrs[2 * k] = srcs[k];
            ptrs[2 * k + 1] = dsts[k];
        }
        void *queue = spmd__ctx_kernel_queue(ctx, bytes, 2 * n, ptrs);
        if (queue) {
            SPMD_CHECK(spmd__cuda_reduce_to_all(queue, dtype, rop, dsts, n, srcs, n, b, e));
            return spmd__ctx_sync(ctx);
        }
    }
#else
    (void)ctx;
#endif
    spmd__reduce_many_to_all(dtype, rop, dsts, n, srcs, n, b, e,
                             spmd__should_stream(bytes * (size_t)n));
    return SPMD_OK;
}

static spmd_status scale(spmd_ctx *ctx, spmd_block *out, double s, size_t count)
{
    size_t bytes = count * spmd_dtype_size(out->dtype);
    const void *data = out->data;
    void *queue = spmd__ctx_kernel_queue(ctx, bytes, 1, &data);
#ifdef SPMD_HAVE_CUDA
    if (queue) {
        SPMD_CHECK(spmd__cuda_scale(queue, out->dtype, out->data, s, count));
        return spmd__ctx_sync(ctx);
    }
#else
    (void)queue;
#endif
    spmd__scale(out->dtype, out->data, s, count);
    return SPMD_OK;
}

/* A block converted into out's dtype, in place of `in`, before the reduction runs over out; in
 * and out must not overlap when their element sizes differ. */
static spmd_status convert_into_out(const spmd_block *in, spmd_block *out, const char *name)
{
    SPMD_CHECK(check_out_shape(out, out->dtype, in->ndim, in->shape, name));
    SPMD_REQUIRE(in->data != out->data || spmd_dtype_size(in->dtype) == spmd_dtype_size(out->dtype),
                 SPMD_ERR_INVALID_ARGUMENT,
                 "%s: in (%s) and out (%s) share memory but differ in element size; pass a "
                 "separate out",
                 name, spmd_dtype_name(in->dtype), spmd_dtype_name(out->dtype));
    spmd__convert(out->dtype, out->data, in->dtype, in->data, (size_t)spmd_block_size(in));
    return SPMD_OK;
}

/*
 * Checks one (in, out) pair of a reduction, as JAX types it, and sets *reduced to the block the
 * reduction runs over: in itself, or out once in was converted into out's dtype (psum of bool
 * counts into int32; pmean of integers and bools averages as floats).
 */
static spmd_status prepare_reduction(op_kind op, const spmd_block *in, spmd_block *out,
                                     spmd_block *reduced)
{
    const char *name = op_names[op];
    SPMD_CHECK(spmd__check_block(in, "in", name));
    SPMD_CHECK(spmd__check_block(out, "out", name));
    *reduced = *in;
    int convert = 0;
    if (op == OP_PSUM && in->dtype == SPMD_DTYPE_BOOL) { /* counts, as JAX */
        SPMD_REQUIRE(out->dtype == SPMD_DTYPE_I32, SPMD_ERR_SHAPE,
                     "psum: out is %s; the psum of bool counts the true values, in an int32 out "
                     "(as JAX)",
                     spmd_dtype_name(out->dtype));
        convert = 1;
    } else if (op == OP_PMEAN) {
        SPMD_REQUIRE(!spmd__dtype_is_float(in->dtype) || out->dtype == in->dtype, SPMD_ERR_SHAPE,
                     "pmean: out is %s but in is %s; they must match", spmd_dtype_name(out->dtype),
                     spmd_dtype_name(in->dtype));
        SPMD_REQUIRE(spmd__dtype_is_float(out->dtype), SPMD_ERR_SHAPE,
                     "pmean: out is %s; the mean of %s needs a float out (float32 or float64)",
                     spmd_dtype_name(out->dtype), spmd_dtype_name(in->dtype));
        convert = !spmd__dtype_is_float(in->dtype);
    }
    if (convert) {
        SPMD_CHECK(convert_into_out(in, out, name));
        *reduced = *out;
    }
    SPMD_REQUIRE(spmd__reducible(reduced->dtype), SPMD_ERR_UNSUPPORTED,
                 "%s of %s is not supported; convert to int32 or float32 first (spmd_op_copy into "
                 "a block of that dtype)",
                 name, spmd_dtype_name(reduced->dtype));
    return check_out_shape(out, reduced->dtype, reduced->ndim, reduced->shape, name);
}

/*
 * The step between processes of a reduction, by the first local member: acc holds the process's
 * block already added up where every process holds an aligned block (g->positions), else the
 * inputs (in position order) go on their own; acc receives the result.
 */
static spmd_status reduce_between(coll *c, const void *const *srcs, spmd_dtype src_dtype, void *acc,
                                  size_t count, spmd_dtype acc_dtype, spmd__reduce_op rop,
                                  spmd__combine_fn fn, void *fn_arg, const spmd__piece_run *runs,
                                  const spmd__piece_run *sources, int nruns, size_t scatter)
{
    spmd__group *g = c->g;
    const spmd__position_map *pm = &g->positions;
    spmd__tree_inputs in = {.n = g->size,
                            .rank_of = pm->rank_of,
                            .block = pm->block,
                            .rank_of_vrank = pm->rank_of_vrank,
                            .my_vrank = pm->my_vrank,
                            .split = fn == combine, /* not the fused buffer's segments */
                            .nruns = nruns,
                            .runs = runs,
                            .sources = sources,
                            .scatter = scatter};
    int *positions = NULL;
    void **converted = NULL;
    spmd_status st = SPMD_OK;
    if (!pm->block) {
        positions = malloc((size_t)c->nl * sizeof *positions);
        converted = calloc((size_t)c->nl, sizeof *converted);
        if (!positions || !converted)
            st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
        for (int k = 0; k < c->nl && st == SPMD_OK; k++) {
            positions[k] = g->slots[g->local_order[k]].position;
            if (acc_dtype == src_dtype)
                continue;
            /* 16-bit inputs go in the accumulator's dtype, as a process's block would */
            converted[k] = malloc(count * spmd_dtype_size(acc_dtype));
            if (!converted[k])
                st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
            else
                spmd__reduce_many(src_dtype, rop, converted[k], &srcs[k], 1, 0, count);
        }
        in.count = c->nl;
        in.positions = positions;
        in.inputs = acc_dtype == src_dtype ? srcs : (const void *const *)converted;
    }
    if (st != SPMD_OK) {
        free(positions);
        free(converted);
        return fail(c, st);
    }
    spmd__agreement a = agreement_of(c);
    spmd__wait w = cross_wait(c);
    st = crossed(
        c,
        spmd__comm_checked_tree_allreduce(g->comm, &a, &in, acc, count, acc_dtype, fn, fn_arg, &w),
        &w);
    for (int k = 0; converted && k < c->nl; k++)
        free(converted[k]);
    free(converted);
    free(positions);
    return st;
}

/* reduce_between for one block of the collective's dtype; scatter > 0: this process needs only
 * its range of it (spmd__tree_inputs). */
static spmd_status reduce_between_processes(coll *c, const void *const *srcs, void *acc,
                                            size_t count, spmd_dtype acc_dtype, spmd__reduce_op rop,
                                            size_t scatter)
{
    reduction r = {acc_dtype, rop};
    return reduce_between(c, srcs, c->dtype, acc, count, acc_dtype, rop, combine, &r, NULL, NULL, 0,
                          scatter);
}

static spmd_status reduce(spmd_ctx *ctx, const spmd_block *given, spmd_block *out, const char *axes,
                          op_kind op, spmd__reduce_op rop, const spmd_axis_groups *groups)
{
    spmd_block prepared;
    /* kernels fn queued may still be writing `given`, which a conversion reads */
    spmd_status st = spmd__ctx_sync(ctx);
    if (st == SPMD_OK)
        st = prepare_reduction(op, given, out, &prepared);
    if (st != SPMD_OK)
        return fail_args(ctx, st);
    const spmd_block *in = &prepared;
    coll c;
    SPMD_CHECK(begin(ctx, axes, op, in, groups, &c));
    size_t count = (size_t)spmd_block_size(in), elem = spmd_dtype_size(in->dtype);
    spmd_dtype acc_dtype = spmd__accumulator_dtype(in->dtype);
    int half = spmd__is_half(in->dtype);
    if (half)
        c.scratch_need[0] = count * sizeof(float);
    SPMD_CHECK(arrive(&c, in->data, out->data, NULL));

    spmd__group *g = c.g;
    enum { STACK = 64 };
    const void *stack_srcs[STACK];
    void *stack_dsts[STACK];
    const void **srcs = c.nl <= STACK ? stack_srcs : malloc((size_t)c.nl * sizeof *srcs);
    void **dsts = c.nl <= STACK ? stack_dsts : malloc((size_t)c.nl * sizeof *dsts);
    if (!srcs || !dsts) {
        if (srcs != stack_srcs)
            free(srcs);
        if (dsts != stack_dsts)
            free(dsts);
        return fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    }
    for (int k = 0; k < c.nl; k++) { /* inputs in position order: the order of runtime/base/tree.h */
        srcs[k] = g->slots[g->local_order[k]].in;
        dsts[k] = g->slots[k].out;
    }
    int small = count * elem < SPLIT_BYTES || c.nl == 1;
    size_t b = 0, e = count;
    if (!small)
        slice_of(count, c.nl, c.li, &b, &e);
    st = SPMD_OK;
    if (!g->comm && !small && blocks_on_host(ctx)) {
        /* One pass: the threads claim pieces, reduce each and write it to every output. */
        size_t piece = piece_elements(count, c.nl, elem), pieces = (count + piece - 1) / piece;
        for (long p; st == SPMD_OK && (p = claim_piece(g, pieces)) >= 0;) {
            size_t pb = (size_t)p * piece, pe = pb + piece < count ? pb + piece : count;
            st = reduce_slice(ctx, in->dtype, rop, dsts, c.nl, srcs, pb, pe, count * elem);
        }
    } else if (!g->comm) {
        /* One pass: each thread reduces its slice and writes it to every output. */
        if (!small || c.li == 0)
            st = reduce_slice(ctx, in->dtype, rop, dsts, c.nl, srcs, b, e, count * elem);
    } else {
        /* The process's block goes between processes once, then out to every output. */
        void *acc = half ? g->scratch[0] : dsts[0];
        int blocks = g->positions.block > 0; /* else every position goes on its own */
        if ((!small || c.li == 0) && blocks)
            spmd__reduce_many(in->dtype, rop, acc, srcs, c.nl, b, e);
        if (!small)
            st = barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0)
            st = reduce_between_processes(&c, srcs, acc, count, acc_dtype, rop, 0);
        if (st == SPMD_OK && !small)
            st = barrier(&c, 0);
        for (int k = 0; st == SPMD_OK && k < c.nl && (!small || c.li == 0); k++)
            if (half || dsts[k] != acc)
                spmd__from_accumulator(in->dtype, dsts[k], acc, b, e);
    }
    /* Threads wrote into each other's outputs: nobody returns before all are done. */
    if (st == SPMD_OK && c.nl > 1)
        st = barrier(&c, 0);
    if (dsts != stack_dsts)
        free(dsts);
    if (srcs != stack_srcs)
        free(srcs);
    /* rop is SUM for pmean: the division happens on each device's own output */
    if (st == SPMD_OK && op == OP_PMEAN)
        st = scale(ctx, out, 1.0 / c.n, count);
    return st;
}

static spmd_status spmd_psum_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                     const char *axes, const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_psum"));
    return reduce(ctx, in, out, axes, OP_PSUM, SPMD__OP_SUM, groups);
}

static spmd_status spmd_pmax_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                     const char *axes, const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pmax"));
    return reduce(ctx, in, out, axes, OP_PMAX, SPMD__OP_MAX, groups);
}

static spmd_status spmd_pmin_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                     const char *axes, const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pmin"));
    return reduce(ctx, in, out, axes, OP_PMIN, SPMD__OP_MIN, groups);
}

/* rop is SUM: the division happens on each device's own output */
static spmd_status spmd_pmean_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                      const char *axes, const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pmean"));
    return reduce(ctx, in, out, axes, OP_PMEAN, SPMD__OP_SUM, groups);
}

/* ---- helpers for the data-movement collectives ---- */

typedef struct members {
    int *pos;       /* [n] position of each member (group member order) */
    int *member_at; /* [n] member at each position */
    int *local_of;  /* [n] local index of the member, or -1 */
} members;

static spmd_status members_init(const coll *c, members *m)
{
    m->pos = malloc(3 * (size_t)c->n * sizeof(int));
    SPMD_REQUIRE(m->pos != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    m->member_at = m->pos + c->n;
    m->local_of = m->member_at + c->n;
    for (int k = 0; k < c->n; k++) {
        m->pos[k] = member_position(c, c->g->member_flat[k]);
        m->member_at[m->pos[k]] = k;
        m->local_of[k] = spmd__group_local_index(c->g, c->g->member_flat[k]);
    }
    return SPMD_OK;
}

/* Offsets (in blocks) of each rank's members in rank-ordered, per-member staging. */
static void rank_offsets(const spmd__group *g, size_t *offset)
{
    size_t o = 0;
    for (int r = 0; r < g->num_ranks; r++) {
        offset[r] = o;
        o += (size_t)g->rank_members[r];
    }
}

/* 1 when each rank's members hold consecutive positions, in member-index order; first[r] is
 * the position of rank r's first member. With `in_rank_order`, rank r's positions also follow
 * rank r - 1's (rank order is position order). */
static int ranks_contiguous(const coll *c, const members *m, size_t *first, int in_rank_order)
{
    const spmd__group *g = c->g;
    size_t next = 0;
    for (int r = 0; r < g->num_ranks; r++)
        first[r] = SIZE_MAX;
    for (int k = 0; k < c->n; k++)
        if (g->member_index[k] == 0)
            first[g->member_rank[k]] = (size_t)m->pos[k];
    for (int k = 0; k < c->n; k++)
        if ((size_t)m->pos[k] != first[g->member_rank[k]] + (size_t)g->member_index[k])
            return 0;
    for (int r = 0; in_rank_order && r < g->num_ranks; r++) {
        if (first[r] != next)
            return 0;
        next += (size_t)g->rank_members[r];
    }
    return 1;
}

/* ---- where a collective's copies run ---- */

/* Host memcpy, or (CUDA devices, 64 KiB and more, device memory on both sides) the device's
 * stream, waited for by copier_finish before the other devices may go on. */
typedef struct copier {
    spmd_ctx *ctx;
    void *queue;
    int streaming; /* host copies bypass the caches (fenced by copier_finish) */
} copier;

static copier copier_for(spmd_ctx *ctx, size_t bytes, int n, const void *const *ptrs)
{
    copier cp = {ctx, spmd__ctx_kernel_queue(ctx, bytes, n, ptrs), 0};
    return cp;
}

static int copy_rows(void *arg, void *dst, size_t dpitch, const void *src, size_t spitch,
                     size_t width, size_t height)
{
    const copier *cp = arg;
#ifdef SPMD_HAVE_CUDA
    if (cp->queue)
        return spmd__cuda_copy_rows(cp->queue, dst, dpitch, src, spitch, width, height);
#else
    (void)cp;
#endif
    if (cp->streaming)
        return spmd__copy_rows_streaming(NULL, dst, dpitch, src, spitch, width, height);
    return spmd__copy_rows_host(NULL, dst, dpitch, src, spitch, width, height);
}

/* The copies' status (0 or a spmd_status), once they are done. */
static spmd_status copier_finish(const copier *cp, int rc)
{
    if (cp->streaming && !cp->queue)
        spmd__copy_streaming_fence();
    if (rc != 0 || !cp->queue)
        return (spmd_status)rc;
    return spmd__ctx_sync(cp->ctx);
}

/* ---- all_gather ---- */

/* Writes `block` (shape `b`) into out as member `p` of the stack/concatenation along axis. */
static int place_gathered(copier *cp, const spmd_block *out, const void *block, const spmd_block *b,
                          int axis, int tiled, int p)
{
    int64_t extent[SPMD_MAX_RANK + 1], start[SPMD_MAX_RANK + 1] = {0};
    size_t elem = spmd_dtype_size(b->dtype);
    if (tiled) {
        memcpy(extent, b->shape, (size_t)b->ndim * sizeof(int64_t));
        start[axis] = p * b->shape[axis];
        return spmd__copy_region_with(copy_rows, cp, elem, b->ndim, extent, out->data, out->shape,
                                      start, block, extent, (int64_t[SPMD_MAX_RANK + 1]){0});
    }
    for (int j = 0, k = 0; j <= b->ndim; j++)
        extent[j] = j == axis ? 1 : b->shape[k++];
    start[axis] = p;
    return spmd__copy_region_with(copy_rows, cp, elem, out->ndim, extent, out->data, out->shape,
                                  start, block, extent, (int64_t[SPMD_MAX_RANK + 1]){0});
}

static spmd_status spmd_all_gather_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                           const char *axes, int axis, int tiled,
                                           const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_all_gather"));
    spmd_status st = spmd__check_block(in, "in", "all_gather");
    if (st == SPMD_OK)
        st = spmd__check_block(out, "out", "all_gather");
    int rank_out = st != SPMD_OK ? 0 : tiled ? in->ndim : in->ndim + 1;
    int a = st == SPMD_OK ? normalize_axis(axis, rank_out) : 0;
    if (st == SPMD_OK && (a < 0 || a >= rank_out || (tiled && in->ndim == 0)))
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "all_gather: axis %d is out of range for a %s gather of a rank-%d block",
                        axis, tiled ? "tiled" : "stacked", in->ndim);
    if (st != SPMD_OK)
        return fail_args(ctx, st);
    coll c;
    SPMD_CHECK(begin(ctx, axes, OP_ALL_GATHER, in, groups, &c));
    c.fingerprint = mix(mix(c.fingerprint, (uint64_t)a), (uint64_t)tiled);
    int64_t want[SPMD_MAX_RANK + 1];
    for (int j = 0, k = 0; j < rank_out; j++)
        want[j] = tiled ? in->shape[j] * (j == a ? c.n : 1) : (j == a ? c.n : in->shape[k++]);
    st = check_out_shape(out, in->dtype, rank_out, want, "all_gather");
    if (st != SPMD_OK)
        return fail(&c, st);
    size_t bytes = block_bytes(in);
    spmd__group *g = c.g;
    members m;
    st = members_init(&c, &m);
    if (st != SPMD_OK)
        return fail(&c, st);
    /* large gathers between processes of host blocks go straight into the outputs, when each
     * process's blocks are consecutive there (every member finds the same from the same tables) */
    spmd__block_layout layout = {1, bytes, 0};
    for (int j = 0; j < a; j++)
        layout.outer *= (size_t)in->shape[j];
    layout.run = bytes / (layout.outer ? layout.outer : 1);
    layout.stride = layout.run * (size_t)c.n;
    /* (runs of a few elements, as a stack at a new last axis makes, MPI moves slower than the
     * staging copy) */
    int direct = g->comm && (size_t)c.n * bytes > SPMD__COMM_COMBINED_BYTES &&
                 (layout.outer == 1 || layout.run >= 256) && blocks_on_host(ctx);
    size_t *first = direct ? malloc((size_t)g->num_ranks * sizeof *first) : NULL;
    if (direct && !first) {
        free(m.pos);
        return fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    }
    if (direct && !ranks_contiguous(&c, &m, first, 0)) {
        free(first);
        first = NULL;
        direct = 0;
    }
    if (g->comm && !direct) {
        c.scratch_need[0] = (size_t)c.nl * bytes;
        c.scratch_need[1] = (size_t)c.n * bytes;
    }
    st = arrive(&c, in->data, out->data, NULL);
    if (st != SPMD_OK) {
        free(first);
        free(m.pos);
        return st;
    }
    if (direct) {
        /* Each member places its block in the first member's output, MPI gathers the other
         * processes' blocks there in place, and the other members copy the whole of it. */
        spmd_block root = *out;
        root.data = g->slots[0].out;
        copier host = {ctx, NULL, 0};
        (void)place_gathered(&host, &root, in->data, in, a, tiled, c.pos);
        st = barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0) {
            size_t *counts = malloc((size_t)g->num_ranks * sizeof *counts);
            if (!counts)
                st = fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
            for (int r = 0; counts && r < g->num_ranks; r++)
                counts[r] = (size_t)g->rank_members[r];
            if (st == SPMD_OK) {
                spmd__agreement ag = agreement_of(&c);
                spmd__wait w = cross_wait(&c);
                st = crossed(&c,
                             spmd__comm_checked_allgather_placed(g->comm, &ag, root.data, &layout,
                                                                 counts, first, &w),
                             &w);
            }
            free(counts);
        }
        if (st == SPMD_OK)
            st = barrier(&c, 0);
        if (st == SPMD_OK && c.li != 0)
            memcpy(out->data, root.data, block_bytes(out));
        if (st == SPMD_OK && c.nl > 1) /* the first member's output is read until here */
            st = barrier(&c, 0);
    } else if (!g->comm) {
        const void *ptrs[2] = {out->data, in->data}; /* peers check their own */
        copier cp = copier_for(ctx, block_bytes(out), 2, ptrs);
        cp.streaming = spmd__should_stream(block_bytes(out) * (size_t)c.nl);
        int rc = 0;
        for (int k = 0; k < c.n && !rc; k++)
            rc = place_gathered(&cp, out, g->slots[m.local_of[k]].in, in, a, tiled, m.pos[k]);
        st = copier_finish(&cp, rc);
        if (st == SPMD_OK) /* the others' inputs stay untouched until everyone has read them */
            st = barrier(&c, 0);
        else
            st = fail(&c, st);
    } else {
        memcpy((char *)g->scratch[0] + (size_t)c.li * bytes, in->data, bytes);
        st = barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0) {
            size_t *counts = malloc((size_t)g->num_ranks * sizeof *counts);
            st = counts ? SPMD_OK : fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
            for (int r = 0; st == SPMD_OK && r < g->num_ranks; r++)
                counts[r] = (size_t)g->rank_members[r] * bytes;
            if (st == SPMD_OK) {
                spmd__agreement ag = agreement_of(&c);
                spmd__wait w = cross_wait(&c);
                st = crossed(&c,
                             spmd__comm_checked_allgatherv(g->comm, &ag, g->scratch[0],
                                                           g->scratch[1], counts, &w),
                             &w);
            }
            free(counts);
        }
        if (st == SPMD_OK)
            st = barrier(&c, 0);
        if (st == SPMD_OK) {
            size_t *roff = malloc((size_t)g->num_ranks * sizeof *roff);
            if (!roff) {
                st = fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
            } else {
                rank_offsets(g, roff);
                copier host = {ctx, NULL, 0}; /* the scratch is host memory */
                for (int k = 0; k < c.n; k++) {
                    size_t slot = roff[g->member_rank[k]] + (size_t)g->member_index[k];
                    (void)place_gathered(&host, out, (char *)g->scratch[1] + slot * bytes, in, a,
                                         tiled, m.pos[k]);
                }
                free(roff);
            }
        }
    }
    free(first);
    free(m.pos);
    return st;
}

/* ---- psum_scatter ---- */

/* The chunk of position p along dimension d: `outer` runs of `run` contiguous elements. */
typedef struct chunking {
    size_t outer;  /* product of the extents before d */
    size_t run;    /* chunk extent along d times the extents after d */
    size_t stride; /* elements between runs: extent of d times the extents after d */
    size_t elems;  /* outer * run */
} chunking;

static chunking chunks_of(const spmd_block *in, int d, int64_t chunk)
{
    chunking k = {1, (size_t)chunk, 0, 0};
    for (int j = 0; j < d; j++)
        k.outer *= (size_t)in->shape[j];
    size_t inner = 1;
    for (int j = d + 1; j < in->ndim; j++)
        inner *= (size_t)in->shape[j];
    k.run *= inner;
    k.stride = (size_t)in->shape[d] * inner;
    k.elems = k.outer * k.run;
    return k;
}

/* Elements [b, e) of acc (contiguous chunk, accumulator dtype) = op over srcs of chunk p of
 * each. */
static void reduce_chunk_range(spmd_dtype dtype, spmd__reduce_op op, void *acc,
                               const void *const *srcs, int n, const chunking *k, int p, size_t b,
                               size_t e, const void **scratch_ptrs)
{
    size_t elem = spmd_dtype_size(dtype),
           acc_elem = spmd_dtype_size(spmd__accumulator_dtype(dtype));
    for (size_t r = b / k->run; r < k->outer && r * k->run < e; r++) {
        size_t lo = r * k->run > b ? r * k->run : b;
        size_t hi = (r + 1) * k->run < e ? (r + 1) * k->run : e;
        size_t offset = r * k->stride + (size_t)p * k->run + (lo - r * k->run);
        for (int i = 0; i < n; i++)
            scratch_ptrs[i] = (const char *)srcs[i] + offset * elem;
        spmd__reduce_many(dtype, op, (char *)acc + lo * acc_elem, scratch_ptrs, n, 0, hi - lo);
    }
}

static void reduce_chunk(spmd_dtype dtype, spmd__reduce_op op, void *acc, const void *const *srcs,
                         int n, const chunking *k, int p, const void **scratch_ptrs)
{
    reduce_chunk_range(dtype, op, acc, srcs, n, k, p, 0, k->elems, scratch_ptrs);
}

/* reduce_chunk on the device's stream, straight into out (dtype elements), when everything is
 * device memory of 64 KiB and more; *done says whether it ran. */
static spmd_status device_reduce_chunk(spmd_ctx *ctx, spmd_dtype dtype, void *out,
                                       const void *const *srcs, int n, const chunking *k, int p,
                                       const void **scratch_ptrs, int *done)
{
    *done = 0;
#ifdef SPMD_HAVE_CUDA
    size_t elem = spmd_dtype_size(dtype);
    if (n > SPMD__CUDA_MAX_PEERS)
        return SPMD_OK;
    const void *ptrs[SPMD__CUDA_MAX_PEERS + 1] = {out};
    for (int i = 0; i < n; i++)
        ptrs[i + 1] = srcs[i];
    void *queue = spmd__ctx_kernel_queue(ctx, k->elems * elem, n + 1, ptrs);
    if (!queue)
        return SPMD_OK;
    for (size_t r = 0; r < k->outer; r++) {
        size_t offset = r * k->stride + (size_t)p * k->run;
        for (int i = 0; i < n; i++)
            scratch_ptrs[i] = (const char *)srcs[i] + offset * elem;
        void *dst = (char *)out + r * k->run * elem;
        SPMD_CHECK(spmd__cuda_reduce_to_all(queue, dtype, SPMD__OP_SUM, &dst, 1, scratch_ptrs, n, 0,
                                            k->run));
    }
    *done = 1;
    return spmd__ctx_sync(ctx);
#else
    (void)ctx, (void)dtype, (void)out, (void)srcs, (void)n, (void)k, (void)p, (void)scratch_ptrs;
    return SPMD_OK;
#endif
}

/* Copies chunk p of a dense accumulator-dtype buffer into contiguous dst. */
static void pack_chunk(size_t acc_elem, void *dst, const void *acc, const chunking *k, int p)
{
    for (size_t r = 0; r < k->outer; r++)
        memcpy((char *)dst + r * k->run * acc_elem,
               (const char *)acc + (r * k->stride + (size_t)p * k->run) * acc_elem,
               k->run * acc_elem);
}

static spmd_status spmd_psum_scatter_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                             const char *axes, int scatter_dimension, int tiled,
                                             const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_psum_scatter"));
    spmd_status st = spmd__check_block(in, "in", "psum_scatter");
    if (st == SPMD_OK)
        st = spmd__check_block(out, "out", "psum_scatter");
    if (st == SPMD_OK && !spmd__reducible(in->dtype))
        st = SPMD_ERROR(SPMD_ERR_UNSUPPORTED,
                        "psum_scatter of %s is not supported; convert to "
                        "int32 or float32 first",
                        spmd_dtype_name(in->dtype));
    int d = st == SPMD_OK ? normalize_axis(scatter_dimension, in->ndim) : 0;
    if (st == SPMD_OK && (d < 0 || d >= in->ndim))
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "psum_scatter: scatter_dimension %d is out of range for a rank-%d block",
                        scatter_dimension, in->ndim);
    if (st != SPMD_OK)
        return fail_args(ctx, st);
    coll c;
    SPMD_CHECK(begin(ctx, axes, OP_PSUM_SCATTER, in, groups, &c));
    c.fingerprint = mix(mix(c.fingerprint, (uint64_t)d), (uint64_t)tiled);
    int64_t extent = in->shape[d];
    if (!tiled && extent != c.n)
        st = SPMD_ERROR(SPMD_ERR_SHAPE,
                        "psum_scatter: operand scatter dimension size %lld must match shard count "
                        "%d (untiled)",
                        (long long)extent, c.n);
    else if (tiled && extent % c.n != 0)
        st = SPMD_ERROR(SPMD_ERR_SHAPE,
                        "psum_scatter: tiled operand scatter dimension size %lld must be divisible "
                        "by shard_count %d",
                        (long long)extent, c.n);
    int64_t chunk = extent / c.n, want[SPMD_MAX_RANK];
    int out_rank = tiled ? in->ndim : in->ndim - 1;
    for (int j = 0, k = 0; j < in->ndim; j++) {
        if (j == d && !tiled)
            continue;
        want[k++] = j == d ? chunk : in->shape[j];
    }
    if (st == SPMD_OK)
        st = check_out_shape(out, in->dtype, out_rank, want, "psum_scatter");
    if (st != SPMD_OK)
        return fail(&c, st);

    spmd__group *g = c.g;
    chunking k = chunks_of(in, d, chunk);
    size_t count = (size_t)spmd_block_size(in);
    spmd_dtype acc_dtype = spmd__accumulator_dtype(in->dtype);
    size_t acc_elem = spmd_dtype_size(acc_dtype);
    int half = spmd__is_half(in->dtype);
    if (g->comm) {
        c.scratch_need[0] = count * acc_elem; /* the sum over every position */
        if (half)
            c.scratch_need[2] = (size_t)c.nl * k.elems * acc_elem;
    } else if (half) {
        c.scratch_need[0] = (size_t)c.nl * k.elems * acc_elem;
    }
    SPMD_CHECK(arrive(&c, in->data, out->data, NULL));
    const void **srcs = malloc(2 * (size_t)c.nl * sizeof *srcs);
    if (!srcs)
        return fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    for (int i = 0; i < c.nl; i++) /* in position order: the order of runtime/base/tree.h */
        srcs[i] = g->slots[g->local_order[i]].in;
    if (!g->comm && c.nl > 1 && blocks_on_host(ctx)) {
        /* The threads claim pieces of the members' chunks and sum each over the members. */
        size_t piece = piece_elements(k.elems, 1, spmd_dtype_size(in->dtype));
        size_t per_member = (k.elems + piece - 1) / piece;
        for (long q; (q = claim_piece(g, (size_t)c.nl * per_member)) >= 0;) {
            int i = (int)((size_t)q / per_member);
            size_t b = (size_t)q % per_member * piece;
            size_t e = b + piece < k.elems ? b + piece : k.elems;
            void *acc =
                half ? (char *)g->scratch[0] + (size_t)i * k.elems * acc_elem : g->slots[i].out;
            reduce_chunk_range(in->dtype, SPMD__OP_SUM, acc, srcs, c.nl, &k, g->slots[i].position,
                               b, e, srcs + c.nl);
            if (half)
                spmd__from_accumulator(in->dtype, g->slots[i].out, acc, b, e);
        }
        st = barrier(&c, 0);
    } else if (!g->comm) {
        /* Each device sums its own chunk over the local members directly. */
        int on_device = 0;
        st = device_reduce_chunk(ctx, in->dtype, out->data, srcs, c.nl, &k, c.pos, srcs + c.nl,
                                 &on_device);
        if (st == SPMD_OK && !on_device) {
            void *acc =
                half ? (char *)g->scratch[0] + (size_t)c.li * k.elems * acc_elem : out->data;
            reduce_chunk(in->dtype, SPMD__OP_SUM, acc, srcs, c.nl, &k, c.pos, srcs + c.nl);
            if (half)
                spmd__from_accumulator(in->dtype, out->data, acc, 0, k.elems);
        }
        st = st == SPMD_OK ? barrier(&c, 0) : fail(&c, st);
    } else {
        /* The sum in the canonical order (as psum), each device taking its chunk. Where every
         * process holds an aligned block of positions and the chunks lie one after another
         * (scattering the outermost dimension that is not 1), only the process's own chunks
         * are summed to the end between processes: the tree's reduce-scatter, about S bytes sent
         * per process for S per device, instead of the whole sum everywhere. */
        void *acc = g->scratch[0];
        int blocks = g->positions.block > 0;
        size_t scatter = blocks && k.outer == 1 ? (size_t)g->positions.block * k.run : 0;
        size_t b, e;
        slice_of(count, c.nl, c.li, &b, &e);
        if (blocks)
            spmd__reduce_many(in->dtype, SPMD__OP_SUM, acc, srcs, c.nl, b, e);
        st = barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0)
            st = reduce_between_processes(&c, srcs, acc, count, acc_dtype, SPMD__OP_SUM, scatter);
        if (st == SPMD_OK)
            st = barrier(&c, 0);
        if (st == SPMD_OK && half) {
            void *mine = (char *)g->scratch[2] + (size_t)c.li * k.elems * acc_elem;
            pack_chunk(acc_elem, mine, acc, &k, c.pos);
            spmd__from_accumulator(in->dtype, out->data, mine, 0, k.elems);
        } else if (st == SPMD_OK) {
            pack_chunk(acc_elem, out->data, acc, &k, c.pos);
        }
        /* every device reads acc: none may return (and start another collective) before */
        if (st == SPMD_OK && c.nl > 1)
            st = barrier(&c, 0);
    }
    free(srcs);
    return st;
}

/* ---- ppermute ---- */

static spmd_status check_pairs(const int *pairs, int npairs, int n, int *src_of, uint64_t *hash)
{
    SPMD_REQUIRE(npairs >= 0 && (npairs == 0 || pairs != NULL), SPMD_ERR_INVALID_ARGUMENT,
                 "ppermute: pairs is NULL or npairs (%d) is negative", npairs);
    int *seen_src = calloc((size_t)n, sizeof *seen_src);
    SPMD_REQUIRE(seen_src != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    for (int p = 0; p < n; p++)
        src_of[p] = -1;
    uint64_t h = 0;
    spmd_status st = SPMD_OK;
    for (int i = 0; i < npairs && st == SPMD_OK; i++) {
        int s = ((pairs[2 * i] % n) + n) % n, d = ((pairs[2 * i + 1] % n) + n) % n;
        if (seen_src[s] || src_of[d] >= 0)
            st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                            "ppermute sources and destinations must be unique, got pair %d "
                            "(%d -> %d) repeating a %s",
                            i, pairs[2 * i], pairs[2 * i + 1],
                            seen_src[s] ? "source" : "destination");
        seen_src[s] = 1;
        src_of[d] = s;
        h = mix(mix(h, (uint64_t)s), (uint64_t)d);
    }
    free(seen_src);
    *hash = h;
    return st;
}

static spmd_status check_mesh_order(const coll *c)
{
    for (int k = 1; k < c->naxes; k++)
        SPMD_REQUIRE(c->axes[k] > c->axes[k - 1], SPMD_ERR_INVALID_ARGUMENT,
                     "%s: axes must be named in the same order as the mesh declares them "
                     "('%s' comes before '%s' in the mesh)",
                     op_names[c->op], c->mesh->names[c->axes[k]], c->mesh->names[c->axes[k - 1]]);
    return SPMD_OK;
}

/* 1 when the pairs link every process of the group to every other, through messages between
 * processes (a ring does): a check carried by each message then reaches them all, and no
 * agreement of its own is needed. Every process computes the same from the same pairs. */
static int pairs_connect_processes(const coll *c, const members *m, const int *src_of)
{
    int n = c->g->num_ranks, *root = malloc((size_t)n * 2 * sizeof *root), parts = n;
    if (!root)
        return 0;
    int *touched = root + n;
    for (int r = 0; r < n; r++)
        root[r] = r, touched[r] = 0;
    for (int dpos = 0; dpos < c->n; dpos++) {
        if (src_of[dpos] < 0)
            continue;
        int a = c->g->member_rank[m->member_at[src_of[dpos]]];
        int b = c->g->member_rank[m->member_at[dpos]];
        if (a == b)
            continue;
        touched[a] = touched[b] = 1;
        while (root[a] != a)
            a = root[a] = root[root[a]];
        while (root[b] != b)
            b = root[b] = root[root[b]];
        if (a != b) {
            root[a] = b;
            parts--;
        }
    }
    int all = parts == 1;
    for (int r = 0; r < n; r++)
        all &= touched[r];
    free(root);
    return all;
}

/* in and out are blocks, out of in's shape and dtype (pbroadcast, ppermute); a failure aborts
 * the call, as other argument errors do. */
static spmd_status check_out_like_in(spmd_ctx *ctx, const spmd_block *in, const spmd_block *out,
                                     const char *name)
{
    spmd_status st = spmd__check_block(in, "in", name);
    if (st == SPMD_OK)
        st = spmd__check_block(out, "out", name);
    if (st == SPMD_OK)
        st = check_out_shape(out, in->dtype, in->ndim, in->shape, name);
    return st == SPMD_OK ? SPMD_OK : fail_args(ctx, st);
}

/* ---- pbroadcast ---- */

static spmd_status spmd_pbroadcast_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                           const char *axes, int source)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pbroadcast"));
    SPMD_CHECK(check_out_like_in(ctx, in, out, "pbroadcast"));
    spmd_status st = SPMD_OK;
    coll c;
    SPMD_CHECK(begin(ctx, axes, OP_PBROADCAST, in, NULL, &c));
    if (source < 0 || source >= c.n)
        return fail(&c, SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                                   "pbroadcast: source %d is out of range for a group of %d "
                                   "positions over the axes given; use 0..%d",
                                   source, c.n, c.n - 1));
    st = check_mesh_order(&c);
    if (st != SPMD_OK)
        return fail(&c, st);
    /* members that name another source never pair with this one */
    c.fingerprint = mix(c.fingerprint, (uint64_t)source);
    size_t bytes = block_bytes(in);
    spmd__group *g = c.g;
    members m;
    st = members_init(&c, &m);
    if (st != SPMD_OK)
        return fail(&c, st);
    int from = m.member_at[source], local_from = m.local_of[from];
    if (g->comm)
        c.scratch_need[0] = bytes ? bytes : 1;
    st = arrive(&c, in->data, out->data, NULL);
    if (st != SPMD_OK) {
        free(m.pos);
        return st;
    }
    const void *src = local_from >= 0 ? g->slots[local_from].in : NULL;
    if (g->comm) {
        /* the first member of each process receives the source's block (its process sends
         * it): an all-gather in which only the source's process has bytes */
        if (c.li == 0) {
            size_t *counts = calloc((size_t)g->num_ranks, sizeof *counts);
            st = counts ? SPMD_OK : fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
            if (st == SPMD_OK) {
                counts[g->member_rank[from]] = bytes;
                if (src)
                    memcpy(g->scratch[0], src, bytes);
                spmd__agreement ag = agreement_of(&c);
                spmd__wait w = cross_wait(&c);
                st = crossed(
                    &c,
                    spmd__comm_checked_allgatherv(g->comm, &ag, NULL, g->scratch[0], counts, &w),
                    &w);
            }
            free(counts);
        }
        if (st == SPMD_OK)
            st = barrier(&c, 0);
        src = g->scratch[0];
    }
    if (st == SPMD_OK && out->data != src)
        memcpy(out->data, src, bytes);
    if (st == SPMD_OK && c.nl > 1) /* the source's block (or the scratch) is read until here */
        st = barrier(&c, 0);
    free(m.pos);
    return st;
}

static spmd_status spmd_ppermute_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                         const char *axes, const int *pairs, int npairs);

/* ppermute of n blocks: packed into one byte block, permuted once, unpacked. */
static spmd_status spmd_ppermute_many_checked(spmd_ctx *ctx, int n, const spmd_block *in,
                                              spmd_block *out, const char *axes, const int *pairs,
                                              int npairs)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_ppermute_many"));
    spmd_status st = SPMD_OK;
    if (n < 0 || (n > 0 && (!in || !out)))
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "ppermute of many blocks: n is %d, in %s, out %s; pass n >= 0 and arrays "
                        "of n blocks",
                        n, in ? "given" : "NULL", out ? "given" : "NULL");
    size_t total = 0;
    uint64_t layout = mix(0x70706d616e79ull, (uint64_t)n); /* "ppmany" */
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        st = spmd__check_block(&in[i], "in", "ppermute");
        if (st == SPMD_OK)
            st = spmd__check_block(&out[i], "out", "ppermute");
        if (st == SPMD_OK)
            st = check_out_shape(&out[i], in[i].dtype, in[i].ndim, in[i].shape, "ppermute");
        if (st != SPMD_OK) {
            char detail[SPMD__MESSAGE_CAPACITY];
            spmd__copy_text(detail, sizeof detail, spmd_last_error());
            st = SPMD_ERROR(st, "block %d of %d: %s", i, n, detail);
        }
        total += st == SPMD_OK ? block_bytes(&in[i]) : 0;
        layout = mix_block(layout, &in[i]);
    }
    if (st != SPMD_OK)
        return fail_args(ctx, st);
    if (n == 0)
        return SPMD_OK;       /* an empty tree: no collective, as in JAX */
    st = spmd__ctx_sync(ctx); /* kernels fn queued may still be writing the blocks */
    int64_t shape[1] = {(int64_t)total};
    spmd_block send, recv;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_U8, &send);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_U8, &recv);
    if (st != SPMD_OK)
        return fail_args(ctx, st);
    for (size_t i = 0, at = 0; i < (size_t)n; i++) {
        memcpy((char *)send.data + at, in[i].data, block_bytes(&in[i]));
        at += block_bytes(&in[i]);
    }
    packed_layout = layout | 1;
    st = spmd_ppermute_checked(ctx, &send, &recv, axes, pairs, npairs);
    packed_layout = 0;
    for (size_t i = 0, at = 0; st == SPMD_OK && i < (size_t)n; i++) {
        memcpy(out[i].data, (const char *)recv.data + at, block_bytes(&out[i]));
        at += block_bytes(&out[i]);
    }
    return st;
}

/* The key of a psend / precv: its axes and its permutation as the group reads them (the
 * same whatever the text or the order of the pairs). */
static spmd_status send_key(spmd_ctx *ctx, const char *axes, const int *pairs, int npairs,
                            uint64_t *key)
{
    int ids[SPMD_MAX_MESH_AXES], naxes = 0, n = 0;
    SPMD_CHECK(group_of(ctx, axes, ids, &naxes, &n));
    int *src_of = malloc((size_t)n * sizeof *src_of);
    SPMD_REQUIRE(src_of != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    uint64_t pairs_hash = 0, h = mix(0x7073656e64ull, (uint64_t)naxes); /* "psend" */
    spmd_status st = check_pairs(pairs, npairs, n, src_of, &pairs_hash);
    for (int k = 0; k < naxes; k++)
        h = mix(h, (uint64_t)ids[k]);
    for (int p = 0; st == SPMD_OK && p < n; p++)
        h = mix(h, (uint64_t)(int64_t)src_of[p]);
    free(src_of);
    *key = h;
    return st;
}

/* JAX's psend: this device's half of a ppermute, kept (a copy) until its precv. */
static spmd_status spmd_psend_checked(spmd_ctx *ctx, const spmd_block *in, const char *axes,
                                      const int *pairs, int npairs)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_psend"));
    SPMD_CHECK(spmd__check_block(in, "in", "spmd_psend"));
    SPMD_REQUIRE(axes != NULL, SPMD_ERR_INVALID_ARGUMENT, "spmd_psend: argument 'axes' is NULL");
    uint64_t key = 0;
    SPMD_CHECK(send_key(ctx, axes, pairs, npairs, &key));
    SPMD_REQUIRE(ctx->pending_sends < SPMD__PENDING_SENDS, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_psend: %d sends already wait for their spmd_precv on device %d; receive "
                 "them before sending more",
                 ctx->pending_sends, ctx->device_id);
    SPMD_CHECK(spmd__ctx_sync(ctx)); /* kernels fn queued may still be writing the block */
    spmd_block copy;
    int spare = -1; /* the smallest spare copy that holds it */
    for (int i = 0; i < ctx->spare_sends; i++)
        if (block_bytes(&ctx->spares[i]) >= block_bytes(in) &&
            (spare < 0 || block_bytes(&ctx->spares[i]) < block_bytes(&ctx->spares[spare])))
            spare = i;
    if (spare >= 0) { /* reshaped over the spare's bytes: they are fn's until the call ends */
        copy = *in;
        copy.data = ctx->spares[spare].data;
        ctx->spares[spare] = ctx->spares[--ctx->spare_sends];
    } else {
        SPMD_CHECK(spmd_ctx_alloc(ctx, in->ndim, in->shape, in->dtype, &copy));
    }
    memcpy(copy.data, in->data, block_bytes(in));
    ctx->sends[ctx->pending_sends++] = (spmd__pending_send){copy, key};
    return SPMD_OK;
}

/* JAX's precv: the oldest psend's ppermute, its result in out. */
static spmd_status spmd_precv_checked(spmd_ctx *ctx, spmd_block *out, const char *axes,
                                      const int *pairs, int npairs)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_precv"));
    /* a refused precv aborts the call: the other devices would wait in its ppermute */
    uint64_t key = 0;
    spmd_status st =
        axes ? send_key(ctx, axes, pairs, npairs, &key)
             : SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT, "spmd_precv: argument 'axes' is NULL");
    if (st == SPMD_OK && ctx->pending_sends == 0)
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "spmd_precv on device %d: no spmd_psend waits for it; call spmd_psend "
                        "with the block to send first (JAX: precv takes the token psend returns)",
                        ctx->device_id);
    else if (st == SPMD_OK && ctx->sends[0].key != key)
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "spmd_precv on device %d: its axes ('%s') or pairs differ from those of "
                        "the spmd_psend it receives (the oldest waiting); give both the same",
                        ctx->device_id, axes);
    if (st != SPMD_OK)
        return fail_args(ctx, st);
    spmd_block sent = ctx->sends[0].block;
    ctx->pending_sends--;
    memmove(ctx->sends, ctx->sends + 1, (size_t)ctx->pending_sends * sizeof ctx->sends[0]);
    packed_layout = mix(0x7073656e64ull, 1) | 1; /* "psend": not a plain ppermute */
    st = spmd_ppermute_checked(ctx, &sent, out, axes, pairs, npairs);
    packed_layout = 0;
    pending_proof.varying_by = "precv";
    /* after a failure MPI may still read it: never reused */
    if (st == SPMD_OK && ctx->spare_sends < SPMD__PENDING_SENDS)
        ctx->spares[ctx->spare_sends++] = sent;
    return st;
}

static spmd_status spmd_ppermute_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                         const char *axes, const int *pairs, int npairs)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_ppermute"));
    SPMD_CHECK(check_out_like_in(ctx, in, out, "ppermute"));
    spmd_status st = SPMD_OK;
    coll c;
    SPMD_CHECK(begin(ctx, axes, OP_PPERMUTE, in, NULL, &c));
    int *src_of = malloc((size_t)c.n * sizeof *src_of);
    uint64_t pairs_hash = 0;
    st = src_of ? check_mesh_order(&c) : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == SPMD_OK)
        st = check_pairs(pairs, npairs, c.n, src_of, &pairs_hash);
    if (st != SPMD_OK) {
        free(src_of);
        return fail(&c, st);
    }
    c.fingerprint = mix(c.fingerprint, pairs_hash);
    size_t bytes = block_bytes(in);
    spmd__group *g = c.g;
    c.scratch_need[0] = (size_t)c.nl * bytes; /* inputs, when some device permutes in place */
    st = arrive(&c, in->data, out->data, NULL);
    if (st != SPMD_OK) {
        free(src_of);
        return st;
    }
    members m;
    st = members_init(&c, &m);
    int in_place = 0;
    for (int i = 0; i < c.nl; i++)
        in_place |= g->slots[i].in == g->slots[i].out;
    /* Sources are read from copies when a destination overwrites its own input. */
    if (st == SPMD_OK && in_place) {
        memcpy((char *)g->scratch[0] + (size_t)c.li * bytes, in->data, bytes);
        st = barrier(&c, 0);
    }
#define SOURCE(local)                                                                              \
    (in_place ? (const char *)g->scratch[0] + (size_t)(local)*bytes : g->slots[local].in)
    if (st == SPMD_OK && g->comm && c.li == 0) {
        spmd__message *msgs = malloc(2 * (size_t)c.n * sizeof *msgs);
        if (st == SPMD_OK && !msgs)
            st = fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
        if (st == SPMD_OK) {
            int nsend = 0, nrecv = 0;
            spmd__message *sends = msgs, *recvs = msgs + c.n;
            int my_rank = g->member_rank[m.member_at[c.pos]];
            for (int dpos = 0; dpos < c.n; dpos++) {
                int s = src_of[dpos];
                if (s < 0)
                    continue;
                int ms = m.member_at[s], md = m.member_at[dpos];
                int s_local = g->member_rank[ms] == my_rank,
                    d_local = g->member_rank[md] == my_rank;
                if (s_local && !d_local)
                    sends[nsend++] =
                        (spmd__message){g->member_rank[md], (void *)SOURCE(m.local_of[ms]), bytes};
                else if (!s_local && d_local)
                    recvs[nrecv++] =
                        (spmd__message){g->member_rank[ms], g->slots[m.local_of[md]].out, bytes};
            }
            /* between two processes both sides list their messages in destination order */
            spmd__agreement a = agreement_of(&c);
            spmd__wait w = cross_wait(&c);
            spmd_status (*exchange)(spmd__comm *, const spmd__agreement *, int,
                                    const spmd__message *, int, const spmd__message *,
                                    spmd__wait *) =
                bytes <= SPMD__COMM_COMBINED_BYTES && pairs_connect_processes(&c, &m, src_of)
                    ? spmd__comm_paired_exchange
                    : spmd__comm_checked_exchange;
            st = crossed(&c, exchange(g->comm, &a, nsend, sends, nrecv, recvs, &w), &w);
        }
        free(msgs);
    }
    if (st == SPMD_OK && g->comm)
        st = barrier(&c, 0);
    if (st == SPMD_OK) {
        int s = src_of[c.pos];
        if (s < 0)
            memset(out->data, 0, bytes); /* not a destination: zeros */
        else if (m.local_of[m.member_at[s]] >= 0 &&
                 SOURCE(m.local_of[m.member_at[s]]) != out->data) {
            const void *ptrs[2] = {out->data, SOURCE(m.local_of[m.member_at[s]])};
            copier cp = copier_for(ctx, bytes, 2, ptrs);
            cp.streaming = spmd__should_stream(bytes * (size_t)c.nl);
            st = copier_finish(&cp, copy_rows(&cp, out->data, 0, ptrs[1], 0, bytes, 1));
        }
        if (st == SPMD_OK) /* sources stay valid until every destination has read them */
            st = barrier(&c, 0);
        else
            st = fail(&c, st);
    }
#undef SOURCE
    free(m.pos);
    free(src_of);
    return st;
}

/* ---- all_to_all ---- */

typedef struct a2a {
    int rank; /* of in and out */
    int untiled;
    int s, c;                      /* split and concat axes */
    int64_t extent[SPMD_MAX_RANK]; /* the chunk, in its own dims (rank-1 dims when untiled) */
    int cdims;                     /* dims of the chunk */
    int64_t src_strides[SPMD_MAX_RANK];
    int64_t src_step; /* elements between chunk g and g+1 of an input */
    int64_t dst_strides[SPMD_MAX_RANK];
    int64_t dst_step; /* elements between slot h and h+1 of the output */
    int64_t chunk_elems;
} a2a;

static void a2a_layout(const spmd_block *in, const spmd_block *out, int s, int c, int n, int tiled,
                       a2a *L)
{
    int64_t is[SPMD_MAX_RANK], os[SPMD_MAX_RANK];
    spmd__dense_strides(in->ndim, in->shape, is);
    spmd__dense_strides(out->ndim, out->shape, os);
    L->rank = in->ndim;
    L->untiled = !tiled;
    L->s = s;
    L->c = c;
    L->chunk_elems = spmd_block_size(in) / n;
    if (tiled) {
        L->cdims = in->ndim;
        for (int j = 0; j < in->ndim; j++) {
            L->extent[j] = j == s ? in->shape[j] / n : in->shape[j];
            L->src_strides[j] = is[j];
            L->dst_strides[j] = os[j];
        }
        L->src_step = L->extent[s] * is[s];
        L->dst_step = L->extent[c] * os[c];
        return;
    }
    /* Untiled: the chunk drops dimension s of the input and fills a slot (index h along c) of
     * the output; its remaining dims map in order onto the output's dims other than c. */
    L->cdims = in->ndim - 1;
    for (int j = 0, k = 0; j < in->ndim; j++)
        if (j != s) {
            L->extent[k] = in->shape[j];
            L->src_strides[k++] = is[j];
        }
    for (int j = 0, k = 0; j < out->ndim; j++)
        if (j != c)
            L->dst_strides[k++] = os[j];
    L->src_step = is[s];
    L->dst_step = os[c];
}

/* One box of a block: everything along each dimension but `d`, where it is `chunk` wide at
 * position p. */
static spmd__piece chunk_piece(const spmd_block *b, const void *data, int d, int64_t chunk, int p)
{
    spmd__piece piece = {(void *)data, spmd_dtype_size(b->dtype), b->ndim, b->shape, {0}, {0}};
    for (int j = 0; j < b->ndim; j++)
        piece.extent[j] = b->shape[j];
    piece.start[d] = (int64_t)p * chunk;
    piece.extent[d] = chunk;
    return piece;
}

/*
 * The messages of an all_to_all between processes, straight between the blocks (run by the
 * first local member for them all). To rank r: for each of its members (index order), this
 * process's chunks for it, one per local member (local order); from rank r: for each local
 * member, one chunk per member of r. The staged path sends the same bytes in the same order.
 * `copies` (NULL: the inputs) holds the local inputs when some output is over its input.
 */
static spmd_status a2a_exchange_direct(coll *c, const members *m, const spmd_block *in,
                                       const spmd_block *out, int s, int cc, int tiled,
                                       const void *copies, size_t in_bytes)
{
    spmd__group *g = c->g;
    int me = g->member_rank[m->member_at[c->pos]], nl = c->nl;
    int64_t split_chunk = tiled ? in->shape[s] / c->n : 1;
    int64_t concat_chunk = tiled ? out->shape[cc] / c->n : 1;
    size_t npieces = (size_t)nl * (size_t)(c->n - nl);
    spmd__piece *pieces = malloc(2 * (npieces ? npieces : 1) * sizeof *pieces);
    spmd__piece_message *msgs = malloc(2 * (size_t)g->num_ranks * sizeof *msgs);
    size_t *offset = malloc((size_t)g->num_ranks * sizeof *offset);
    if (!pieces || !msgs || !offset) {
        free(pieces), free(msgs), free(offset);
        return fail(c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    }
    spmd__piece *sp = pieces, *rp = pieces + npieces;
    spmd__piece_message *sends = msgs, *recvs = msgs + g->num_ranks;
    int nmsg = 0;
    for (int r = 0, at = 0; r < g->num_ranks; r++) {
        offset[r] = (size_t)at;
        if (r == me)
            continue;
        int count = g->rank_members[r] * nl;
        sends[nmsg] = (spmd__piece_message){r, count, sp + at};
        recvs[nmsg++] = (spmd__piece_message){r, count, rp + at};
        at += count;
    }
    for (int k = 0; k < c->n; k++) {
        int r = g->member_rank[k];
        if (r == me)
            continue;
        for (int li = 0; li < nl; li++) {
            const void *src =
                copies ? (const char *)copies + (size_t)li * in_bytes : g->slots[li].in;
            sp[offset[r] + (size_t)g->member_index[k] * (size_t)nl + (size_t)li] =
                chunk_piece(in, src, s, split_chunk, m->pos[k]);
            rp[offset[r] + (size_t)li * (size_t)g->rank_members[r] + (size_t)g->member_index[k]] =
                chunk_piece(out, g->slots[li].out, cc, concat_chunk, m->pos[k]);
        }
    }
    spmd__agreement a = agreement_of(c);
    spmd__wait w = cross_wait(c);
    spmd_status st = crossed(
        c, spmd__comm_checked_exchange_pieces(g->comm, &a, nmsg, sends, nmsg, recvs, &w), &w);
    free(pieces);
    free(msgs);
    free(offset);
    return st;
}

/* all_to_all's shape rules over a group of n: in's split dimension and out's shape. */
static spmd_status check_a2a_shapes(const spmd_block *in, const spmd_block *out, int s, int cc,
                                    int n, int tiled)
{
    int64_t want[SPMD_MAX_RANK];
    if (!tiled && in->shape[s] != n)
        return SPMD_ERROR(SPMD_ERR_SHAPE,
                          "all_to_all requires the size of the mapped axis to equal "
                          "x.shape[split_axis], but they are %d and %lld",
                          n, (long long)in->shape[s]);
    if (tiled && in->shape[s] % n != 0)
        return SPMD_ERROR(SPMD_ERR_SHAPE,
                          "all_to_all: the size of split_axis (%lld) has to be divisible by the "
                          "size of the named axes (%d)",
                          (long long)in->shape[s], n);
    if (tiled) {
        for (int j = 0; j < in->ndim; j++)
            want[j] = in->shape[j];
        want[s] /= n;
        want[cc] *= n;
    } else {
        /* insert(delete(shape, split), concat, n) */
        int64_t rest[SPMD_MAX_RANK];
        for (int j = 0, k = 0; j < in->ndim; j++)
            if (j != s)
                rest[k++] = in->shape[j];
        for (int j = 0, k = 0; j < in->ndim; j++)
            want[j] = j == cc ? n : rest[k++];
    }
    return check_out_shape(out, in->dtype, in->ndim, want, "all_to_all");
}

/* Copies a chunk (L's extent) between a strided place (element `at`, `strides`) and a dense
 * row-major buffer: into the buffer (pack) or out of it. */
static void chunk_move(const a2a *L, char *strided, int64_t at, const int64_t *strides, char *dense,
                       size_t elem, int pack)
{
    int64_t dense_strides[SPMD_MAX_RANK];
    spmd__dense_strides(L->cdims, L->extent, dense_strides);
    char *place = strided + (size_t)at * elem;
    if (pack)
        spmd__copy_strided(elem, L->cdims, L->extent, dense, dense_strides, place, strides);
    else
        spmd__copy_strided(elem, L->cdims, L->extent, place, strides, dense, dense_strides);
}

/* Row g of `rows` (row bytes each) holds chunk g of every block in turn: packed from the
 * blocks' chunks g (pack), or unpacked into their slots g. */
static void move_chunks(const a2a *layouts, const spmd_block *blocks, int n, char *rows, size_t row,
                        int group_size, int pack)
{
    for (int g = 0; g < group_size; g++) {
        size_t at = (size_t)g * row;
        for (int i = 0; i < n; i++) {
            const a2a *L = &layouts[i];
            size_t elem = spmd_dtype_size(blocks[i].dtype);
            chunk_move(L, blocks[i].data, g * (pack ? L->src_step : L->dst_step),
                       pack ? L->src_strides : L->dst_strides, rows + at, elem, pack);
            at += (size_t)L->chunk_elems * elem;
        }
    }
}

static spmd_status spmd_all_to_all_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                           const char *axes, int split_axis, int concat_axis,
                                           int tiled, const spmd_axis_groups *groups);

/*
 * all_to_all of n blocks, each with its own split and concat axes: chunk g of every block is
 * packed into row g of one byte block [G, T], one untiled all_to_all over rows moves them, and
 * row h of the result (member h's chunks for this one) is unpacked into slot h of each out.
 * Every in is read before any out is written, so they may overlap (in place).
 */
static spmd_status spmd_all_to_all_many_checked(spmd_ctx *ctx, int n, const spmd_block *in,
                                                spmd_block *out, const char *axes,
                                                const int *split_axes, const int *concat_axes,
                                                int tiled, const char *what)
{
    SPMD_CHECK(spmd__ctx_check(ctx, what));
    spmd_status st = SPMD_OK;
    if (n < 0 || (n > 0 && (!in || !out || !split_axes || !concat_axes)))
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "all_to_all of many blocks: n is %d, in %s, out %s; pass n >= 0 and "
                        "arrays of n blocks (and of n axes)",
                        n, in ? "given" : "NULL", out ? "given" : "NULL");
    int group_size = 0, axis_ids[SPMD_MAX_MESH_AXES], naxes = 0;
    if (st == SPMD_OK && n > 0)
        st = group_of(ctx, axes, axis_ids, &naxes, &group_size);
    tiled = tiled != 0;
    a2a *layouts = st == SPMD_OK && n > 0 ? calloc((size_t)n, sizeof *layouts) : NULL;
    if (st == SPMD_OK && n > 0 && !layouts)
        st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory for %d blocks", n);
    size_t row = 0; /* T: bytes of one chunk of every block */
    uint64_t layout = mix(mix(0x6132616d616e79ull, (uint64_t)n), (uint64_t)tiled); /* "a2amany" */
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        st = spmd__check_block(&in[i], "in", "all_to_all");
        if (st == SPMD_OK)
            st = spmd__check_block(&out[i], "out", "all_to_all");
        int sa = st == SPMD_OK ? normalize_axis(split_axes[i], in[i].ndim) : 0;
        int ca = st == SPMD_OK ? normalize_axis(concat_axes[i], in[i].ndim) : 0;
        if (st == SPMD_OK && (sa < 0 || sa >= in[i].ndim || ca < 0 || ca >= in[i].ndim))
            st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                            "split_axis %d or concat_axis %d is out of range for a rank-%d block",
                            split_axes[i], concat_axes[i], in[i].ndim);
        if (st == SPMD_OK)
            st = check_a2a_shapes(&in[i], &out[i], sa, ca, group_size, tiled);
        if (st != SPMD_OK) {
            char detail[SPMD__MESSAGE_CAPACITY];
            spmd__copy_text(detail, sizeof detail, spmd_last_error());
            st = SPMD_ERROR(st, "block %d of %d: %s", i, n, detail);
            break;
        }
        a2a_layout(&in[i], &out[i], sa, ca, group_size, tiled, &layouts[i]);
        row += (size_t)layouts[i].chunk_elems * spmd_dtype_size(in[i].dtype);
        layout = mix(mix(mix_block(layout, &in[i]), (uint64_t)sa), (uint64_t)ca);
    }
    if (st != SPMD_OK) {
        free(layouts);
        return fail_args(ctx, st);
    }
    if (n == 0)
        return SPMD_OK;       /* an empty tree: no collective, as in JAX */
    st = spmd__ctx_sync(ctx); /* kernels fn queued may still be writing the blocks */
    int64_t shape[2] = {group_size, (int64_t)row};
    spmd_block send, recv;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, shape, SPMD_DTYPE_U8, &send);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, shape, SPMD_DTYPE_U8, &recv);
    if (st != SPMD_OK) {
        free(layouts);
        return fail_args(ctx, st);
    }
    move_chunks(layouts, in, n, send.data, row, group_size, 1);
    packed_layout = layout | 1;
    st = spmd_all_to_all_checked(ctx, &send, &recv, axes, 0, 0, 0, NULL);
    packed_layout = 0;
    if (st == SPMD_OK)
        move_chunks(layouts, out, n, recv.data, row, group_size, 0);
    free(layouts);
    return st;
}

static spmd_status spmd_all_to_all_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                           const char *axes, int split_axis, int concat_axis,
                                           int tiled, const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_all_to_all"));
    spmd_status st = spmd__check_block(in, "in", "all_to_all");
    if (st == SPMD_OK)
        st = spmd__check_block(out, "out", "all_to_all");
    int s = st == SPMD_OK ? normalize_axis(split_axis, in->ndim) : 0;
    int cc = st == SPMD_OK ? normalize_axis(concat_axis, in->ndim) : 0;
    if (st == SPMD_OK && (s < 0 || s >= in->ndim || cc < 0 || cc >= in->ndim))
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "all_to_all: split_axis %d or concat_axis %d is out of range for a rank-%d "
                        "block",
                        split_axis, concat_axis, in->ndim);
    if (st != SPMD_OK)
        return fail_args(ctx, st);
    coll c;
    SPMD_CHECK(begin(ctx, axes, OP_ALL_TO_ALL, in, groups, &c));
    c.fingerprint = mix(mix(mix(c.fingerprint, (uint64_t)s), (uint64_t)cc), (uint64_t)tiled);
    st = check_a2a_shapes(in, out, s, cc, c.n, tiled);
    if (st != SPMD_OK)
        return fail(&c, st);

    a2a L;
    a2a_layout(in, out, s, cc, c.n, tiled, &L);
    size_t elem = spmd_dtype_size(in->dtype), cbytes = (size_t)L.chunk_elems * elem;
    size_t in_bytes = block_bytes(in);
    spmd__group *g = c.g;
    /* Large: some process sends more than SPMD__COMM_COMBINED_BYTES (every process finds the
     * same from the group's tables, and so picks the same protocol). Large exchanges of host
     * blocks go straight from the inputs into the outputs. */
    int large = 0;
    for (int r = 0; g->comm && r < g->num_ranks; r++)
        large |= (size_t)g->rank_members[r] * (size_t)(c.n - g->rank_members[r]) * cbytes >
                 SPMD__COMM_COMBINED_BYTES;
    int direct = large && blocks_on_host(ctx);
    if (g->comm && !direct) {
        c.scratch_need[0] = (size_t)c.nl * (size_t)c.n * cbytes; /* to other processes */
        c.scratch_need[1] = (size_t)c.nl * (size_t)c.n * cbytes; /* from them */
    }
    SPMD_CHECK(arrive(&c, in->data, out->data, NULL));
    members m;
    st = members_init(&c, &m);
    if (st != SPMD_OK)
        return fail(&c, st);
    /* An output over its own input would be overwritten while members still read it: the
     * inputs are then read from copies. */
    int in_place = 0;
    for (int i = 0; i < c.nl; i++)
        in_place |= g->slots[i].in == g->slots[i].out;
    if (in_place) {
        if (c.li == 0)
            st = spmd__group_scratch(g, 2, (size_t)c.nl * in_bytes);
        st = st == SPMD_OK ? barrier(&c, 0) : fail(&c, st);
        if (st == SPMD_OK) {
            memcpy((char *)g->scratch[2] + (size_t)c.li * in_bytes, in->data, in_bytes);
            st = barrier(&c, 0);
        }
        if (st != SPMD_OK) {
            free(m.pos);
            return st;
        }
    }
#define SOURCE(local)                                                                              \
    (in_place ? (const char *)g->scratch[2] + (size_t)(local)*in_bytes                             \
              : (const char *)g->slots[local].in)
    int64_t dense[SPMD_MAX_RANK];
    spmd__dense_strides(L.cdims, L.extent, dense);
    int me = g->member_rank[m.member_at[c.pos]];
    size_t *sc = NULL;
    if (direct) {
        if (c.li == 0)
            st = a2a_exchange_direct(&c, &m, in, out, s, cc, tiled, in_place ? g->scratch[2] : NULL,
                                     in_bytes);
    } else if (g->comm) {
        /* To rank r: for each of its members (index order), this process's chunks for it,
         * one per local member (local order). Each device packs its own input's chunks. */
        sc = calloc(4 * (size_t)g->num_ranks, sizeof *sc);
        if (!sc) {
            free(m.pos);
            return fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
        }
        size_t *sdisp = sc + g->num_ranks, *rc = sdisp + g->num_ranks, *rdisp = rc + g->num_ranks;
        for (int r = 0, so = 0, ro = 0; r < g->num_ranks; r++) {
            int cnt = r == me ? 0 : g->rank_members[r];
            sc[r] = (size_t)cnt * (size_t)c.nl * cbytes;
            rc[r] = (size_t)c.nl * (size_t)cnt * cbytes;
            sdisp[r] = (size_t)so;
            rdisp[r] = (size_t)ro;
            so += (int)(sc[r] / cbytes);
            ro += (int)(rc[r] / cbytes);
        }
        for (int k = 0; k < c.n; k++) {
            int r = g->member_rank[k];
            if (r == me)
                continue;
            char *dst = (char *)g->scratch[0] + sdisp[r] * cbytes +
                        ((size_t)g->member_index[k] * (size_t)c.nl + (size_t)c.li) * cbytes;
            spmd__copy_strided(elem, L.cdims, L.extent, dst, dense,
                               SOURCE(c.li) + (size_t)(m.pos[k] * L.src_step) * elem,
                               L.src_strides);
        }
        st = barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0) {
            spmd__agreement a = agreement_of(&c);
            spmd__wait w = cross_wait(&c);
            st = crossed(&c,
                         spmd__comm_checked_alltoallv(g->comm, &a, g->scratch[0], sc, g->scratch[1],
                                                      rc, large, &w),
                         &w);
        }
        if (st == SPMD_OK)
            st = barrier(&c, 0);
    }
    /* Assemble: slot h of this device's output is chunk `pos` of member h's input (the
     * direct exchange wrote the other processes' slots already). */
    const void *ptrs[2] = {out->data, SOURCE(c.li)};
    copier cp = copier_for(ctx, block_bytes(out), 2, ptrs);
    cp.streaming = spmd__should_stream(block_bytes(out) * (size_t)c.nl);
    int rc = 0;
    for (int k = 0; st == SPMD_OK && !rc && k < c.n; k++) {
        char *dst = (char *)out->data + (size_t)(m.pos[k] * L.dst_step) * elem;
        int r = g->member_rank[k];
        if (r == me) {
            const char *src = SOURCE(m.local_of[k]) + (size_t)(c.pos * L.src_step) * elem;
            rc = spmd__copy_strided_with(copy_rows, &cp, elem, L.cdims, L.extent, dst,
                                         L.dst_strides, src, L.src_strides);
        } else if (!direct) {
            size_t *rdisp = sc + 3 * (size_t)g->num_ranks;
            const char *src =
                (const char *)g->scratch[1] + rdisp[r] * cbytes +
                ((size_t)c.li * (size_t)g->rank_members[r] + (size_t)g->member_index[k]) * cbytes;
            spmd__copy_strided(elem, L.cdims, L.extent, dst, L.dst_strides, src, dense);
        }
    }
#undef SOURCE
    if (st == SPMD_OK) {
        st = copier_finish(&cp, rc);
        if (st != SPMD_OK)
            st = fail(&c, st);
    }
    if (st == SPMD_OK || (direct && c.li != 0))
        st = barrier(&c, 0); /* local inputs stay valid until every member has read them */
    free(sc);
    free(m.pos);
    return st;
}

/* ---- ragged all_to_all (JAX's lax.ragged_all_to_all) ---- */

static spmd_status spmd_axis_index_checked(const spmd_ctx *ctx, const char *axes, int *index);

/* One of ragged_all_to_all's offset or size blocks, read into v[n] (it must be a 1-D integer
 * block with one entry per member of the group). */
static spmd_status read_counts(const spmd_block *b, const char *name, int n, int64_t *v)
{
    SPMD_CHECK(spmd__check_block(b, name, "spmd_ragged_all_to_all"));
    SPMD_REQUIRE(b->dtype == SPMD_DTYPE_I32 || b->dtype == SPMD_DTYPE_I64,
                 SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_ragged_all_to_all: %s must be of integer type (int32 or int64), not %s",
                 name, spmd_dtype_name(b->dtype));
    SPMD_REQUIRE(b->ndim == 1 && b->shape[0] == n, SPMD_ERR_SHAPE,
                 "spmd_ragged_all_to_all: %s must be rank 1 with one entry per member of the group "
                 "(%d), but it has rank %d and %lld entries",
                 name, n, b->ndim, (long long)(b->ndim >= 1 ? b->shape[0] : 1));
    for (int j = 0; j < n; j++)
        v[j] = spmd__load_int(b->dtype, b->data, (size_t)j);
    return SPMD_OK;
}

/* operand and output: rows along dimension 0, alike in dtype and in every other dimension. */
static spmd_status check_ragged_shapes(const spmd_block *operand, const spmd_block *output,
                                       const spmd_block *out)
{
    SPMD_CHECK(spmd__check_block(operand, "operand", "spmd_ragged_all_to_all"));
    SPMD_CHECK(spmd__check_block(output, "output", "spmd_ragged_all_to_all"));
    SPMD_CHECK(spmd__check_block(out, "out", "spmd_ragged_all_to_all"));
    SPMD_REQUIRE(operand->dtype == output->dtype, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_ragged_all_to_all: operand (%s) and output (%s) must have the same dtype",
                 spmd_dtype_name(operand->dtype), spmd_dtype_name(output->dtype));
    int same = operand->ndim >= 1 && operand->ndim == output->ndim;
    for (int j = 1; same && j < operand->ndim; j++)
        same = operand->shape[j] == output->shape[j];
    if (!same) {
        char a[128], b[128];
        shape_text(operand, a, sizeof a);
        shape_text(output, b, sizeof b);
        return SPMD_ERROR(
            SPMD_ERR_SHAPE,
            "spmd_ragged_all_to_all: input and output shapes must be equal, except for "
            "the outermost dimension (and at least rank 1): operand is %s, output %s",
            a, b);
    }
    return check_out_shape(out, output->dtype, output->ndim, output->shape,
                           "spmd_ragged_all_to_all");
}

/* Each member's slices for member j: rows [input_offsets[j], + send_sizes[j]) of its operand,
 * within the operand, landing within j's output (every output has this one's shape). */
static spmd_status check_ragged_ranges(const int64_t *v, int n, int64_t rows, int64_t out_rows)
{
    const int64_t *in_off = v, *send = v + n, *out_off = v + 2 * (size_t)n,
                  *recv = v + 3 * (size_t)n;
    for (int j = 0; j < n; j++) {
        SPMD_REQUIRE(
            send[j] >= 0 && in_off[j] >= 0 && in_off[j] <= rows - send[j],
            SPMD_ERR_INVALID_ARGUMENT,
            "spmd_ragged_all_to_all: the slice for member %d, input_offsets[%d] = %lld and "
            "send_sizes[%d] = %lld, is not within the operand's %lld rows",
            j, j, (long long)in_off[j], j, (long long)send[j], (long long)rows);
        SPMD_REQUIRE(
            out_off[j] >= 0 && out_off[j] <= out_rows - send[j], SPMD_ERR_INVALID_ARGUMENT,
            "spmd_ragged_all_to_all: the slice for member %d, output_offsets[%d] = %lld and "
            "send_sizes[%d] = %lld, is not within its output's %lld rows",
            j, j, (long long)out_off[j], j, (long long)send[j], (long long)out_rows);
        SPMD_REQUIRE(
            recv[j] >= 0 && recv[j] <= out_rows, SPMD_ERR_INVALID_ARGUMENT,
            "spmd_ragged_all_to_all: recv_sizes[%d] = %lld is not within the output's %lld "
            "rows",
            j, (long long)recv[j], (long long)out_rows);
    }
    return SPMD_OK;
}

/* A row of the exchange: where the slice goes in the receiver's output and how many rows it
 * has, then its rows (padded to the group's longest slice). */
typedef struct ragged_header {
    int64_t out_offset, rows;
} ragged_header;

/*
 * Every member's slices padded to the group's longest (a pmax of one number finds it) and moved
 * by one untiled all_to_all of [G, header + longest rows]; each receiver checks that what member
 * h sends it is recv_sizes[h] rows and writes them at the sender's output_offsets. Bytes per
 * member: G x the longest slice, near the data itself when the slices are balanced.
 */
static spmd_status
spmd_ragged_all_to_all_checked(spmd_ctx *ctx, const spmd_block *operand, const spmd_block *output,
                               const spmd_block *input_offsets, const spmd_block *send_sizes,
                               const spmd_block *output_offsets, const spmd_block *recv_sizes,
                               spmd_block *out, const char *axes)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_ragged_all_to_all"));
    int n = 0, ids[SPMD_MAX_MESH_AXES], naxes = 0;
    spmd_status st = check_ragged_shapes(operand, output, out);
    if (st == SPMD_OK)
        st = group_of(ctx, axes, ids, &naxes, &n);
    int me = 0;
    if (st == SPMD_OK)
        st = spmd_axis_index_checked(ctx, axes, &me);
    if (st == SPMD_OK)
        st = spmd__ctx_sync(ctx); /* kernels fn queued may still be writing the counts */
    int64_t *v = st == SPMD_OK ? malloc(4 * (size_t)n * sizeof *v) : NULL;
    if (st == SPMD_OK && !v)
        st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory for a group of %d", n);
    const spmd_block *counts[4] = {input_offsets, send_sizes, output_offsets, recv_sizes};
    static const char *const names[4] = {"input_offsets", "send_sizes", "output_offsets",
                                         "recv_sizes"};
    for (int k = 0; k < 4 && st == SPMD_OK; k++)
        st = read_counts(counts[k], names[k], n, v + (size_t)k * (size_t)n);
    if (st == SPMD_OK)
        st = check_ragged_ranges(v, n, operand->shape[0], output->shape[0]);
    if (st != SPMD_OK) {
        free(v);
        return fail_args(ctx, st);
    }
    size_t elem = spmd_dtype_size(operand->dtype);
    size_t row_bytes = elem;
    for (int j = 1; j < operand->ndim; j++)
        row_bytes *= (size_t)operand->shape[j];
    uint64_t layout = mix_block(mix_block(0x72616767656400ull, operand), output); /* "ragged" */
    /* the group's longest slice */
    int64_t shape1[1] = {1};
    spmd_block mine, longest;
    st = spmd_ctx_alloc(ctx, 1, shape1, SPMD_DTYPE_I64, &mine);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape1, SPMD_DTYPE_I64, &longest);
    if (st != SPMD_OK) {
        free(v);
        return fail_args(ctx, st);
    }
    int64_t most = 0;
    for (int j = 0; j < n; j++)
        most = v[n + j] > most ? v[n + j] : most;
    *(int64_t *)mine.data = most;
    packed_layout = layout | 1;
    st = spmd_pmax_checked(ctx, &mine, &longest, axes, NULL);
    packed_layout = 0;
    st = finished(ctx, st, 0, NULL); /* its trace record: the all_to_all makes its own */
    if (st != SPMD_OK) {
        free(v);
        return st;
    }
    most = *(const int64_t *)longest.data;
    size_t row = sizeof(ragged_header) + (size_t)most * row_bytes;
    int64_t shape2[2] = {n, (int64_t)row};
    spmd_block send, recv;
    st = spmd_ctx_alloc(ctx, 2, shape2, SPMD_DTYPE_U8, &send);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 2, shape2, SPMD_DTYPE_U8, &recv);
    if (st != SPMD_OK) {
        free(v);
        return fail_args(ctx, st);
    }
    for (int j = 0; j < n; j++) {
        char *r = (char *)send.data + (size_t)j * row;
        ragged_header h = {v[2 * (size_t)n + j], v[n + j]};
        size_t bytes = (size_t)h.rows * row_bytes;
        memcpy(r, &h, sizeof h);
        memcpy(r + sizeof h, (const char *)operand->data + (size_t)v[j] * row_bytes, bytes);
        memset(r + sizeof h + bytes, 0, row - sizeof h - bytes); /* no stray bytes on the wire */
    }
    packed_layout = layout | 1;
    st = spmd_all_to_all_checked(ctx, &send, &recv, axes, 0, 0, 0, NULL);
    packed_layout = 0;
    if (st == SPMD_OK && out->data != output->data)
        memmove(out->data, output->data, block_bytes(output));
    for (int h = 0; st == SPMD_OK && h < n; h++) {
        const char *r = (const char *)recv.data + (size_t)h * row;
        ragged_header head;
        memcpy(&head, r, sizeof head);
        const int64_t *recv_sizes_v = v + 3 * (size_t)n;
        if (head.rows != recv_sizes_v[h] || head.out_offset < 0 ||
            head.out_offset > output->shape[0] - head.rows)
            st = fail_args(ctx,
                           SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                                      "spmd_ragged_all_to_all: member %d of the group sends %lld "
                                      "rows to this one (member %d) but recv_sizes[%d] is "
                                      "%lld; each recv_sizes[h] must equal member h's "
                                      "send_sizes for this member",
                                      h, (long long)head.rows, me, h, (long long)recv_sizes_v[h]));
        else if (head.rows > 0)
            memcpy((char *)out->data + (size_t)head.out_offset * row_bytes, r + sizeof head,
                   (size_t)head.rows * row_bytes);
    }
    free(v);
    return st;
}

/* ---- many blocks in one collective (a pytree's leaves) ---- */

/* What every local member computes alike about block i of a many-block reduction. */
typedef struct many_block {
    spmd_dtype dtype; /* of the reduction (out's) */
    size_t count, bytes;
    size_t fused; /* between processes: byte offset of its accumulator elements in the fused
                     buffer */
    int owner;    /* a small block's local member (-1: split between them all) */
} many_block;

/* Splits the work on the blocks between the local members: a large block in slices, each small
 * one whole to a member, members taking consecutive blocks of about equal bytes. */
static void assign_blocks(many_block *mb, int n, int nl)
{
    size_t whole = 0, before = 0;
    for (int i = 0; i < n; i++)
        if (nl == 1 || mb[i].bytes < SPLIT_BYTES)
            whole += mb[i].bytes;
    for (int i = 0; i < n; i++) {
        mb[i].owner = -1;
        if (nl > 1 && mb[i].bytes >= SPLIT_BYTES)
            continue;
        mb[i].owner = (int)(before * (size_t)nl / (whole + 1)); /* < nl */
        before += mb[i].bytes;
    }
}

/* This member's part [b, e) of block i; 0 when it has none. */
static int my_part(const many_block *mb, int nl, int li, size_t *b, size_t *e)
{
    if (mb->owner >= 0) {
        *b = 0;
        *e = mb->count;
        return mb->owner == li;
    }
    slice_of(mb->count, nl, li, b, e);
    return *e > *b;
}

/* The fused buffer: one segment per accumulator dtype (in dtype order, 16-byte aligned). */
static size_t fuse_blocks(many_block *mb, int n, size_t *seg_begin, size_t *seg_end)
{
    size_t at = 0;
    for (int t = 0; t < SPMD_DTYPE_COUNT; t++) {
        at = (at + 15) / 16 * 16;
        seg_begin[t] = at;
        for (int i = 0; i < n; i++)
            if (spmd__accumulator_dtype(mb[i].dtype) == (spmd_dtype)t) {
                mb[i].fused = at;
                at += mb[i].count * spmd_dtype_size((spmd_dtype)t);
            }
        seg_end[t] = at;
    }
    return at;
}

/* The fused buffer's segments, each reduced in its own dtype: the data of a small many-block
 * reduction travels with the agreement, whatever its dtypes. */
typedef struct fused_reduction {
    const size_t *seg_begin, *seg_end;
    spmd__reduce_op op;
} fused_reduction;

static void combine_fused(void *acc, const void *in, size_t bytes, void *arg)
{
    const fused_reduction *f = arg;
    for (int t = 0; t < SPMD_DTYPE_COUNT; t++)
        if (f->seg_end[t] > f->seg_begin[t] && f->seg_end[t] <= bytes)
            spmd__reduce_into((spmd_dtype)t, f->op, (char *)acc + f->seg_begin[t],
                              (const char *)in + f->seg_begin[t],
                              (f->seg_end[t] - f->seg_begin[t]) / spmd_dtype_size((spmd_dtype)t));
}

/* The reduction between processes of the fused buffer, by the first local member: the
 * process's blocks already added up in it (ranks holding aligned blocks of positions), or each
 * member's blocks packed in its own fused buffer of g->scratch[1] (in position order). */
static spmd_status many_between_processes(coll *c, size_t fused, spmd__reduce_op rop,
                                          const size_t *seg_begin, const size_t *seg_end)
{
    spmd__group *g = c->g;
    const void **packed = malloc((size_t)c->nl * sizeof *packed);
    if (!packed)
        return fail(c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    for (int k = 0; k < c->nl; k++)
        packed[k] = (char *)g->scratch[1] + (size_t)k * fused;
    int segments = 0, only = 0;
    for (int t = 0; t < SPMD_DTYPE_COUNT; t++)
        if (seg_end[t] > seg_begin[t])
            segments++, only = t;
    spmd_status st;
    if (segments == 1) { /* one accumulator dtype: a plain reduction, which large blocks split */
        size_t elem = spmd_dtype_size((spmd_dtype)only);
        for (int k = 0; k < c->nl; k++)
            packed[k] = (const char *)packed[k] + seg_begin[only];
        reduction r = {(spmd_dtype)only, rop};
        st = reduce_between(c, packed, (spmd_dtype)only, (char *)g->scratch[0] + seg_begin[only],
                            (seg_end[only] - seg_begin[only]) / elem, (spmd_dtype)only, rop,
                            combine, &r, NULL, NULL, 0, 0);
    } else {
        fused_reduction f = {seg_begin, seg_end, rop};
        st = reduce_between(c, packed, SPMD_DTYPE_U8, g->scratch[0], fused, SPMD_DTYPE_U8, rop,
                            combine_fused, &f, NULL, NULL, 0, 0);
    }
    free(packed);
    return st;
}

/* The reduction between processes of large blocks of one dtype, in place in the first local
 * member's outputs: MPI reads and writes them through datatypes, no packing. The process's
 * blocks are added up there already, or (one member) read from its inputs as the reduction
 * needs them. */
static spmd_status many_in_place(coll *c, const many_block *mb, int n, spmd__reduce_op rop)
{
    const spmd_block *first_out = c->g->slots[0].out;
    const void *const *first_in = (const void *const *)c->g->slots[0].in;
    spmd__piece_run *runs = malloc(2 * (size_t)n * sizeof *runs), *sources = runs + n;
    if (!runs)
        return fail(c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    size_t count = 0;
    for (int i = 0; i < n; i++) {
        runs[i] = (spmd__piece_run){first_out[i].data, mb[i].count};
        sources[i] = (spmd__piece_run){(void *)first_in[i], mb[i].count};
        count += mb[i].count;
    }
    reduction r = {mb[0].dtype, rop};
    spmd_status st = reduce_between(c, NULL, mb[0].dtype, NULL, count, mb[0].dtype, rop, combine,
                                    &r, runs, c->nl == 1 ? sources : NULL, n, 0);
    free(runs);
    return st;
}

static spmd_status reduce_blocks(spmd_ctx *ctx, int n, const spmd_block *given, spmd_block *out,
                                 const char *axes, op_kind op, spmd__reduce_op rop)
{
    const char *name = op_names[op];
    spmd_status st = SPMD_OK;
    if (n < 0 || (n > 0 && (!given || !out)))
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "%s of many blocks: n is %d, in %s, out %s; pass n >= 0 and arrays of n "
                        "blocks",
                        name, n, given ? "given" : "NULL", out ? "given" : "NULL");
    if (st != SPMD_OK)
        return fail_args(ctx, st);
    if (n == 0)
        return SPMD_OK; /* an empty tree: no collective, as in JAX */
    const void **src = malloc((size_t)n * sizeof *src);
    many_block *mb = calloc((size_t)n, sizeof *mb);
    spmd_block first;
    if (!src || !mb)
        st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == SPMD_OK) /* kernels fn queued may still be writing the blocks converted below */
        st = spmd__ctx_sync(ctx);
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        spmd_block prepared;
        st = prepare_reduction(op, &given[i], &out[i], &prepared);
        if (st != SPMD_OK) {
            char detail[SPMD__MESSAGE_CAPACITY];
            spmd__copy_text(detail, sizeof detail, spmd_last_error());
            st = SPMD_ERROR(st, "block %d of %d: %s", i, n, detail);
            break;
        }
        if (i == 0)
            first = prepared;
        src[i] = prepared.data;
        mb[i].dtype = prepared.dtype;
        mb[i].count = (size_t)spmd_block_size(&prepared);
        mb[i].bytes = mb[i].count * spmd_dtype_size(prepared.dtype);
    }
    if (st != SPMD_OK) {
        free(src);
        free(mb);
        return fail_args(ctx, st);
    }
    coll c;
    st = begin(ctx, axes, op, &first, NULL, &c);
    if (st != SPMD_OK) {
        free(src);
        free(mb);
        return st;
    }
    c.nblocks = n;
    c.trace_in = given;
    c.trace_n = n;
    uint64_t h = mix(c.fingerprint, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        spmd_block shape_of = out[i];
        shape_of.dtype = mb[i].dtype;
        h = mix_block(h, &shape_of);
    }
    c.fingerprint = h;
    spmd__group *g = c.g;
    int cross = g->comm != NULL;
    /* Between processes every block goes in one fused buffer: one reduction in the canonical
     * order, whatever the number of blocks. */
    size_t seg_begin[SPMD_DTYPE_COUNT], seg_end[SPMD_DTYPE_COUNT], fused = 0;
    int in_place = cross; /* large blocks of one dtype reduced in place (MPI reads the outputs) */
    if (cross) {
        fused = fuse_blocks(mb, n, seg_begin, seg_end);
        for (int i = 0; i < n; i++)
            in_place &= mb[i].dtype == mb[0].dtype && !spmd__is_half(mb[i].dtype);
        in_place &= fused > SPMD__COMM_COMBINED_BYTES;
        c.scratch_need[0] = fused;
        c.scratch_need[1] = (size_t)c.nl * fused; /* each position's blocks, packed */
        c.scratch_if_blocks = 1;
        c.scratch_blocks[0] = in_place ? 0 : fused;
    }
    assign_blocks(mb, n, c.nl);
    const void **srcs = malloc(2 * (size_t)c.nl * sizeof *srcs);
    if (!srcs) {
        free(src);
        free(mb);
        return fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    }
    void **dsts = (void **)(srcs + c.nl);
    st = arrive(&c, src, out, NULL);
    int blocks = cross && st == SPMD_OK && g->positions.block > 0;
    in_place &= blocks;
    if (cross && st == SPMD_OK && !blocks) { /* each member packs its own blocks */
        int at = 0;
        while (g->local_order[at] != c.li)
            at++;
        char *mine = (char *)g->scratch[1] + (size_t)at * fused;
        for (int i = 0; i < n; i++)
            spmd__reduce_many(mb[i].dtype, rop, mine + mb[i].fused, &src[i], 1, 0, mb[i].count);
    }
    /* 1. each member reduces its part of the local blocks (inputs in position order): into
     *    every local output (one process), or into the fused buffer (several) */
    for (int i = 0; i < n && st == SPMD_OK && (!cross || blocks); i++) {
        size_t b, e;
        if (!my_part(&mb[i], c.nl, c.li, &b, &e))
            continue;
        for (int k = 0; k < c.nl; k++) {
            srcs[k] = ((const void *const *)g->slots[g->local_order[k]].in)[i];
            dsts[k] = ((spmd_block *)g->slots[k].out)[i].data;
        }
        if (!cross)
            st = reduce_slice(ctx, mb[i].dtype, rop, dsts, c.nl, srcs, b, e, mb[i].bytes);
        else if (in_place && c.nl > 1) /* first member's output (one: many_in_place reads) */
            spmd__reduce_many(mb[i].dtype, rop, dsts[0], srcs, c.nl, b, e);
        else if (!in_place)
            spmd__reduce_many(mb[i].dtype, rop, (char *)g->scratch[0] + mb[i].fused, srcs, c.nl, b,
                              e);
        if (st != SPMD_OK)
            st = fail(&c, st);
    }
    /* 2. between processes, then each member copies its part back out to every output */
    if (cross) {
        if (st == SPMD_OK && c.nl > 1)
            st = barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0)
            st = in_place ? many_in_place(&c, mb, n, rop)
                          : many_between_processes(&c, fused, rop, seg_begin, seg_end);
        if (st == SPMD_OK && c.nl > 1)
            st = barrier(&c, 0);
        for (int i = 0; i < n && st == SPMD_OK; i++) {
            size_t b, e;
            if (!my_part(&mb[i], c.nl, c.li, &b, &e))
                continue;
            const char *result = in_place ? ((spmd_block *)g->slots[0].out)[i].data
                                          : (char *)g->scratch[0] + mb[i].fused;
            for (int k = 0; k < c.nl; k++) {
                void *dst = ((spmd_block *)g->slots[k].out)[i].data;
                if (dst != result)
                    spmd__from_accumulator(mb[i].dtype, dst, result, b, e);
            }
        }
    }
    /* members wrote into each other's outputs: nobody returns before all are done */
    if (st == SPMD_OK && c.nl > 1)
        st = barrier(&c, 0);
    for (int i = 0; i < n && st == SPMD_OK && op == OP_PMEAN; i++)
        st = scale(ctx, &out[i], 1.0 / c.n, mb[i].count);
    free(srcs);
    free(src);
    free(mb);
    return st;
}

static spmd_status all_gather_blocks(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                                     const char *axes, int axis, int tiled)
{
    spmd_status st = SPMD_OK;
    if (n < 0 || (n > 0 && (!in || !out)))
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "all_gather of many blocks: n is %d, in %s, out %s; pass n >= 0 and "
                        "arrays of n blocks",
                        n, in ? "given" : "NULL", out ? "given" : "NULL");
    int *axis_of = st == SPMD_OK && n > 0 ? malloc((size_t)n * sizeof *axis_of) : NULL;
    if (st == SPMD_OK && n > 0 && !axis_of)
        st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        st = spmd__check_block(&in[i], "in", "all_gather");
        if (st == SPMD_OK)
            st = spmd__check_block(&out[i], "out", "all_gather");
        int rank_out = st != SPMD_OK ? 0 : tiled ? in[i].ndim : in[i].ndim + 1;
        axis_of[i] = st == SPMD_OK ? normalize_axis(axis, rank_out) : 0;
        if (st == SPMD_OK &&
            (axis_of[i] < 0 || axis_of[i] >= rank_out || (tiled && in[i].ndim == 0)))
            st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                            "all_gather: axis %d is out of range for a %s gather of a rank-%d "
                            "block",
                            axis, tiled ? "tiled" : "stacked", in[i].ndim);
        if (st != SPMD_OK) {
            char detail[SPMD__MESSAGE_CAPACITY];
            spmd__copy_text(detail, sizeof detail, spmd_last_error());
            st = SPMD_ERROR(st, "block %d of %d: %s", i, n, detail);
        }
    }
    if (st != SPMD_OK || n == 0) {
        free(axis_of);
        return st == SPMD_OK ? SPMD_OK : fail_args(ctx, st);
    }
    coll c;
    st = begin(ctx, axes, OP_ALL_GATHER, &in[0], NULL, &c);
    if (st != SPMD_OK) {
        free(axis_of);
        return st;
    }
    c.nblocks = n;
    c.trace_in = in;
    c.trace_n = n;
    uint64_t h = mix(mix(mix(c.fingerprint, (uint64_t)n), (uint64_t)axis), (uint64_t)tiled);
    size_t seg = 0; /* one member's blocks, packed */
    for (int i = 0; i < n; i++) {
        h = mix_block(h, &in[i]);
        seg += block_bytes(&in[i]);
    }
    c.fingerprint = h;
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        int a = axis_of[i], rank_out = tiled ? in[i].ndim : in[i].ndim + 1;
        int64_t want[SPMD_MAX_RANK + 1];
        for (int j = 0, k = 0; j < rank_out; j++)
            want[j] =
                tiled ? in[i].shape[j] * (j == a ? c.n : 1) : (j == a ? c.n : in[i].shape[k++]);
        st = check_out_shape(&out[i], in[i].dtype, rank_out, want, "all_gather");
        if (st != SPMD_OK) {
            char detail[SPMD__MESSAGE_CAPACITY];
            spmd__copy_text(detail, sizeof detail, spmd_last_error());
            st = SPMD_ERROR(st, "block %d of %d: %s", i, n, detail);
        }
    }
    spmd__group *g = c.g;
    if (g->comm) {
        c.scratch_need[0] = (size_t)c.nl * seg;
        c.scratch_need[1] = (size_t)c.n * seg;
    }
    members m = {NULL, NULL, NULL};
    if (st == SPMD_OK)
        st = members_init(&c, &m);
    if (st != SPMD_OK) {
        free(axis_of);
        return fail(&c, st);
    }
    st = arrive(&c, in, out, NULL);
    copier host = {ctx, NULL, 0};
    if (st == SPMD_OK && !g->comm) {
        int rc = 0;
        for (int i = 0; i < n && !rc; i++) {
            const void *ptrs[2] = {out[i].data, in[i].data};
            copier cp = copier_for(ctx, block_bytes(&out[i]), 2, ptrs);
            for (int k = 0; k < c.n && !rc; k++) {
                const spmd_block *theirs = g->slots[m.local_of[k]].in;
                rc = place_gathered(&cp, &out[i], theirs[i].data, &in[i], axis_of[i], tiled,
                                    m.pos[k]);
            }
            rc = (int)copier_finish(&cp, rc);
        }
        st = rc ? fail(&c, (spmd_status)rc) : barrier(&c, 0);
    } else if (st == SPMD_OK) {
        /* this member's blocks packed in its segment; one all-gather of the segments */
        char *mine = (char *)g->scratch[0] + (size_t)c.li * seg;
        for (int i = 0; i < n; i++) {
            memcpy(mine, in[i].data, block_bytes(&in[i]));
            mine += block_bytes(&in[i]);
        }
        st = barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0) {
            size_t *counts = malloc((size_t)g->num_ranks * sizeof *counts);
            if (!counts)
                st = fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
            for (int r = 0; counts && r < g->num_ranks; r++)
                counts[r] = (size_t)g->rank_members[r] * seg;
            if (st == SPMD_OK) {
                spmd__agreement ag = agreement_of(&c);
                spmd__wait w = cross_wait(&c);
                st = crossed(&c,
                             spmd__comm_checked_allgatherv(g->comm, &ag, g->scratch[0],
                                                           g->scratch[1], counts, &w),
                             &w);
            }
            free(counts);
        }
        if (st == SPMD_OK)
            st = barrier(&c, 0);
        size_t *roff = st == SPMD_OK ? malloc((size_t)g->num_ranks * sizeof *roff) : NULL;
        if (st == SPMD_OK && !roff)
            st = fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
        if (st == SPMD_OK) {
            rank_offsets(g, roff);
            for (int k = 0; k < c.n; k++) {
                const char *theirs = (const char *)g->scratch[1] +
                                     (roff[g->member_rank[k]] + (size_t)g->member_index[k]) * seg;
                for (int i = 0; i < n; i++) {
                    (void)place_gathered(&host, &out[i], theirs, &in[i], axis_of[i], tiled,
                                         m.pos[k]);
                    theirs += block_bytes(&in[i]);
                }
            }
        }
        free(roff);
    }
    free(m.pos);
    free(axis_of);
    return st;
}

static spmd_status spmd_reduce_many_checked(const char *entry, spmd_ctx *ctx, int n,
                                            const spmd_block *in, spmd_block *out, const char *axes,
                                            op_kind op, spmd__reduce_op rop)
{
    SPMD_CHECK(spmd__ctx_check(ctx, entry));
    return reduce_blocks(ctx, n, in, out, axes, op, rop);
}

/* ---- axis_index / axis_size ---- */

static spmd_status spmd_axis_index_checked(const spmd_ctx *ctx, const char *axes, int *index)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_axis_index"));
    SPMD_REQUIRE_NOT_NULL(index, "spmd_axis_index");
    int a[SPMD_MAX_MESH_AXES], n = 0;
    SPMD_CHECK(parse_axes(ctx->call->mesh, axes, a, &n));
    *index = position_of(ctx->call->mesh, a, n, ctx->flat);
    return SPMD_OK;
}

static spmd_status spmd_axis_size_checked(const spmd_ctx *ctx, const char *axes, int *size)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_axis_size"));
    SPMD_REQUIRE_NOT_NULL(size, "spmd_axis_size");
    int a[SPMD_MAX_MESH_AXES], n = 0;
    return group_of(ctx, axes, a, &n, size);
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_psum(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes)
{
    return spmd__error_in(finished(ctx, spmd_psum_checked(ctx, in, out, axes, NULL), 1, out),
                          "spmd_psum");
}

spmd_status spmd_pmean(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes)
{
    return spmd__error_in(finished(ctx, spmd_pmean_checked(ctx, in, out, axes, NULL), 1, out),
                          "spmd_pmean");
}

spmd_status spmd_pmax(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes)
{
    return spmd__error_in(finished(ctx, spmd_pmax_checked(ctx, in, out, axes, NULL), 1, out),
                          "spmd_pmax");
}

spmd_status spmd_pmin(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes)
{
    return spmd__error_in(finished(ctx, spmd_pmin_checked(ctx, in, out, axes, NULL), 1, out),
                          "spmd_pmin");
}

spmd_status spmd_all_gather(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                            int axis, int tiled)
{
    return spmd__error_in(
        finished(ctx, spmd_all_gather_checked(ctx, in, out, axes, axis, tiled, NULL), 1, out),
        "spmd_all_gather");
}

spmd_status spmd_all_gather_invariant(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                      const char *axes, int axis, int tiled)
{
    spmd_status st = spmd_all_gather_checked(ctx, in, out, axes, axis, tiled, NULL);
    pending_proof.varying = 0; /* JAX's Varying -> Invariant */
    return spmd__error_in(finished(ctx, st, 1, out), "spmd_all_gather_invariant");
}

spmd_status spmd_psum_scatter(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                              const char *axes, int scatter_dimension, int tiled)
{
    return spmd__error_in(
        finished(ctx, spmd_psum_scatter_checked(ctx, in, out, axes, scatter_dimension, tiled, NULL),
                 1, out),
        "spmd_psum_scatter");
}

spmd_status spmd_ppermute(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                          const int *pairs, int npairs)
{
    return spmd__error_in(
        finished(ctx, spmd_ppermute_checked(ctx, in, out, axes, pairs, npairs), 1, out),
        "spmd_ppermute");
}

spmd_status spmd_pbroadcast(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                            int source)
{
    return spmd__error_in(
        finished(ctx, spmd_pbroadcast_checked(ctx, in, out, axes, source), 1, out),
        "spmd_pbroadcast");
}

spmd_status spmd_psend(spmd_ctx *ctx, const spmd_block *in, const char *axes, const int *pairs,
                       int npairs)
{
    return spmd__error_in(spmd_psend_checked(ctx, in, axes, pairs, npairs), "spmd_psend");
}

spmd_status spmd_precv(spmd_ctx *ctx, spmd_block *out, const char *axes, const int *pairs,
                       int npairs)
{
    return spmd__error_in(finished(ctx, spmd_precv_checked(ctx, out, axes, pairs, npairs), 1, out),
                          "spmd_precv");
}

/* The many forms' outs were written on the host after the packed collective: no proof, but
 * they vary by type as the collective's out did. */
static spmd_status finished_many(spmd_ctx *ctx, spmd_status st, int n, spmd_block *out,
                                 const char *name)
{
    unsigned varying = pending_proof.varying;
    st = finished(ctx, st, 0, NULL);
    for (int i = 0; st == SPMD_OK && i < n; i++)
        spmd__ctx_note(ctx, &out[i], (spmd__proof){.varying = varying, .varying_by = name});
    return st;
}

spmd_status spmd_ppermute_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                               const char *axes, const int *pairs, int npairs)
{
    spmd_status st = spmd_ppermute_many_checked(ctx, n, in, out, axes, pairs, npairs);
    return spmd__error_in(finished_many(ctx, st, n, out, "ppermute_many"), "spmd_ppermute_many");
}

spmd_status spmd_all_to_all(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                            int split_axis, int concat_axis, int tiled)
{
    return spmd__error_in(
        finished(ctx,
                 spmd_all_to_all_checked(ctx, in, out, axes, split_axis, concat_axis, tiled, NULL),
                 1, out),
        "spmd_all_to_all");
}

spmd_status spmd_all_to_all_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                                 const char *axes, const int *split_axes, const int *concat_axes,
                                 int tiled)
{
    spmd_status st = spmd_all_to_all_many_checked(ctx, n, in, out, axes, split_axes, concat_axes,
                                                  tiled, "spmd_all_to_all_many");
    return spmd__error_in(finished_many(ctx, st, n, out, "all_to_all_many"),
                          "spmd_all_to_all_many");
}

spmd_status spmd_pswapaxes_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                                const char *axes, const int *axis)
{
    spmd_status st =
        spmd_all_to_all_many_checked(ctx, n, in, out, axes, axis, axis, 0, "spmd_pswapaxes_many");
    return spmd__error_in(finished_many(ctx, st, n, out, "pswapaxes_many"), "spmd_pswapaxes_many");
}

spmd_status spmd_ragged_all_to_all(spmd_ctx *ctx, const spmd_block *operand,
                                   const spmd_block *output, const spmd_block *input_offsets,
                                   const spmd_block *send_sizes, const spmd_block *output_offsets,
                                   const spmd_block *recv_sizes, spmd_block *out, const char *axes)
{
    spmd_status st = spmd_ragged_all_to_all_checked(ctx, operand, output, input_offsets, send_sizes,
                                                    output_offsets, recv_sizes, out, axes);
    return spmd__error_in(finished_many(ctx, st, 1, out, "ragged_all_to_all"),
                          "spmd_ragged_all_to_all");
}

spmd_status spmd_axis_index(const spmd_ctx *ctx, const char *axes, int *index)
{
    return spmd__error_in(spmd_axis_index_checked(ctx, axes, index), "spmd_axis_index");
}

spmd_status spmd_axis_size(const spmd_ctx *ctx, const char *axes, int *size)
{
    return spmd__error_in(spmd_axis_size_checked(ctx, axes, size), "spmd_axis_size");
}

spmd_status spmd_psum_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                             const spmd_axis_groups *groups)
{
    return spmd__error_in(finished(ctx, spmd_psum_checked(ctx, in, out, axes, groups), 1, out),
                          "spmd_psum_groups");
}

spmd_status spmd_pmean_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                              const char *axes, const spmd_axis_groups *groups)
{
    return spmd__error_in(finished(ctx, spmd_pmean_checked(ctx, in, out, axes, groups), 1, out),
                          "spmd_pmean_groups");
}

spmd_status spmd_pmax_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                             const spmd_axis_groups *groups)
{
    return spmd__error_in(finished(ctx, spmd_pmax_checked(ctx, in, out, axes, groups), 1, out),
                          "spmd_pmax_groups");
}

spmd_status spmd_pmin_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                             const spmd_axis_groups *groups)
{
    return spmd__error_in(finished(ctx, spmd_pmin_checked(ctx, in, out, axes, groups), 1, out),
                          "spmd_pmin_groups");
}

spmd_status spmd_all_gather_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                   const char *axes, int axis, int tiled,
                                   const spmd_axis_groups *groups)
{
    return spmd__error_in(
        finished(ctx, spmd_all_gather_checked(ctx, in, out, axes, axis, tiled, groups), 1, out),
        "spmd_all_gather_groups");
}

spmd_status spmd_psum_scatter_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                     const char *axes, int scatter_dimension, int tiled,
                                     const spmd_axis_groups *groups)
{
    return spmd__error_in(
        finished(ctx,
                 spmd_psum_scatter_checked(ctx, in, out, axes, scatter_dimension, tiled, groups), 1,
                 out),
        "spmd_psum_scatter_groups");
}

spmd_status spmd_all_to_all_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                   const char *axes, int split_axis, int concat_axis, int tiled,
                                   const spmd_axis_groups *groups)
{
    return spmd__error_in(finished(ctx,
                                   spmd_all_to_all_checked(ctx, in, out, axes, split_axis,
                                                           concat_axis, tiled, groups),
                                   1, out),
                          "spmd_all_to_all_groups");
}

spmd_status spmd_psum_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                           const char *axes)
{
    return spmd__error_in(finished(ctx,
                                   spmd_reduce_many_checked("spmd_psum_many", ctx, n, in, out, axes,
                                                            OP_PSUM, SPMD__OP_SUM),
                                   n, out),
                          "spmd_psum_many");
}

spmd_status spmd_pmean_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                            const char *axes)
{
    return spmd__error_in(finished(ctx,
                                   spmd_reduce_many_checked("spmd_pmean_many", ctx, n, in, out,
                                                            axes, OP_PMEAN, SPMD__OP_SUM),
                                   n, out),
                          "spmd_pmean_many");
}

spmd_status spmd_pmax_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                           const char *axes)
{
    return spmd__error_in(finished(ctx,
                                   spmd_reduce_many_checked("spmd_pmax_many", ctx, n, in, out, axes,
                                                            OP_PMAX, SPMD__OP_MAX),
                                   n, out),
                          "spmd_pmax_many");
}

spmd_status spmd_pmin_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                           const char *axes)
{
    return spmd__error_in(finished(ctx,
                                   spmd_reduce_many_checked("spmd_pmin_many", ctx, n, in, out, axes,
                                                            OP_PMIN, SPMD__OP_MIN),
                                   n, out),
                          "spmd_pmin_many");
}

static spmd_status spmd_all_gather_many_checked(spmd_ctx *ctx, int n, const spmd_block *in,
                                                spmd_block *out, const char *axes, int axis,
                                                int tiled)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_all_gather_many"));
    return all_gather_blocks(ctx, n, in, out, axes, axis, tiled);
}

spmd_status spmd_all_gather_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                                 const char *axes, int axis, int tiled)
{
    spmd_status st = spmd_all_gather_many_checked(ctx, n, in, out, axes, axis, tiled);
    pending_proof.varying_by = "all_gather_many";
    return spmd__error_in(finished(ctx, st, n, out), "spmd_all_gather_many");
}
