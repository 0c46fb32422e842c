/* Resharding (jax.device_put of a committed array). Every process computes the same global
 * plan from the two shardings: each destination block is cut along the source blocks; a piece
 * that the receiving process already holds is copied (or its buffer shared), any other is sent
 * by the holder nearest to the receiver, all pieces of a process pair in one message. Each
 * process keeps only its own part of the plan, cached on the source sharding. */
#include <spmd/reshard.h>
#include <spmd/runtime.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/check.h"
#include "runtime/comm.h"
#include "runtime/runtime_impl.h"
#include "shard_map/array_impl.h"
#include "shard_map/copy.h"
#include "shard_map/groups.h"
#include "shard_map/mesh_impl.h"
#include "shard_map/sharding_impl.h"

/* Communicator tag of reshard communicators (meshes use 1..30001, processes 30002). */
enum { RESHARD_TAG = 30003, PLANS_PER_SHARDING = 8, MAX_BATCH = 1024 };
/* Messages above this are split: MPI counts are ints. */
#define MESSAGE_CHUNK ((size_t)1 << 30)

/* A box of the global array, as start and extent. */
typedef struct region {
    int64_t start[SPMD_MAX_RANK];
    int64_t extent[SPMD_MAX_RANK];
} region;

typedef struct copy_piece { /* from a source shard of this process */
    int src_shard;
    region r;
} copy_piece;

typedef struct unpack_piece { /* from a message: `offset` elements into the peer's part */
    int peer;                 /* index into plan->recvs */
    int64_t offset;
    region r;
} unpack_piece;

typedef struct dst_work { /* one destination shard of this process */
    int share_src;        /* source shard whose buffer it reuses, or -1 */
    int ncopies, nunpacks;
    copy_piece *copies;
    unpack_piece *unpacks;
} dst_work;

typedef struct peer_part { /* what this process sends to or receives from one process */
    int process;
    int64_t elements;
    int npieces;
    copy_piece *pieces; /* sends only: source shard and region, in message order */
    int direct_shard;   /* one piece contiguous in one shard: send from / receive into it */
    int64_t direct_offset;
} peer_part;

typedef struct reshard_plan {
    uint64_t dst_uid;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int num_processes;
    int *processes;  /* owning a source or destination device, ascending */
    int any_message; /* some process sends to another one */
    int ndst;
    dst_work *dst; /* [local destination shards] */
    int nsend, nrecv;
    peer_part *sends, *recvs;
} reshard_plan;

struct spmd__reshard_plans {
    int count;
    reshard_plan *plans[PLANS_PER_SHARDING]; /* most recent first */
};

/* Calls are collective and issued in the same order everywhere: one at a time. */
static pthread_mutex_t reshard_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- plan ---- */

static void plan_free(reshard_plan *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->ndst; i++) {
        free(p->dst[i].copies);
        free(p->dst[i].unpacks);
    }
    for (int i = 0; i < p->nsend; i++)
        free(p->sends[i].pieces);
    free(p->dst);
    free(p->sends);
    free(p->recvs);
    free(p->processes);
    free(p);
}

void spmd__reshard_plans_free(spmd__reshard_plans *plans)
{
    if (!plans)
        return;
    for (int i = 0; i < plans->count; i++)
        plan_free(plans->plans[i]);
    free(plans);
}

static int64_t region_elements(int ndim, const region *r)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= r->extent[d];
    return n;
}

/* Offset, in elements, of r's first element inside a dense shard at `box`, or -1 when r is
 * not one contiguous run of that shard. */
static int64_t contiguous_offset(int ndim, const region *r, const spmd_box *box)
{
    int d = 0;
    while (d < ndim && r->extent[d] == 1)
        d++;
    for (int e = d + 1; e < ndim; e++)
        if (r->extent[e] != box->stop[e] - box->start[e])
            return -1;
    int64_t offset = 0;
    for (int e = 0; e < ndim; e++)
        offset = offset * (box->stop[e] - box->start[e]) + (r->start[e] - box->start[e]);
    return offset;
}

static int grow(void **items, int count, int *capacity, size_t size)
{
    if (count < *capacity)
        return 1;
    int cap = *capacity ? 2 * *capacity : 4;
    void *p = realloc(*items, (size_t)cap * size);
    if (!p)
        return 0;
    *items = p;
    *capacity = cap;
    return 1;
}

/* Linear block index of mesh position `flat` (row-major over the array's dimensions). */
static int block_of(const spmd_sharding *sh, int ndim, int flat)
{
    int b = 0;
    for (int d = 0; d < ndim; d++)
        b = b * spmd__sharding_blocks(sh, d) + spmd__sharding_block(sh, flat, d);
    return b;
}

/* Processes holding each block: CSR (first[b]..first[b+1]) of ascending process indices. */
typedef struct holders {
    int *first;
    int *process;
} holders;

static int cmp_pair(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] > y[1]) - (x[1] < y[1]);
}

static spmd_status holders_build(const spmd_sharding *sh, int ndim, int nblocks, holders *h)
{
    const spmd_mesh *m = sh->mesh;
    int *pairs = malloc((size_t)m->size * 2 * sizeof(int));
    h->first = calloc((size_t)nblocks + 1, sizeof(int));
    h->process = malloc((size_t)m->size * sizeof(int));
    if (!pairs || !h->first || !h->process) {
        free(pairs);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    }
    for (int f = 0; f < m->size; f++) {
        pairs[2 * f] = block_of(sh, ndim, f);
        pairs[2 * f + 1] = m->process_of[f];
    }
    qsort(pairs, (size_t)m->size, 2 * sizeof(int), cmp_pair);
    int n = 0;
    for (int i = 0; i < m->size; i++) {
        if (i > 0 && pairs[2 * i] == pairs[2 * i - 2] && pairs[2 * i + 1] == pairs[2 * i - 1])
            continue;
        h->process[n++] = pairs[2 * i + 1];
        h->first[pairs[2 * i] + 1]++;
    }
    for (int b = 0; b < nblocks; b++)
        h->first[b + 1] += h->first[b];
    free(pairs);
    return SPMD_OK;
}

static int holds(const holders *h, int block, int process)
{
    for (int i = h->first[block]; i < h->first[block + 1]; i++)
        if (h->process[i] == process)
            return 1;
    return 0;
}

/* The holder nearest to `process` in process index (cyclically; ties to the lower index), so
 * that the receivers of a replicated block spread over its holders. */
static int nearest_holder(const holders *h, int block, int process, int num_processes)
{
    int best = -1, best_distance = 0;
    for (int i = h->first[block]; i < h->first[block + 1]; i++) {
        int p = h->process[i];
        int d = abs(p - process);
        if (num_processes - d < d)
            d = num_processes - d;
        if (best < 0 || d < best_distance) {
            best = p;
            best_distance = d;
        }
    }
    return best;
}

static void block_box(const int64_t *shard_shape, int ndim, int block, const int *nblocks,
                      spmd_box *box)
{
    box->ndim = ndim;
    for (int d = ndim - 1; d >= 0; d--) {
        int c = block % nblocks[d];
        block /= nblocks[d];
        box->start[d] = c * shard_shape[d];
        box->stop[d] = box->start[d] + shard_shape[d];
    }
}


/* What plan_build needs about one sharding. */
typedef struct side {
    const spmd_sharding *sh;
    int nblocks[SPMD_MAX_RANK];
    int64_t shard_shape[SPMD_MAX_RANK];
    int total_blocks;
    holders h;
    int nlocal;
    int *local_block;     /* [nlocal] block of each local shard (mesh flat order) */
    spmd_box *local_box;  /* [nlocal] */
    int *local_device;    /* [nlocal] */
} side;

static void side_free(side *s)
{
    free(s->h.first);
    free(s->h.process);
    free(s->local_block);
    free(s->local_box);
    free(s->local_device);
}

static spmd_status side_build(const spmd_sharding *sh, int ndim, const int64_t *shape, side *s)
{
    memset(s, 0, sizeof *s);
    s->sh = sh;
    s->total_blocks = 1;
    for (int d = 0; d < ndim; d++) {
        s->nblocks[d] = spmd__sharding_blocks(sh, d);
        s->shard_shape[d] = shape[d] / s->nblocks[d];
        s->total_blocks *= s->nblocks[d]; /* at most the mesh size */
    }
    const spmd_mesh *m = sh->mesh;
    s->nlocal = m->num_local;
    size_t n = (size_t)(m->num_local ? m->num_local : 1);
    s->local_block = malloc(n * sizeof *s->local_block);
    s->local_box = malloc(n * sizeof *s->local_box);
    s->local_device = malloc(n * sizeof *s->local_device);
    SPMD_REQUIRE(s->local_block && s->local_box && s->local_device, SPMD_ERR_OUT_OF_MEMORY,
                 "spmd_reshard: out of memory");
    for (int i = 0; i < m->num_local; i++) {
        s->local_device[i] = m->local_ids[i];
        s->local_block[i] = block_of(sh, ndim, m->position_of[m->local_ids[i]]);
        block_box(s->shard_shape, ndim, s->local_block[i], s->nblocks, &s->local_box[i]);
    }
    return holders_build(sh, ndim, s->total_blocks, &s->h);
}

typedef struct plan_builder {
    reshard_plan *p;
    const side *src, *dst;
    int me, num_processes;
    peer_part *send_of, *recv_of; /* [num_processes], compacted at the end */
    int *send_cap;                /* [num_processes] */
    int *recv_block;              /* [num_processes] destination block of the last piece */
    region *recv_region;          /* [num_processes] that piece */
    int *cap_copies, *cap_unpacks; /* [ndst] */
} plan_builder;

static int local_source_of(const side *src, int block, int device)
{
    int first = -1;
    for (int i = 0; i < src->nlocal; i++) {
        if (src->local_block[i] != block)
            continue;
        if (src->local_device[i] == device)
            return i;
        if (first < 0)
            first = i;
    }
    return first;
}

/* Piece r of source block bs lands on this process's shards of destination block bd. */
static spmd_status add_local(plan_builder *b, int bd, int bs, const region *r, int ndim)
{
    for (int j = 0; j < b->dst->nlocal; j++) {
        if (b->dst->local_block[j] != bd)
            continue;
        dst_work *w = &b->p->dst[j];
        int i = local_source_of(b->src, bs, b->dst->local_device[j]);
        int same_box = b->src->local_device[i] == b->dst->local_device[j];
        for (int d = 0; d < ndim && same_box; d++)
            same_box = b->src->local_box[i].start[d] == b->dst->local_box[j].start[d] &&
                       b->src->local_box[i].stop[d] == b->dst->local_box[j].stop[d];
        if (same_box) {
            w->share_src = i;
            continue;
        }
        if (!grow((void **)&w->copies, w->ncopies, &b->cap_copies[j], sizeof *w->copies))
            return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
        w->copies[w->ncopies++] = (copy_piece){i, *r};
    }
    return SPMD_OK;
}

static spmd_status add_receive(plan_builder *b, int bd, int from, const region *r, int ndim)
{
    peer_part *pp = &b->recv_of[from];
    for (int j = 0; j < b->dst->nlocal; j++) {
        if (b->dst->local_block[j] != bd)
            continue;
        dst_work *w = &b->p->dst[j];
        if (!grow((void **)&w->unpacks, w->nunpacks, &b->cap_unpacks[j], sizeof *w->unpacks))
            return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
        w->unpacks[w->nunpacks++] = (unpack_piece){from, pp->elements, *r};
    }
    pp->elements += region_elements(ndim, r);
    pp->npieces++;
    b->recv_block[from] = bd;
    b->recv_region[from] = *r;
    return SPMD_OK;
}

static spmd_status add_send(plan_builder *b, int bs, int to, const region *r, int ndim)
{
    peer_part *pp = &b->send_of[to];
    if (!grow((void **)&pp->pieces, pp->npieces, &b->send_cap[to], sizeof *pp->pieces))
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    pp->pieces[pp->npieces++] = (copy_piece){local_source_of(b->src, bs, -1), *r};
    pp->elements += region_elements(ndim, r);
    return SPMD_OK;
}

/* Destination block bd cut by source block bs: who copies, sends or receives the piece. */
static spmd_status plan_piece(plan_builder *b, int bd, int bs, const region *r, int ndim)
{
    const holders *needers = &b->dst->h;
    for (int k = needers->first[bd]; k < needers->first[bd + 1]; k++) {
        int q = needers->process[k];
        if (holds(&b->src->h, bs, q)) {
            if (q == b->me)
                SPMD_CHECK(add_local(b, bd, bs, r, ndim));
            continue;
        }
        b->p->any_message = 1;
        int from = nearest_holder(&b->src->h, bs, q, b->num_processes);
        if (from == b->me)
            SPMD_CHECK(add_send(b, bs, q, r, ndim));
        if (q == b->me)
            SPMD_CHECK(add_receive(b, bd, from, r, ndim));
    }
    return SPMD_OK;
}

static spmd_status plan_walk(plan_builder *b, int ndim)
{
    const side *src = b->src, *dst = b->dst;
    for (int bd = 0; bd < dst->total_blocks; bd++) {
        spmd_box box;
        block_box(dst->shard_shape, ndim, bd, dst->nblocks, &box);
        int lo[SPMD_MAX_RANK], hi[SPMD_MAX_RANK], at[SPMD_MAX_RANK];
        for (int d = 0; d < ndim; d++) {
            lo[d] = (int)(box.start[d] / src->shard_shape[d]);
            hi[d] = (int)((box.stop[d] - 1) / src->shard_shape[d]);
            at[d] = lo[d];
        }
        for (;;) { /* every source block that meets box, in row-major block order */
            int bs = 0;
            region r;
            for (int d = 0; d < ndim; d++) {
                bs = bs * src->nblocks[d] + at[d];
                int64_t s0 = at[d] * src->shard_shape[d], s1 = s0 + src->shard_shape[d];
                r.start[d] = s0 > box.start[d] ? s0 : box.start[d];
                r.extent[d] = (s1 < box.stop[d] ? s1 : box.stop[d]) - r.start[d];
            }
            SPMD_CHECK(plan_piece(b, bd, bs, &r, ndim));
            int d = ndim - 1;
            while (d >= 0 && at[d] == hi[d]) {
                at[d] = lo[d];
                d--;
            }
            if (d < 0)
                break;
            at[d]++;
        }
    }
    return SPMD_OK;
}

/* Keeps the processes with something to exchange, and marks single contiguous pieces. */
static spmd_status plan_compact(plan_builder *b, int ndim)
{
    reshard_plan *p = b->p;
    int P = b->num_processes, *index_of = malloc((size_t)P * sizeof(int));
    p->sends = calloc((size_t)P, sizeof *p->sends);
    p->recvs = calloc((size_t)P, sizeof *p->recvs);
    if (!index_of || !p->sends || !p->recvs) {
        free(index_of);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    }
    for (int q = 0; q < P; q++) {
        peer_part *s = &b->send_of[q];
        if (s->npieces > 0) {
            s->process = q;
            s->direct_shard = -1;
            if (s->npieces == 1) {
                const copy_piece *c = &s->pieces[0];
                s->direct_offset = contiguous_offset(ndim, &c->r, &b->src->local_box[c->src_shard]);
                if (s->direct_offset >= 0)
                    s->direct_shard = c->src_shard;
            }
            p->sends[p->nsend++] = *s;
            s->pieces = NULL; /* moved */
        }
        index_of[q] = -1;
        peer_part *r = &b->recv_of[q];
        if (r->npieces > 0) {
            r->process = q;
            r->direct_shard = -1;
            int target = -1, targets = 0;
            for (int j = 0; j < b->dst->nlocal; j++)
                if (b->dst->local_block[j] == b->recv_block[q]) {
                    target = j;
                    targets++;
                }
            if (r->npieces == 1 && targets == 1) {
                r->direct_offset =
                    contiguous_offset(ndim, &b->recv_region[q], &b->dst->local_box[target]);
                if (r->direct_offset >= 0)
                    r->direct_shard = target;
            }
            index_of[q] = p->nrecv;
            p->recvs[p->nrecv++] = *r;
        }
    }
    for (int j = 0; j < p->ndst; j++)
        for (int k = 0; k < p->dst[j].nunpacks; k++)
            p->dst[j].unpacks[k].peer = index_of[p->dst[j].unpacks[k].peer];
    free(index_of);
    return SPMD_OK;
}

static spmd_status plan_processes(reshard_plan *p, const spmd_sharding *a, const spmd_sharding *b,
                                  int num_processes)
{
    char *in = calloc((size_t)num_processes, 1);
    p->processes = malloc((size_t)num_processes * sizeof(int));
    if (!in || !p->processes) {
        free(in);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    }
    for (int f = 0; f < a->mesh->size; f++)
        in[a->mesh->process_of[f]] = 1;
    for (int f = 0; f < b->mesh->size; f++)
        in[b->mesh->process_of[f]] = 1;
    for (int q = 0; q < num_processes; q++)
        if (in[q])
            p->processes[p->num_processes++] = q;
    free(in);
    return SPMD_OK;
}

static spmd_status plan_build(const spmd_sharding *from, const spmd_sharding *to, int ndim,
                              const int64_t *shape, const spmd__runtime *rt, reshard_plan **out)
{
    int P = rt->process_count;
    reshard_plan *p = calloc(1, sizeof *p);
    side src, dst;
    memset(&src, 0, sizeof src);
    memset(&dst, 0, sizeof dst);
    plan_builder b = {.p = p, .src = &src, .dst = &dst, .me = rt->process_index,
                      .num_processes = P};
    spmd_status st = p ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    if (st == SPMD_OK) {
        p->dst_uid = to->uid;
        p->ndim = ndim;
        memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
        st = side_build(from, ndim, shape, &src);
    }
    if (st == SPMD_OK)
        st = side_build(to, ndim, shape, &dst);
    if (st == SPMD_OK) {
        size_t nd = (size_t)(dst.nlocal ? dst.nlocal : 1);
        p->ndst = dst.nlocal;
        p->dst = calloc(nd, sizeof *p->dst);
        b.cap_copies = calloc(nd, sizeof(int));
        b.cap_unpacks = calloc(nd, sizeof(int));
        b.send_of = calloc((size_t)P, sizeof *b.send_of);
        b.recv_of = calloc((size_t)P, sizeof *b.recv_of);
        b.send_cap = calloc((size_t)P, sizeof(int));
        b.recv_block = calloc((size_t)P, sizeof(int));
        b.recv_region = calloc((size_t)P, sizeof *b.recv_region);
        if (!p->dst || !b.cap_copies || !b.cap_unpacks || !b.send_of || !b.recv_of ||
            !b.send_cap || !b.recv_block || !b.recv_region)
            st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    }
    for (int j = 0; st == SPMD_OK && j < p->ndst; j++)
        p->dst[j].share_src = -1;
    if (st == SPMD_OK)
        st = plan_walk(&b, ndim);
    if (st == SPMD_OK)
        st = plan_compact(&b, ndim);
    if (st == SPMD_OK)
        st = plan_processes(p, from, to, P);
    for (int q = 0; b.send_of && q < P; q++)
        free(b.send_of[q].pieces);
    free(b.send_of);
    free(b.recv_of);
    free(b.send_cap);
    free(b.recv_block);
    free(b.recv_region);
    free(b.cap_copies);
    free(b.cap_unpacks);
    side_free(&src);
    side_free(&dst);
    if (st != SPMD_OK) {
        plan_free(p);
        return st;
    }
    *out = p;
    return SPMD_OK;
}

/* The plan from `from` to `to` for this shape, from the source sharding's cache or new. */
static spmd_status plan_get(spmd_sharding *from, const spmd_sharding *to, int ndim,
                            const int64_t *shape, const spmd__runtime *rt, reshard_plan **out)
{
    spmd__reshard_plans *c = from->reshard_plans;
    for (int i = 0; c && i < c->count; i++) {
        reshard_plan *p = c->plans[i];
        if (p->dst_uid != to->uid || p->ndim != ndim ||
            memcmp(p->shape, shape, (size_t)ndim * sizeof *shape) != 0)
            continue;
        memmove(&c->plans[1], &c->plans[0], (size_t)i * sizeof *c->plans);
        c->plans[0] = p;
        *out = p;
        return SPMD_OK;
    }
    if (!c) {
        c = calloc(1, sizeof *c);
        SPMD_REQUIRE(c != NULL, SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
        from->reshard_plans = c;
    }
    reshard_plan *p = NULL;
    SPMD_CHECK(plan_build(from, to, ndim, shape, rt, &p));
    if (c->count == PLANS_PER_SHARDING)
        plan_free(c->plans[--c->count]);
    memmove(&c->plans[1], &c->plans[0], (size_t)c->count * sizeof *c->plans);
    c->plans[0] = p;
    c->count++;
    *out = p;
    return SPMD_OK;
}

/* ---- communicators: one per set of processes, created by its first reshard ---- */

typedef struct comm_entry {
    struct comm_entry *next;
    unsigned session;
    int n;
    int *processes;
    spmd__comm *comm;
} comm_entry;

static comm_entry *comms; /* under reshard_lock */

static comm_entry *comm_find(const int *processes, int n, unsigned session)
{
    for (comm_entry **at = &comms; *at;) {
        comm_entry *e = *at;
        if (e->session != session) { /* made before the last spmd_finalize */
            *at = e->next;
            spmd__comm_abandon(e->comm);
            free(e->processes);
            free(e);
            continue;
        }
        if (e->n == n && memcmp(e->processes, processes, (size_t)n * sizeof(int)) == 0)
            return e;
        at = &e->next;
    }
    return NULL;
}

static void comm_forget(comm_entry *gone)
{
    for (comm_entry **at = &comms; *at; at = &(*at)->next)
        if (*at == gone) {
            *at = gone->next;
            spmd__comm_abandon(gone->comm); /* it may hold unfinished messages */
            free(gone->processes);
            free(gone);
            return;
        }
}

/*
 * Agrees with every process of `processes` on the call (fingerprint, description), within the
 * collective timeout, then returns their communicator. The first call over a set agrees over a
 * view (creating a communicator blocks until every member arrives, so it comes after).
 */
static spmd_status comm_agree(const spmd__runtime *rt, const int *processes, int n,
                              uint64_t fingerprint, const char *description, spmd__comm **out)
{
    spmd__wait w = {.deadline_ns = spmd__now_ns() + rt->collective_timeout_ns,
                    .what = "spmd_reshard"};
    comm_entry *e = comm_find(processes, n, rt->session);
    if (e) {
        spmd_status st = spmd__comm_agree(e->comm, fingerprint, description, &w);
        if (st != SPMD_OK)
            comm_forget(e);
        *out = st == SPMD_OK ? e->comm : NULL;
        return st;
    }
    spmd__comm *view = NULL;
    SPMD_CHECK(spmd__comm_view(processes, n, &view));
    pthread_mutex_lock(&spmd__setup_lock);
    spmd_status st = spmd__comm_agree(view, fingerprint, description, &w);
    pthread_mutex_unlock(&spmd__setup_lock);
    if (st != SPMD_OK) {
        spmd__comm_abandon(view);
        return st;
    }
    spmd__comm_destroy(view);
    e = calloc(1, sizeof *e);
    if (e)
        e->processes = malloc((size_t)n * sizeof(int));
    if (!e || !e->processes) {
        free(e);
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    }
    memcpy(e->processes, processes, (size_t)n * sizeof(int));
    e->n = n;
    e->session = rt->session;
    st = spmd__comm_create(processes, n, RESHARD_TAG, &e->comm);
    if (st != SPMD_OK) {
        free(e->processes);
        free(e);
        return st;
    }
    e->next = comms;
    comms = e;
    *out = e->comm;
    return SPMD_OK;
}

/* ---- execution ---- */

typedef struct job {
    spmd_array *x, *out;
    reshard_plan *plan;
    size_t elem;
    char **recv_at;    /* [plan->nrecv] where the part from each peer lands */
    char *recv_direct; /* [plan->nrecv] 1: received straight into the destination shard */
    spmd_status status;
} job;

static void *shard_data(const spmd_array *a, int i) { return a->shards[i].buffer->data; }

/* Copies region r from shard `from` of x (or from a dense buffer of r's shape when from < 0)
 * into shard j of out. */
static void copy_into(const job *jb, int j, const region *r, const void *src, int from)
{
    const spmd_array *x = jb->x, *out = jb->out;
    int ndim = out->ndim;
    int64_t dst_start[SPMD_MAX_RANK], src_start[SPMD_MAX_RANK], zero[SPMD_MAX_RANK] = {0};
    for (int d = 0; d < ndim; d++) {
        dst_start[d] = r->start[d] - out->shards[j].index.start[d];
        if (from >= 0)
            src_start[d] = r->start[d] - x->shards[from].index.start[d];
    }
    if (from >= 0)
        spmd__copy_region(jb->elem, ndim, r->extent, shard_data(out, j), out->shard_shape,
                          dst_start, shard_data(x, from), x->shard_shape, src_start);
    else
        spmd__copy_region(jb->elem, ndim, r->extent, shard_data(out, j), out->shard_shape,
                          dst_start, src, r->extent, zero);
}

/* On the destination device's worker: its buffer (shared or new), then its local pieces. */
static spmd_status fill_local(spmd_array *out, spmd__shard_slot *s, void *arg)
{
    const job *jb = arg;
    int j = (int)(s - out->shards);
    const dst_work *w = &jb->plan->dst[j];
    if (w->share_src >= 0) {
        s->buffer = spmd__buffer_retain(jb->x->shards[w->share_src].buffer);
        return SPMD_OK;
    }
    SPMD_CHECK(spmd__buffer_create(s->device_id, out->shard_bytes, &s->buffer));
    for (int k = 0; k < w->ncopies; k++)
        copy_into(jb, j, &w->copies[k].r, NULL, w->copies[k].src_shard);
    return SPMD_OK;
}

static spmd_status fill_received(spmd_array *out, spmd__shard_slot *s, void *arg)
{
    const job *jb = arg;
    int j = (int)(s - out->shards);
    const dst_work *w = &jb->plan->dst[j];
    for (int k = 0; k < w->nunpacks; k++) {
        const unpack_piece *u = &w->unpacks[k];
        if (!jb->recv_direct[u->peer])
            copy_into(jb, j, &u->r, jb->recv_at[u->peer] + (size_t)u->offset * jb->elem, -1);
    }
    return SPMD_OK;
}

static void pack(const job *jb, const peer_part *pp, char *dst)
{
    const spmd_array *x = jb->x;
    int ndim = x->ndim;
    int64_t zero[SPMD_MAX_RANK] = {0}, src_start[SPMD_MAX_RANK];
    for (int k = 0; k < pp->npieces; k++) {
        const copy_piece *c = &pp->pieces[k];
        for (int d = 0; d < ndim; d++)
            src_start[d] = c->r.start[d] - x->shards[c->src_shard].index.start[d];
        spmd__copy_region(jb->elem, ndim, c->r.extent, dst, c->r.extent, zero,
                          shard_data(x, c->src_shard), x->shard_shape, src_start);
        dst += (size_t)region_elements(ndim, &c->r) * jb->elem;
    }
}

/* One side (sends or receives) of the exchange with every peer: where each message lives. */
typedef struct side_msgs {
    size_t *bytes;    /* [num_processes] */
    char **data;      /* [num_processes] */
    int *only_job;    /* [num_processes] the one job with a part, -1 none, -2 several */
    char *staging;    /* one buffer for the messages that are not direct */
} side_msgs;

static const peer_part *find_part(const peer_part *parts, int n, int process, int *index)
{
    for (int i = 0; i < n; i++)
        if (parts[i].process == process) {
            *index = i;
            return &parts[i];
        }
    return NULL;
}

/* Sizes every message; a message that is one job's single contiguous piece needs no staging. */
static spmd_status layout_messages(job *jobs, int n, int P, int sending, side_msgs *m)
{
    m->bytes = calloc((size_t)P, sizeof *m->bytes);
    m->data = calloc((size_t)P, sizeof *m->data);
    m->only_job = malloc((size_t)P * sizeof *m->only_job);
    SPMD_REQUIRE(m->bytes && m->data && m->only_job, SPMD_ERR_OUT_OF_MEMORY,
                 "spmd_reshard: out of memory");
    for (int q = 0; q < P; q++)
        m->only_job[q] = -1;
    for (int k = 0; k < n; k++) {
        const reshard_plan *p = jobs[k].plan;
        int count = sending ? p->nsend : p->nrecv;
        const peer_part *parts = sending ? p->sends : p->recvs;
        for (int i = 0; i < count; i++) {
            int q = parts[i].process;
            m->bytes[q] += (size_t)parts[i].elements * jobs[k].elem;
            m->only_job[q] = m->only_job[q] == -1 ? k : -2;
        }
    }
    size_t staged = 0;
    for (int q = 0; q < P; q++) {
        int k = m->only_job[q], i = 0;
        if (k >= 0) {
            const reshard_plan *p = jobs[k].plan;
            const peer_part *pp =
                find_part(sending ? p->sends : p->recvs, sending ? p->nsend : p->nrecv, q, &i);
            if (pp->direct_shard >= 0) {
                const spmd_array *a = sending ? jobs[k].x : jobs[k].out;
                m->data[q] =
                    (char *)shard_data(a, pp->direct_shard) + (size_t)pp->direct_offset * jobs[k].elem;
                if (!sending)
                    jobs[k].recv_direct[i] = 1;
                continue;
            }
        }
        staged += m->bytes[q];
    }
    m->staging = malloc(staged ? staged : 1);
    SPMD_REQUIRE(m->staging != NULL, SPMD_ERR_OUT_OF_MEMORY,
                 "spmd_reshard: out of host memory for %zu bytes of messages", staged);
    size_t at = 0;
    for (int q = 0; q < P; q++) {
        if (m->data[q] || m->bytes[q] == 0)
            continue;
        m->data[q] = m->staging + at;
        size_t in_message = 0;
        for (int k = 0; k < n; k++) { /* each job's part, in job order */
            const reshard_plan *p = jobs[k].plan;
            int i = 0;
            const peer_part *pp =
                find_part(sending ? p->sends : p->recvs, sending ? p->nsend : p->nrecv, q, &i);
            if (!pp)
                continue;
            if (sending)
                pack(&jobs[k], pp, m->data[q] + in_message);
            else
                jobs[k].recv_at[i] = m->data[q] + in_message;
            in_message += (size_t)pp->elements * jobs[k].elem;
        }
        at += m->bytes[q];
    }
    return SPMD_OK;
}

static void side_msgs_free(side_msgs *m)
{
    free(m->bytes);
    free(m->data);
    free(m->only_job);
    free(m->staging);
}

static int rank_in(const int *processes, int n, int process)
{
    for (int r = 0; r < n; r++)
        if (processes[r] == process)
            return r;
    return -1;
}

static spmd_status append_messages(const side_msgs *m, int P, const int *processes, int n,
                                   spmd__message **out, int *count)
{
    int total = 0;
    for (int q = 0; q < P; q++)
        total += (int)((m->bytes[q] + MESSAGE_CHUNK - 1) / MESSAGE_CHUNK);
    *out = malloc((size_t)(total ? total : 1) * sizeof **out);
    SPMD_REQUIRE(*out != NULL, SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    *count = 0;
    for (int q = 0; q < P; q++)
        for (size_t at = 0, c = 0; at < m->bytes[q]; at += MESSAGE_CHUNK, c++) {
            size_t left = m->bytes[q] - at;
            (*out)[(*count)++] = (spmd__message){rank_in(processes, n, q), (int)c,
                                                 m->data[q] + at,
                                                 left < MESSAGE_CHUNK ? left : MESSAGE_CHUNK};
        }
    return SPMD_OK;
}

/* Sends and receives every message; the received ones stay in *rcv (the caller frees it once
 * they are unpacked). */
static spmd_status exchange(spmd__comm *comm, job *jobs, int n, const int *processes, int nproc,
                            int P, side_msgs *rcv_out, spmd_reshard_stats *stats)
{
    side_msgs snd, rcv;
    memset(&snd, 0, sizeof snd);
    memset(&rcv, 0, sizeof rcv);
    spmd__message *sends = NULL, *recvs = NULL;
    int nsend = 0, nrecv = 0;
    spmd_status st = layout_messages(jobs, n, P, 1, &snd);
    if (st == SPMD_OK)
        st = layout_messages(jobs, n, P, 0, &rcv);
    if (st == SPMD_OK)
        st = append_messages(&snd, P, processes, nproc, &sends, &nsend);
    if (st == SPMD_OK)
        st = append_messages(&rcv, P, processes, nproc, &recvs, &nrecv);
    if (st == SPMD_OK && (nsend || nrecv))
        st = spmd__comm_exchange(comm, nsend, sends, nrecv, recvs);
    if (st == SPMD_OK) {
        for (int q = 0; q < P; q++) {
            stats->bytes_sent += snd.bytes[q];
            stats->bytes_received += rcv.bytes[q];
        }
        stats->messages_sent = nsend;
        stats->messages_received = nrecv;
    }
    free(sends);
    free(recvs);
    side_msgs_free(&snd);
    *rcv_out = rcv;
    return st;
}

/* Fingerprint and a short description of the batch, for the agreement between processes. */
static uint64_t describe(const job *jobs, int n, char *text, size_t size)
{
    uint64_t h = SPMD__FNV1A_SEED;
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, size);
    spmd__strbuf_printf(&sb, "spmd_reshard of %d array%s:", n, n == 1 ? "" : "s");
    for (int k = 0; k < n; k++) {
        const spmd_array *x = jobs[k].x, *out = jobs[k].out;
        char from[SPMD__SPEC_TEXT], to[SPMD__SPEC_TEXT];
        spmd__ignore(spmd_spec_format(x->sharding->spec, from, sizeof from));
        spmd__ignore(spmd_spec_format(out->sharding->spec, to, sizeof to));
        spmd__strbuf_printf(&sb, " %s", spmd_dtype_name(x->dtype));
        spmd__strbuf_shape(&sb, x->shape, x->ndim);
        spmd__strbuf_printf(&sb, " %s->%s", from, to);
        h = spmd__fnv1a(h, &x->dtype, sizeof x->dtype);
        h = spmd__fnv1a(h, x->shape, (size_t)x->ndim * sizeof *x->shape);
        h = spmd__fnv1a(h, from, strlen(from));
        h = spmd__fnv1a(h, to, strlen(to));
        const spmd_mesh *meshes[2] = {x->sharding->mesh, out->sharding->mesh};
        for (int m = 0; m < 2; m++) {
            h = spmd__fnv1a(h, meshes[m]->shape, (size_t)meshes[m]->ndim * sizeof(int));
            h = spmd__fnv1a(h, meshes[m]->names, sizeof meshes[m]->names);
            h = spmd__fnv1a(h, meshes[m]->device_ids, (size_t)meshes[m]->size * sizeof(int));
        }
    }
    return h;
}

static spmd_status check_one(const spmd_array *x, const spmd_sharding *to, const char *fn,
                             int k, int batch)
{
    char what[64];
    snprintf(what, sizeof what, batch ? "xs[%d]" : "x", k);
    SPMD_CHECK(spmd__array_check(x, fn, what));
    snprintf(what, sizeof what, batch ? "new_shardings[%d]" : "new_sharding", k);
    SPMD_CHECK(spmd__sharding_check(to, fn, what));
    if (!spmd__runtime_get_session(fn, to->mesh->session))
        return SPMD_ERR_INVALID_ARGUMENT;
    snprintf(what, sizeof what, batch ? "xs[%d]" : "x", k);
    return spmd__sharding_check_shape(to, x->ndim, x->shape, fn, what);
}

static spmd_status reshard_locked(const char *fn, int n, spmd_array *const *xs,
                                  const spmd_sharding *const *to, const spmd_reshard_options *o,
                                  job *jobs, spmd_reshard_stats *stats)
{
    const spmd__runtime *rt = spmd__runtime_get(fn);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    int P = rt->process_count;
    char *member = calloc((size_t)P, 1);
    int *processes = malloc((size_t)P * sizeof(int)), nproc = 0, any_message = 0;
    spmd_status st = member && processes ? SPMD_OK
                                         : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    for (int k = 0; st == SPMD_OK && k < n; k++) {
        jobs[k].x = xs[k];
        jobs[k].elem = spmd_dtype_size(xs[k]->dtype);
        st = plan_get(xs[k]->sharding, to[k], xs[k]->ndim, xs[k]->shape, rt, &jobs[k].plan);
        if (st == SPMD_OK)
            st = spmd__array_create_empty(to[k], xs[k]->ndim, xs[k]->shape, xs[k]->dtype, fn,
                                          &jobs[k].out);
        if (st == SPMD_OK) {
            int nr = jobs[k].plan->nrecv ? jobs[k].plan->nrecv : 1;
            jobs[k].recv_at = calloc((size_t)nr, sizeof *jobs[k].recv_at);
            jobs[k].recv_direct = calloc((size_t)nr, 1);
            if (!jobs[k].recv_at || !jobs[k].recv_direct)
                st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        }
        if (st != SPMD_OK)
            break;
        any_message |= jobs[k].plan->any_message;
        for (int i = 0; i < jobs[k].plan->num_processes; i++)
            member[jobs[k].plan->processes[i]] = 1;
    }
    for (int q = 0; st == SPMD_OK && q < P; q++)
        if (member[q])
            processes[nproc++] = q;
    spmd__comm *comm = NULL;
    side_msgs received;
    memset(&received, 0, sizeof received);
    if (st == SPMD_OK && any_message && member[rt->process_index]) {
        char text[120];
        uint64_t fingerprint = describe(jobs, n, text, sizeof text);
        st = comm_agree(rt, processes, nproc, fingerprint, text, &comm);
    }
    for (int k = 0; st == SPMD_OK && k < n; k++) {
        st = spmd__array_for_shards(jobs[k].out, NULL, jobs[k].out->num_shards, fill_local,
                                    &jobs[k]);
        for (int j = 0; j < jobs[k].out->num_shards; j++)
            if (jobs[k].plan->dst[j].share_src >= 0)
                stats->bytes_shared += jobs[k].out->shard_bytes;
            else
                for (int c = 0; c < jobs[k].plan->dst[j].ncopies; c++)
                    stats->bytes_copied += (uint64_t)region_elements(
                                               jobs[k].out->ndim, &jobs[k].plan->dst[j].copies[c].r) *
                                           jobs[k].elem;
    }
    if (st == SPMD_OK && comm) {
        st = exchange(comm, jobs, n, processes, nproc, P, &received, stats);
        if (st != SPMD_OK) { /* MPI failed after the agreement: do not reuse the communicator */
            comm_entry *e = comm_find(processes, nproc, rt->session);
            if (e)
                comm_forget(e);
        }
    }
    if (st == SPMD_OK && o->donate)
        for (int k = 0; k < n; k++)
            spmd__array_mark_deleted(xs[k]); /* its sent data is out; shared buffers live on */
    for (int k = 0; st == SPMD_OK && comm && k < n; k++)
        st = spmd__array_for_shards(jobs[k].out, NULL, jobs[k].out->num_shards, fill_received,
                                    &jobs[k]);
    side_msgs_free(&received);
    free(member);
    free(processes);
    return st;
}

static spmd_status reshard_batch(const char *fn, int n, spmd_array *const *xs,
                                 const spmd_sharding *const *to, const spmd_reshard_options *options,
                                 spmd_array **outs)
{
    spmd_reshard_options o = SPMD_RESHARD_OPTIONS_INIT;
    if (options) {
        SPMD_REQUIRE(options->version == SPMD_RESHARD_OPTIONS_VERSION, SPMD_ERR_INVALID_ARGUMENT,
                     "%s: options.version is %u; initialize options with "
                     "SPMD_RESHARD_OPTIONS_INIT",
                     fn, options->version);
        o = *options;
    }
    int batch = strcmp(fn, "spmd_reshard") != 0;
    for (int k = 0; k < n; k++) {
        SPMD_CHECK(check_one(xs[k], to[k], fn, k, batch));
        for (int i = 0; o.donate && i < k; i++)
            SPMD_REQUIRE(xs[i] != xs[k], SPMD_ERR_INVALID_ARGUMENT,
                         "%s: xs[%d] and xs[%d] are the same array, which cannot be donated twice; "
                         "pass it once or leave options.donate at 0",
                         fn, i, k);
    }
    const spmd__runtime *rt = spmd__runtime_get(fn);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    for (int k = 0; k < n; k++)
        SPMD_REQUIRE(rt->platform == SPMD_PLATFORM_CPU, SPMD_ERR_UNSUPPORTED,
                     "%s: resharding arrays on %s devices is not supported yet; set "
                     "SPMD_PLATFORM=cpu",
                     fn, spmd_platform_name(rt->platform));
    job *jobs = calloc((size_t)(n > 0 ? n : 1), sizeof *jobs);
    SPMD_REQUIRE(jobs != NULL, SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    spmd_reshard_stats stats;
    memset(&stats, 0, sizeof stats);
    pthread_mutex_lock(&reshard_lock);
    spmd_status st = reshard_locked(fn, n, xs, to, &o, jobs, &stats);
    pthread_mutex_unlock(&reshard_lock);
    for (int k = 0; k < n; k++) {
        if (st == SPMD_OK)
            outs[k] = jobs[k].out;
        else
            spmd_array_destroy(jobs[k].out);
        free(jobs[k].recv_at);
        free(jobs[k].recv_direct);
    }
    free(jobs);
    if (st == SPMD_OK && o.stats)
        *o.stats = stats;
    return st;
}

spmd_status spmd_reshard(spmd_array *x, const spmd_sharding *new_sharding,
                         const spmd_reshard_options *options, spmd_array **out)
{
    SPMD_REQUIRE_NOT_NULL(out, "spmd_reshard");
    *out = NULL;
    SPMD_REQUIRE_NOT_NULL(x, "spmd_reshard");
    SPMD_REQUIRE_NOT_NULL(new_sharding, "spmd_reshard");
    return reshard_batch("spmd_reshard", 1, &x, &new_sharding, options, out);
}

spmd_status spmd_reshard_batch(int n, spmd_array *const *xs,
                               const spmd_sharding *const *new_shardings,
                               const spmd_reshard_options *options, spmd_array **outs)
{
    const char *fn = "spmd_reshard_batch";
    SPMD_REQUIRE(n >= 0 && n <= MAX_BATCH, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: n=%d must be in 0..%d", fn, n, MAX_BATCH);
    if (n == 0)
        return SPMD_OK;
    SPMD_REQUIRE_NOT_NULL(outs, fn);
    for (int k = 0; k < n; k++)
        outs[k] = NULL;
    SPMD_REQUIRE_NOT_NULL(xs, fn);
    SPMD_REQUIRE_NOT_NULL(new_shardings, fn);
    for (int k = 0; k < n; k++)
        SPMD_REQUIRE(xs[k] && new_shardings[k], SPMD_ERR_INVALID_ARGUMENT,
                     "%s: %s[%d] is NULL", fn, xs[k] ? "new_shardings" : "xs", k);
    return reshard_batch(fn, n, xs, new_shardings, options, outs);
}

static spmd_status copy_shard(spmd_array *out, spmd__shard_slot *s, void *arg)
{
    const spmd_array *x = arg;
    SPMD_CHECK(spmd__buffer_create(s->device_id, out->shard_bytes, &s->buffer));
    memcpy(s->buffer->data, shard_data(x, (int)(s - out->shards)), out->shard_bytes);
    return SPMD_OK;
}

spmd_status spmd_array_copy(const spmd_array *x, spmd_array **out)
{
    const char *fn = "spmd_array_copy";
    SPMD_REQUIRE_NOT_NULL(out, fn);
    *out = NULL;
    SPMD_CHECK(spmd__array_check(x, fn, "x"));
    const spmd__runtime *rt = spmd__runtime_get(fn);
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    SPMD_REQUIRE(rt->platform == SPMD_PLATFORM_CPU, SPMD_ERR_UNSUPPORTED,
                 "%s: copying arrays on %s devices is not supported yet; set SPMD_PLATFORM=cpu",
                 fn, spmd_platform_name(rt->platform));
    spmd_array *a = NULL;
    SPMD_CHECK(spmd__array_create_empty(x->sharding, x->ndim, x->shape, x->dtype, fn, &a));
    spmd_status st = spmd__array_for_shards(a, NULL, a->num_shards, copy_shard, (void *)x);
    if (st != SPMD_OK) {
        spmd_array_destroy(a);
        return st;
    }
    *out = a;
    return SPMD_OK;
}
