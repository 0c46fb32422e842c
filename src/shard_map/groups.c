/* Collective groups of a mesh: the mesh's processes agree at its first shard_map; the groups of
 * an axis set, and their communicators, come with the first collective over it. */
#include "shard_map/groups.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/check.h"
#include "runtime/process.h"
#include "runtime/runtime_impl.h"
#include "shard_map/mesh_impl.h"

/* One mesh set-up at a time in this process, so that communicator creations (collective over
 * overlapping process sets) happen in the same order everywhere. */
pthread_mutex_t spmd__setup_lock = PTHREAD_MUTEX_INITIALIZER;

spmd__mesh_state *spmd__mesh_state_get(spmd_mesh *mesh) { return mesh->state; }

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
    free(t);
}

/* The published table of mask m, or NULL. */
static spmd__group_table *table_at(spmd__mesh_state *s, unsigned m)
{
    return atomic_load_explicit(&s->tables[m], memory_order_acquire);
}

void spmd__mesh_state_destroy(spmd__mesh_state *state)
{
    if (!state)
        return;
    /* After spmd_finalize MPI is gone: drop the communicators without calling it. */
    int abandon = !spmd_is_initialized();
    for (unsigned m = 0; m < (1u << SPMD_MAX_MESH_AXES); m++)
        table_free(table_at(state, m), abandon, state->broken);
    if (abandon)
        spmd__comm_abandon(state->control);
    else
        spmd__comm_destroy(state->control);
    free(state->processes);
    free(state->returned);
    pthread_mutex_destroy(&state->lock);
    pthread_mutex_destroy(&state->tables_lock);
    free(state);
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
static spmd_status build_group(const spmd_mesh *m, const spmd__group_table *t, int id, int me,
                               spmd__group **out)
{
    spmd__group *g = calloc(1, sizeof *g);
    SPMD_REQUIRE(g != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory building collective groups");
    int n = t->group_size;
    /* one allocation for the per-member and per-rank arrays (at most n ranks) */
    g->member_flat = malloc((size_t)n * 7 * sizeof(int));
    if (!g->member_flat) {
        free(g);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory building collective groups");
    }
    g->member_rank = g->member_flat + n;
    g->member_index = g->member_rank + n;
    g->rank_process = g->member_index + n;
    g->rank_members = g->rank_process + n;
    g->local_flat = g->rank_members + n;
    g->id = id;
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
        g->member_rank[i] = r;
        g->member_index[i] = g->rank_members[r]++;
        if (p == me)
            g->local_flat[g->num_local++] = g->member_flat[i];
    }
    spmd__event_init(&g->event);
    atomic_init(&g->arrived, 0);
    atomic_init(&g->generation, 0);
    g->slots = calloc((size_t)g->num_local, sizeof *g->slots);
    if (!g->slots) {
        group_free(g, 0, 0);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory building collective groups");
    }
    *out = g;
    return SPMD_OK;
}

/* Builds the groups of `mask` that have local members; *spans: some group of the mesh (this
 * process's or not) has members in several processes. */
static spmd_status build_table(const spmd_mesh *m, unsigned mask, int me, spmd__group_table **out,
                               int *spans)
{
    spmd__group_table *t = calloc(1, sizeof *t);
    SPMD_REQUIRE(t != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory building collective groups");
    t->mask = mask;
    t->group_size = 1;
    for (int a = 0; a < m->ndim; a++)
        if (mask & (1u << a))
            t->group_size *= m->shape[a];
    t->num_groups = m->size / t->group_size;
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
    *spans = 0;
    for (int f = 0; f < m->size; f++) {
        spmd__mesh_coords(m, f, c);
        int id = 0;
        for (int a = 0; a < m->ndim; a++)
            if (!(mask & (1u << a)))
                id = id * m->shape[a] + c[a];
        t->group_of_flat[f] = id;
        if (first_process[id] < 0)
            first_process[id] = m->process_of[f];
        else if (first_process[id] != m->process_of[f])
            *spans = 1;
    }
    free(first_process);
    for (int i = 0; i < m->num_local; i++) {
        int id = t->group_of_flat[m->position_of[m->local_ids[i]]];
        if (t->groups[id])
            continue;
        spmd_status st = build_group(m, t, id, me, &t->groups[id]);
        if (st != SPMD_OK) {
            table_free(t, 0, 0);
            return st;
        }
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
    int *ranks = malloc((size_t)s->num_processes * sizeof *ranks);
    SPMD_REQUIRE(ranks != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    spmd_status st = SPMD_OK;
    for (int id = 0; id < t->num_groups && st == SPMD_OK; id++) {
        spmd__group *g = t->groups[id];
        if (!g || g->num_ranks < 2)
            continue;
        /* ranks in the mesh's communicator: the processes' places among the mesh's */
        for (int r = 0, q = 0; r < g->num_ranks; r++) {
            while (s->processes[q] < g->rank_process[r])
                q++;
            ranks[r] = q;
        }
        /* Counted from the call that builds the table: tables built anew after a failed call
         * (the same call on every process) start elsewhere in their lane than the messages an
         * abandoned exchange left behind (which the fingerprints would also tell apart). */
        int lane = (int)t->mask * m->size + id, lanes = (1 << m->ndim) * m->size;
        st = spmd__comm_subset(s->control, ranks, g->num_ranks, lane, lanes, call * 4099ul,
                               &g->comm);
        if (st == SPMD_OK && !spmd__mpi_thread_multiple())
            st = spmd__comm_make_whole(g->comm);
    }
    free(ranks);
    return st;
}

spmd_status spmd__agree_on_view(const int *processes, int n, uint64_t fingerprint,
                                const char *description, spmd__wait *w)
{
    spmd__comm *view = NULL;
    SPMD_CHECK(spmd__comm_view(processes, n, &view));
    spmd_status st = spmd__comm_agree(view, fingerprint, description, w);
    if (st == SPMD_OK)
        spmd__comm_destroy(view);
    else
        spmd__comm_abandon(view); /* it may hold unfinished messages */
    return st;
}

static spmd_status agree_on_mesh(spmd_mesh *mesh, spmd__mesh_state *s, int64_t timeout_ns)
{
    char text[SPMD__MESH_TEXT], description[120];
    spmd__ignore(spmd_mesh_format(mesh, text, sizeof text));
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, description, sizeof description);
    spmd__strbuf_printf(&sb, "shard_map on %s (devices %d..%d)", text, mesh->device_ids[0],
                        mesh->device_ids[mesh->size - 1]);
    spmd__wait w = {.deadline_ns = spmd__now_ns() + timeout_ns,
                    .what = "setting up the mesh for shard_map"};
    return spmd__agree_on_view(s->processes, s->num_processes, mesh_fingerprint(mesh), description,
                               &w);
}

static spmd_status setup_locked(spmd_mesh *mesh, spmd__mesh_state *s, int64_t timeout_ns)
{
    s->processes = malloc((size_t)mesh->size * sizeof(int));
    SPMD_REQUIRE(s->processes != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    s->num_processes = 0;
    for (int f = 0; f < mesh->size; f++) {
        int p = mesh->process_of[f], i = 0;
        while (i < s->num_processes && s->processes[i] < p)
            i++;
        if (i < s->num_processes && s->processes[i] == p)
            continue;
        memmove(&s->processes[i + 1], &s->processes[i],
                (size_t)(s->num_processes - i) * sizeof(int));
        s->processes[i] = p;
        s->num_processes++;
    }
    if (s->num_processes < 2)
        return SPMD_OK;
    /* Only after every process has shown up is it safe to create a communicator, whose
     * creation blocks. */
    SPMD_CHECK(agree_on_mesh(mesh, s, timeout_ns));
    return spmd__comm_create(s->processes, s->num_processes, 1, &s->control);
}

spmd_status spmd__mesh_state_setup(spmd_mesh *mesh, spmd__mesh_state *s, int64_t timeout_ns)
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
        st = setup_locked(mesh, s, timeout_ns);
        pthread_mutex_unlock(&spmd__setup_lock);
        if (st == SPMD_OK) {
            s->ready = 1;
        } else {
            char reason[512];
            snprintf(reason, sizeof reason, "its set-up failed: %s", spmd_last_error());
            spmd__mesh_state_break(s, reason);
        }
    }
    pthread_mutex_unlock(&s->lock);
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
    if (!t) {
        int spans = 0;
        st = build_table(mesh, mask, rt->process_index, &t, &spans);
        if (st == SPMD_OK && spans && s->control)
            st = create_group_comms(s, mesh, t, call);
        if (st == SPMD_OK)
            atomic_store_explicit(&s->tables[mask], t, memory_order_release);
        else
            table_free(t, 1, 0);
    }
    pthread_mutex_unlock(&s->tables_lock);
    *out = st == SPMD_OK ? t : NULL;
    return st;
}

void spmd__mesh_state_discard_comms(spmd__mesh_state *s, int keep_scratch)
{
    for (unsigned m = 0; m < (1u << SPMD_MAX_MESH_AXES); m++) {
        spmd__group_table *t = atomic_exchange(&s->tables[m], NULL);
        table_free(t, 1, keep_scratch);
    }
}

void spmd__mesh_state_break(spmd__mesh_state *s, const char *reason)
{
    if (!s->broken)
        snprintf(s->broken_reason, sizeof s->broken_reason, "%s", reason);
    s->broken = 1;
    for (unsigned m = 0; m < (1u << SPMD_MAX_MESH_AXES); m++) {
        spmd__group_table *t = table_at(s, m);
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
    for (unsigned m = 0; m < (1u << SPMD_MAX_MESH_AXES); m++) {
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
    for (unsigned m = 0; m < (1u << SPMD_MAX_MESH_AXES); m++) {
        spmd__group_table *t = table_at(s, m);
        for (int id = 0; t && id < t->num_groups; id++)
            if (t->groups[id])
                atomic_store(&t->groups[id]->arrived, 0);
    }
}

int spmd__group_local_index(const spmd__group *g, int flat)
{
    for (int i = 0; i < g->num_local; i++)
        if (g->local_flat[i] == flat)
            return i;
    return -1;
}

spmd_status spmd__group_scratch(spmd__group *g, int which, size_t bytes)
{
    if (g->scratch_bytes[which] >= bytes)
        return SPMD_OK;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64))
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY,
                          "out of host memory for a %zu-byte collective staging buffer", bytes);
    free(g->scratch[which]);
    g->scratch[which] = p;
    g->scratch_bytes[which] = bytes;
    return SPMD_OK;
}
