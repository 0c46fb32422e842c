/* Collective groups of a mesh: the mesh's processes agree at its first shard_map; the groups of
 * an axis set, and their communicators, come with the first collective over it. */
#include "shard_map/groups.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/comm/process.h"
#include "runtime/comm/process_sets.h"
#include "runtime/runtime_impl.h"
#include "sharding/mesh_impl.h"
#include "shard_map/tag_lanes.h"

static void group_free(spmd__group *g, int abandon, int keep_scratch)
{
    if (!g)
        return;
    if (abandon)
        spmd__comm_abandon(g->comm);
    else
        spmd__comm_destroy(g->comm);
    spmd__event_destroy(&g->event);
    for (int i = 0; i < 3; i++) {
        if (keep_scratch) /* a collective given up on may still move data through it */
            spmd__comm_keep(g->scratch[i]);
        else
            free(g->scratch[i]);
    }
    free(g->slots);
    free(g->local_order);
    free(g->positions.rank_of);
    free(g->members_lists);
    free(g->member_flat);
    free(g);
}

static void table_free(spmd__group_table *t, int abandon, int keep_scratch)
{
    if (!t)
        return;
    for (int i = 0; i < t->num_groups; i++)
        group_free(t->groups[i], abandon, keep_scratch);
    free(t->groups);
    free(t->group_of_flat);
    free(t->grouping_store);
    free(t);
}

/* The published table of mask m, or NULL. */
static spmd__group_table *table_at(spmd__mesh_state *s, unsigned m)
{
    return atomic_load_explicit(&s->tables[m], memory_order_acquire);
}

/* Frees the state (communicators included): its mesh is going away. */
static void mesh_state_destroy(spmd__attachment *a)
{
    spmd__mesh_state *state = (spmd__mesh_state *)a;
    if (state->comm_id)
        spmd__calls_comm_forget(state->comm_id);
    /* After spmd_finalize MPI is gone: drop the communicators without calling it. */
    int abandon = !spmd_is_initialized();
    for (unsigned m = 0; m < SPMD__NUM_TABLES; m++)
        table_free(table_at(state, m), abandon, state->broken);
    for (int k = 0; k < SPMD__MAX_GROUPINGS; k++)
        table_free(state->retired[k], abandon, 0); /* unused since they were evicted */
    if (abandon || spmd__calls_failures() != state->failures_at_setup)
        spmd__comm_abandon(state->control);
    else
        spmd__comm_destroy(state->control);
    free(state->returned);
    free(state->at);
    pthread_mutex_destroy(&state->lock);
    pthread_mutex_destroy(&state->tables_lock);
    free(state);
}

spmd__mesh_state *spmd__mesh_state_get(spmd_mesh *mesh)
{
    spmd__mesh_state *s = (spmd__mesh_state *)atomic_load(&mesh->attachment);
    if (s)
        return s;
    s = aligned_alloc(_Alignof(spmd__mesh_state), sizeof *s);
    size_t returned_bytes =
        (size_t)(mesh->num_local ? mesh->num_local : 1) * sizeof(spmd__private_word);
    void *returned = aligned_alloc(_Alignof(spmd__private_word), returned_bytes);
    size_t at_bytes = (size_t)(mesh->num_local ? mesh->num_local : 1) * sizeof(spmd__device_at);
    void *at = aligned_alloc(_Alignof(spmd__device_at), at_bytes);
    if (!s || !returned || !at) {
        free(s);
        free(returned);
        free(at);
        SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory for the shard_map state of a mesh");
        return NULL;
    }
    memset(s, 0, sizeof *s);
    memset(returned, 0, returned_bytes);
    memset(at, 0, at_bytes);
    s->base.destroy = mesh_state_destroy;
    s->returned = returned;
    s->at = at;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->tables_lock, NULL);
    spmd__mesh_state *kept = (spmd__mesh_state *)spmd__mesh_attach(mesh, &s->base);
    if (kept != s) /* another thread attached one first */
        mesh_state_destroy(&s->base);
    return kept;
}

static uint64_t mesh_fingerprint(const spmd_mesh *m)
{
    uint64_t h = SPMD__FNV1A_SEED;
    h = spmd__fnv1a(h, &m->ndim, sizeof m->ndim);
    h = spmd__fnv1a(h, m->shape, (size_t)m->ndim * sizeof(int));
    for (int a = 0; a < m->ndim; a++)
        h = spmd__fnv1a(h, m->names[a], strlen(m->names[a]) + 1);
    return spmd__fnv1a(h, m->device_ids, (size_t)m->size * sizeof(int));
}

/* Fills member lists, ranks and local members of group `id` of table t. */
static spmd_status build_group(const spmd_mesh *m, const spmd__group_table *t, int id, int lane,
                               int me, spmd__group **out)
{
    spmd__group *g = calloc(1, sizeof *g);
    SPMD_REQUIRE(g != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory building collective groups");
    int n = t->group_size;
    if (n == 0) /* subgroups of different sizes */
        for (int f = 0; f < m->size; f++)
            n += t->group_of_flat[f] == id;
    /* one allocation for the per-member and per-rank arrays (at most n ranks) */
    g->member_flat = malloc((size_t)n * 8 * sizeof(int));
    if (!g->member_flat) {
        free(g);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory building collective groups");
    }
    g->member_rank = g->member_flat + n;
    g->member_index = g->member_rank + n;
    g->rank_process = g->member_index + n;
    g->rank_members = g->rank_process + n;
    g->local_flat = g->rank_members + n;
    g->rank_device = g->local_flat + n;
    g->id = id;
    g->lane = lane;
    g->size = n;
    int k = 0;
    for (int f = 0; f < m->size; f++)
        if (t->group_of_flat[f] == id)
            g->member_flat[k++] = f;
    /* ranks: the distinct processes, ascending */
    for (int i = 0; i < n; i++) {
        int p = m->process_of[g->member_flat[i]];
        int r = 0;
        while (r < g->num_ranks && g->rank_process[r] < p)
            r++;
        if (r == g->num_ranks || g->rank_process[r] != p) {
            memmove(&g->rank_process[r + 1], &g->rank_process[r],
                    (size_t)(g->num_ranks - r) * sizeof(int));
            g->rank_process[r] = p;
            g->num_ranks++;
        }
    }
    memset(g->rank_members, 0, (size_t)g->num_ranks * sizeof(int));
    for (int i = 0; i < n; i++) {
        int p = m->process_of[g->member_flat[i]];
        int r = 0;
        while (g->rank_process[r] != p)
            r++;
        if (g->rank_members[r] == 0) /* members ascend: the first is the lowest position */
            g->rank_device[r] = m->device_ids[g->member_flat[i]];
        g->member_rank[i] = r;
        g->member_index[i] = g->rank_members[r]++;
        if (p == me)
            g->local_flat[g->num_local++] = g->member_flat[i];
    }
    spmd__event_init(&g->event);
    atomic_init(&g->arrived, 0);
    atomic_init(&g->generation, 0);
    atomic_init(&g->next_piece, 0);
    g->slots = calloc((size_t)g->num_local, sizeof *g->slots);
    g->local_order = malloc((size_t)(g->num_local ? g->num_local : 1) * sizeof *g->local_order);
    if (!g->slots || !g->local_order) {
        group_free(g, 0, 0);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory building collective groups");
    }
    *out = g;
    return SPMD_OK;
}

/* Copies the grouping's key into t, with each position's subgroup (into *sub_of) and its member
 * index there. */
static spmd_status keep_grouping(spmd__group_table *t, const spmd__grouping *gr, int **sub_of)
{
    size_t words = (size_t)gr->num_groups + 3 * (size_t)gr->total;
    t->grouping_store = malloc(words * sizeof(int));
    SPMD_REQUIRE(t->grouping_store != NULL, SPMD_ERR_OUT_OF_MEMORY,
                 "out of memory building collective groups");
    int *sizes = t->grouping_store, *positions = sizes + gr->num_groups;
    t->rank_in_subgroup = positions + gr->total;
    *sub_of = t->rank_in_subgroup + gr->total;
    memcpy(positions, gr->positions, (size_t)gr->total * sizeof(int));
    for (int k = 0, i = 0; k < gr->num_groups; k++) {
        sizes[k] = gr->sizes ? gr->sizes[k] : gr->total / gr->num_groups;
        for (int j = 0; j < sizes[k]; j++, i++) {
            t->rank_in_subgroup[positions[i]] = j;
            (*sub_of)[positions[i]] = k;
        }
    }
    t->grouping = *gr;
    t->grouping.sizes = sizes;
    t->grouping.positions = positions;
    return SPMD_OK;
}

/* In build_table: a group with members in several processes. */
#define SPANS (-2)

/* Builds the groups of `mask`, or of `grouping` (its subgroups), that have local members, and
 * counts the groups of the mesh (this process's or not) with members in several processes. */
static spmd_status build_table(const spmd_mesh *m, unsigned mask, const spmd__grouping *grouping,
                               int me, spmd__group_table **out)
{
    spmd__group_table *t = calloc(1, sizeof *t);
    SPMD_REQUIRE(t != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory building collective groups");
    t->mask = mask;
    t->group_size = 1;
    for (int a = 0; a < m->ndim; a++)
        if (mask & (1u << a))
            t->group_size *= m->shape[a];
    t->num_groups = m->size / t->group_size;
    int *sub_of = NULL;
    if (grouping) {
        spmd_status st = keep_grouping(t, grouping, &sub_of);
        if (st != SPMD_OK) {
            table_free(t, 0, 0);
            return st;
        }
        int even = 1;
        for (int k = 1; k < grouping->num_groups; k++)
            even &= t->grouping.sizes[k] == t->grouping.sizes[0];
        t->num_groups *= grouping->num_groups;
        t->group_size = even ? t->grouping.sizes[0] : 0;
    }
    t->group_of_flat = malloc((size_t)m->size * sizeof(int));
    t->groups = calloc((size_t)t->num_groups, sizeof *t->groups);
    if (!t->group_of_flat || !t->groups) {
        table_free(t, 0, 0);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory building collective groups");
    }
    int c[SPMD_MAX_MESH_AXES];
    int *first_process = malloc((size_t)t->num_groups * sizeof *first_process);
    if (!first_process) {
        table_free(t, 0, 0);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory building collective groups");
    }
    for (int i = 0; i < t->num_groups; i++)
        first_process[i] = -1;
    for (int f = 0; f < m->size; f++) {
        spmd__mesh_coords(m, f, c);
        int id = 0;
        for (int a = 0; a < m->ndim; a++)
            if (!(mask & (1u << a)))
                id = id * m->shape[a] + c[a];
        if (grouping) { /* the subgroup of the position, over the axes in the order named */
            int pos = 0;
            for (int k = 0; k < grouping->naxes; k++)
                pos = pos * m->shape[grouping->axes[k]] + c[grouping->axes[k]];
            id = id * grouping->num_groups + sub_of[pos];
        }
        t->group_of_flat[f] = id;
        if (first_process[id] == -1)
            first_process[id] = m->process_of[f];
        else if (first_process[id] != m->process_of[f])
            first_process[id] = SPANS;
    }
    /* each group's lane (tag_lanes.h), in its place: every process numbers them alike */
    int *lane_of = first_process, lanes = 0;
    for (int id = 0; id < t->num_groups; id++)
        lane_of[id] = first_process[id] == SPANS ? lanes++ : -1;
    t->span_lanes = lanes;
    spmd_status st = SPMD_OK;
    for (int i = 0; i < m->num_local && st == SPMD_OK; i++) {
        int id = t->group_of_flat[m->position_of[m->local_ids[i]]];
        if (!t->groups[id])
            st = build_group(m, t, id, lane_of[id], me, &t->groups[id]);
    }
    free(first_process);
    if (st != SPMD_OK) {
        table_free(t, 0, 0);
        return st;
    }
    *out = t;
    return SPMD_OK;
}

/* The groups of the table that span processes exchange over the mesh's communicator, each in a
 * lane of its tags: no MPI communicator is made (that would wait for every member, without a
 * deadline), and nothing is collective here. With less than MPI_THREAD_MULTIPLE the MPI
 * communicators of the groups are made now, in group order on every process: made later, on
 * the first large collective of each, two device threads could wait in MPI for each other's
 * process. */
static spmd_status create_group_comms(spmd__mesh_state *s, const spmd_mesh *m, spmd__group_table *t,
                                      unsigned long call)
{
    /* A tag space too small for the whole layout serves the tables whose lanes fit (the axis
     * sets first, then the grouping slots in order); a table past it is refused, alike on
     * every process. */
    long total = spmd__lanes_total(m->ndim, m->shape, SPMD__MAX_GROUPINGS);
    long room = spmd__comm_subset_lanes(), lanes = total < room ? total : room;
    if (t->lane_base + t->span_lanes > lanes) {
        char text[SPMD__MESH_TEXT];
        spmd__ignore(spmd_mesh_format(m, text, sizeof text));
        return SPMD_ERROR(
            SPMD_ERR_UNSUPPORTED,
            "a collective over processes on %s (%d devices in %d processes) needs lanes of MPI "
            "tags up to %ld, but this MPI's tag space (MPI_TAG_UB %d) has room for %ld: use an "
            "MPI with a larger MPI_TAG_UB (Intel MPI's grows with MPIR_CVAR_CH4_OFI_TAG_BITS)%s, "
            "or a mesh of fewer devices",
            text, m->size, m->num_processes, t->lane_base + t->span_lanes, spmd__comm_tag_ub(),
            room,
            t->rank_in_subgroup ? ", fewer distinct axis_index_groups on this mesh (each takes "
                                  "the lanes of its slot, in the order first used)"
                                : "");
    }
    int *ranks = malloc((size_t)m->num_processes * sizeof *ranks);
    SPMD_REQUIRE(ranks != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    spmd_status st = SPMD_OK;
    for (int id = 0; id < t->num_groups && st == SPMD_OK; id++) {
        spmd__group *g = t->groups[id];
        if (!g || g->num_ranks < 2)
            continue;
        /* ranks in the mesh's communicator: the processes' places among the mesh's */
        for (int r = 0, q = 0; r < g->num_ranks; r++) {
            while (m->processes[q] < g->rank_process[r])
                q++;
            ranks[r] = q;
        }
        /* Counted from the call that builds the table: tables built anew after a failed call
         * (the same call on every process) start elsewhere in their lane than the messages an
         * abandoned exchange left behind (which the fingerprints would also tell apart). */
        st = spmd__comm_subset(s->control, ranks, g->num_ranks, (int)(t->lane_base + g->lane),
                               (int)lanes, call * 4099ul, &g->comm);
        if (st == SPMD_OK && !spmd__mpi_thread_multiple())
            st = spmd__comm_make_whole(g->comm);
    }
    free(ranks);
    return st;
}

/* Salts the key of a set-up attempt's tags: each attempt has its own, so that messages an
 * abandoned attempt left behind never meet the next. */
#define ATTEMPT_SALT 0x5e7a77e3b7c0ffeeull

static spmd_status agree_on_mesh(spmd_mesh *mesh, int64_t timeout_ns, unsigned long call)
{
    char text[SPMD__MESH_TEXT], description[240];
    spmd__ignore(spmd_mesh_format(mesh, text, sizeof text));
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, description, sizeof description);
    spmd__strbuf_printf(&sb, "shard_map on %s (devices ", text);
    spmd__strbuf_int_list(&sb, mesh->device_ids, mesh->size);
    spmd__strbuf_printf(&sb, ")");
    uint64_t fingerprint = mesh_fingerprint(mesh);
    /* keyed by the call: an attempt abandoned leaves nothing that the next could take */
    uint64_t h = fingerprint ^ ATTEMPT_SALT;
    spmd__wait w = {.deadline_ns = spmd__now_ns() + timeout_ns,
                    .what = "setting up the mesh for shard_map",
                    .key = spmd__fnv1a(h, &call, sizeof call) | 1};
    return spmd__agree_to_create(mesh->processes, mesh->num_processes, fingerprint, description,
                                 &w);
}

static spmd_status setup_locked(spmd_mesh *mesh, spmd__mesh_state *s, int64_t timeout_ns,
                                unsigned long call)
{
    if (mesh->num_processes < 2)
        return SPMD_OK;
    /* Only after every process has shown up is it safe to create a communicator, whose
     * creation blocks; no other call of this process comes between (calls.h). */
    SPMD_CHECK(agree_on_mesh(mesh, timeout_ns, call));
    s->failures_at_setup = spmd__calls_failures();
    SPMD_CHECK(spmd__comm_create(mesh->processes, mesh->num_processes, 1, &s->control));
    s->comm_id = spmd__calls_identity(mesh_fingerprint(mesh), 1);
    return SPMD_OK;
}

uint64_t spmd__mesh_state_identity(const spmd_mesh *mesh, spmd__mesh_state *s)
{
    return s->comm_id ? s->comm_id : spmd__calls_identity(mesh_fingerprint(mesh), 0);
}

spmd_status spmd__mesh_state_setup(spmd_mesh *mesh, spmd__mesh_state *s, int64_t timeout_ns,
                                   unsigned long call)
{
    pthread_mutex_lock(&s->lock);
    spmd_status st = SPMD_OK;
    if (s->broken) {
        st = SPMD_ERROR(SPMD_ERR_DISTRIBUTED,
                        "spmd_shard_map: this mesh is unusable after an earlier failed call (%s); "
                        "destroy it and create a new mesh",
                        s->broken_reason);
    } else if (!s->ready) {
        pthread_mutex_lock(&spmd__setup_lock);
        st = setup_locked(mesh, s, timeout_ns, call);
        pthread_mutex_unlock(&spmd__setup_lock);
        if (st == SPMD_OK) {
            s->ready = 1;
        } else if (st != SPMD_ERR_COLLECTIVE_MISMATCH) {
            /* A process missing: the next set-up would wait for it. A mismatch (every process
             * came, with something else) leaves nothing behind: the next call tries again. */
            char reason[512];
            snprintf(reason, sizeof reason, "its set-up failed: %s", spmd_last_error());
            spmd__mesh_state_break(s, reason);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* Builds the table of `mask` or of `grouping`, with the communicators of its groups (their tags
 * from lane_base on), and publishes it in slot `slot`. The caller holds tables_lock. */
static spmd_status build_and_publish(spmd_mesh *mesh, spmd__mesh_state *s, unsigned mask,
                                     const spmd__grouping *grouping, long lane_base, unsigned slot,
                                     unsigned long call, int me, spmd__group_table **out)
{
    spmd__group_table *t = NULL;
    spmd_status st = build_table(mesh, mask, grouping, me, &t);
    if (st == SPMD_OK) {
        t->lane_base = lane_base;
        atomic_init(&t->last_call, call); /* before anyone can see it: not evictable now */
    }
    if (st == SPMD_OK && t->span_lanes && s->control)
        st = create_group_comms(s, mesh, t, call);
    if (st == SPMD_OK)
        atomic_store_explicit(&s->tables[slot], t, memory_order_release);
    else
        table_free(t, 1, 0);
    *out = st == SPMD_OK ? t : NULL;
    return st;
}

spmd_status spmd__mesh_state_table(spmd_mesh *mesh, spmd__mesh_state *s, unsigned mask,
                                   unsigned long call, spmd__group_table **out)
{
    *out = table_at(s, mask);
    if (*out)
        return SPMD_OK;
    const spmd__runtime *rt = spmd__runtime_get("spmd_shard_map");
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&s->tables_lock);
    spmd_status st = SPMD_OK;
    spmd__group_table *t = table_at(s, mask);
    if (!t)
        st = build_and_publish(mesh, s, mask, NULL,
                               spmd__lanes_axes_base(mesh->ndim, mesh->shape, mask), mask, call,
                               rt->process_index, &t);
    pthread_mutex_unlock(&s->tables_lock);
    *out = st == SPMD_OK ? t : NULL;
    return st;
}

static int same_grouping(const spmd__grouping *a, const spmd__grouping *b)
{
    if (a->hash != b->hash || a->naxes != b->naxes || a->num_groups != b->num_groups ||
        a->total != b->total ||
        memcmp(a->axes, b->axes, (size_t)a->naxes * sizeof a->axes[0]) != 0 ||
        memcmp(a->positions, b->positions, (size_t)a->total * sizeof(int)) != 0)
        return 0;
    for (int k = 0; k < a->num_groups; k++)
        if ((a->sizes ? a->sizes[k] : a->total / a->num_groups) !=
            (b->sizes ? b->sizes[k] : b->total / b->num_groups))
            return 0;
    return 1;
}

/* The table of a grouping already built, or NULL. Read without the lock, a slot may be given
 * another table meanwhile: the one it held is retired, not freed, so it stays readable until
 * the call ends. */
static spmd__group_table *find_grouped(spmd__mesh_state *s, const spmd__grouping *gr, int *count)
{
    *count = atomic_load(&s->num_groupings);
    for (int k = 0; k < *count; k++) {
        spmd__group_table *t = table_at(s, (1u << SPMD_MAX_MESH_AXES) + (unsigned)k);
        if (t && same_grouping(&t->grouping, gr))
            return t;
    }
    return NULL;
}

/*
 * The grouping slot to reuse once all are taken: the least recently used table (the lowest
 * slot among equals), or an empty slot; -1 when every table was used by call `call`, whose
 * devices may hold pointers to any of them. Every process runs the same collectives in the same
 * order, so every process picks the same slot, and the slot's lanes of tags stay paired.
 */
static int slot_to_evict(spmd__mesh_state *s, unsigned long call)
{
    int best = -1;
    unsigned long oldest = call;
    for (int k = 0; k < SPMD__MAX_GROUPINGS; k++) {
        spmd__group_table *t = table_at(s, (1u << SPMD_MAX_MESH_AXES) + (unsigned)k);
        if (!t) /* a build that failed left it empty */
            return k;
        unsigned long used = atomic_load(&t->last_call);
        if (used < oldest) {
            oldest = used;
            best = k;
        }
    }
    return best;
}

/* Unpublishes the table of grouping slot k; it is freed at the slot's next eviction (a later
 * call: this call's devices may still be reading it), or with the mesh. Called locked. */
static void retire(spmd__mesh_state *s, int k)
{
    unsigned m = (1u << SPMD_MAX_MESH_AXES) + (unsigned)k;
    spmd__group_table *t = atomic_exchange(&s->tables[m], NULL);
    if (!t)
        return;
    /* the previous one was evicted in an earlier call (a table built now is not evictable
     * before the next one), which has ended: nothing reads it */
    table_free(s->retired[k], 0, 0);
    s->retired[k] = t;
}

spmd_status spmd__mesh_state_grouped_table(spmd_mesh *mesh, spmd__mesh_state *s,
                                           const spmd__grouping *gr, unsigned long call,
                                           spmd__group_table **out)
{
    int count = 0;
    *out = find_grouped(s, gr, &count);
    /* already marked by this call: nothing evicts it before the call ends */
    if (*out && atomic_load(&(*out)->last_call) == call)
        return SPMD_OK;
    const spmd__runtime *rt = spmd__runtime_get("spmd_shard_map");
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&s->tables_lock);
    spmd_status st = SPMD_OK;
    spmd__group_table *t = find_grouped(s, gr, &count);
    if (t) {
        atomic_store(&t->last_call, call);
    } else {
        /* Every process gives the groupings slots in the order the collectives first use them,
         * the same everywhere: the slot gives the grouping's lanes of tags. */
        int k = count < SPMD__MAX_GROUPINGS ? count : slot_to_evict(s, call);
        if (k < 0) {
            st = SPMD_ERROR(SPMD_ERR_UNSUPPORTED,
                            "this shard_map call uses more than %d distinct axis_index_groups on "
                            "its mesh; a mesh serves at most %d distinct axis_index_groups per "
                            "shard_map call (older ones make room between calls): reuse "
                            "groupings, or split fn over several calls",
                            SPMD__MAX_GROUPINGS, SPMD__MAX_GROUPINGS);
        } else {
            unsigned mask = 0;
            for (int a = 0; a < gr->naxes; a++)
                mask |= 1u << gr->axes[a];
            retire(s, k);
            /* a fresh table: its exchanges are counted from this call on (build_and_publish) */
            st = build_and_publish(
                mesh, s, mask, gr, spmd__lanes_grouping_base(mesh->ndim, mesh->shape, k),
                (1u << SPMD_MAX_MESH_AXES) + (unsigned)k, call, rt->process_index, &t);
            if (st == SPMD_OK && k == count)
                atomic_store(&s->num_groupings, count + 1);
        }
    }
    pthread_mutex_unlock(&s->tables_lock);
    *out = st == SPMD_OK ? t : NULL;
    return st;
}

void spmd__mesh_state_discard_comms(spmd__mesh_state *s, int keep_scratch)
{
    for (unsigned m = 0; m < SPMD__NUM_TABLES; m++) {
        spmd__group_table *t = atomic_exchange(&s->tables[m], NULL);
        table_free(t, 1, keep_scratch);
    }
    for (int k = 0; k < SPMD__MAX_GROUPINGS; k++) { /* unused by this call: no data pending */
        table_free(s->retired[k], 1, 0);
        s->retired[k] = NULL;
    }
    atomic_store(&s->num_groupings, 0); /* renumbered from 0 by every process alike */
}

void spmd__mesh_state_break(spmd__mesh_state *s, const char *reason)
{
    if (!s->broken)
        snprintf(s->broken_reason, sizeof s->broken_reason, "%s", reason);
    s->broken = 1;
    for (unsigned m = 0; m < SPMD__NUM_TABLES + SPMD__MAX_GROUPINGS; m++) {
        spmd__group_table *t =
            m < SPMD__NUM_TABLES ? table_at(s, m) : s->retired[m - SPMD__NUM_TABLES];
        for (int id = 0; t && id < t->num_groups; id++)
            if (t->groups[id]) {
                spmd__comm_abandon(t->groups[id]->comm);
                t->groups[id]->comm = NULL;
            }
    }
    spmd__comm_abandon(s->control);
    s->control = NULL;
}

void spmd__mesh_state_wake_all(spmd__mesh_state *s)
{
    for (unsigned m = 0; m < SPMD__NUM_TABLES; m++) {
        spmd__group_table *t = table_at(s, m);
        for (int id = 0; t && id < t->num_groups; id++)
            if (t->groups[id])
                spmd__event_signal(&t->groups[id]->event);
    }
}

void spmd__mesh_state_drain(spmd__mesh_state *s, unsigned long epoch)
{
    if (s->control)
        spmd__comm_drain(s->control, epoch);
}

void spmd__mesh_state_reset_rendezvous(spmd__mesh_state *s)
{
    for (unsigned m = 0; m < SPMD__NUM_TABLES; m++) {
        spmd__group_table *t = table_at(s, m);
        for (int id = 0; t && id < t->num_groups; id++)
            if (t->groups[id])
                atomic_store(&t->groups[id]->arrived, 0);
    }
}

void spmd__device_at_publish(spmd__device_at *at, unsigned long call, unsigned seq,
                             uint64_t fingerprint, const uint64_t what[2])
{
    unsigned v = atomic_load_explicit(&at->version, memory_order_relaxed);
    atomic_store_explicit(&at->version, v + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&at->call, call, memory_order_relaxed);
    atomic_store_explicit(&at->seq, seq, memory_order_relaxed);
    atomic_store_explicit(&at->fingerprint, fingerprint, memory_order_relaxed);
    atomic_store_explicit(&at->what[0], what[0], memory_order_relaxed);
    atomic_store_explicit(&at->what[1], what[1], memory_order_relaxed);
    atomic_store_explicit(&at->version, v + 2, memory_order_release);
}

void spmd__device_at_read(spmd__device_at *at, unsigned long *call, unsigned *seq,
                          uint64_t *fingerprint, uint64_t what[2])
{
    for (;;) {
        unsigned v = atomic_load_explicit(&at->version, memory_order_acquire);
        *call = atomic_load_explicit(&at->call, memory_order_relaxed);
        *seq = atomic_load_explicit(&at->seq, memory_order_relaxed);
        *fingerprint = atomic_load_explicit(&at->fingerprint, memory_order_relaxed);
        what[0] = atomic_load_explicit(&at->what[0], memory_order_relaxed);
        what[1] = atomic_load_explicit(&at->what[1], memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (!(v & 1) && atomic_load_explicit(&at->version, memory_order_relaxed) == v)
            return;
        sched_yield(); /* its writer is between two stores */
    }
}

int spmd__group_local_index(const spmd__group *g, int flat)
{
    for (int i = 0; i < g->num_local; i++)
        if (g->local_flat[i] == flat)
            return i;
    return -1;
}

spmd_status spmd__group_scratch_grow(spmd__group *g, int which, size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64))
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY,
                          "out of host memory for a %zu-byte collective staging buffer", bytes);
    free(g->scratch[which]);
    g->scratch[which] = p;
    g->scratch_bytes[which] = bytes;
    return SPMD_OK;
}
