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
#include "runtime/worker.h"
#include "shard_map/array_impl.h"
#include "shard_map/copy.h"
#include "shard_map/groups.h"
#include "shard_map/mesh_impl.h"
#include "shard_map/sharding_impl.h"

/* Communicator tag of reshard communicators (meshes use 1..30001, processes 30002). */
enum { RESHARD_TAG = 30003, PLANS_PER_SHARDING = 8, MAX_BATCH = 1024 };

/* A box of the global array, as start and extent. */
typedef struct region {
    int64_t start[SPMD_MAX_RANK];
    int64_t extent[SPMD_MAX_RANK];
} region;

typedef struct piece { /* a region of one shard of this process */
    int shard;
    region r;
} piece;

typedef struct dst_work { /* one destination shard of this process */
    int share_src;        /* source shard whose memory it reuses (a view), or -1 */
    int64_t share_offset; /* elements into that shard */
    int ncopies, nreplicas;
    piece *copies;   /* from source shards, before the exchange */
    piece *replicas; /* from another destination shard (which received it), after */
} dst_work;

typedef struct peer_part { /* what this process sends to or receives from one process */
    int process;
    int64_t elements;
    int npieces;
    piece *pieces; /* source shards (sends) or destination shards (receives), message order */
} peer_part;

typedef struct reshard_plan {
    uint64_t dst_uid;
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int num_processes;
    int *processes; /* owning a source or destination device, ascending */
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
        free(p->dst[i].replicas);
    }
    for (int i = 0; i < p->nsend; i++)
        free(p->sends[i].pieces);
    for (int i = 0; i < p->nrecv; i++)
        free(p->recvs[i].pieces);
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
    int *local_block;    /* [nlocal] block of each local shard (mesh flat order) */
    spmd_box *local_box; /* [nlocal] */
    int *local_device;   /* [nlocal] */
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
    peer_part *send_of, *recv_of;   /* [num_processes], compacted at the end */
    int *send_cap, *recv_cap;       /* [num_processes] */
    int *cap_copies, *cap_replicas; /* [ndst] */
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
        /* the whole destination block, one run of a source shard on the same device: a view */
        int whole = 1;
        for (int d = 0; d < ndim; d++)
            whole &= r->extent[d] == b->dst->local_box[j].stop[d] - b->dst->local_box[j].start[d];
        int64_t offset = contiguous_offset(ndim, r, &b->src->local_box[i]);
        if (whole && offset >= 0 && b->src->local_device[i] == b->dst->local_device[j]) {
            w->share_src = i;
            w->share_offset = offset;
            continue;
        }
        if (!grow((void **)&w->copies, w->ncopies, &b->cap_copies[j], sizeof *w->copies))
            return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
        w->copies[w->ncopies++] = (piece){i, *r};
    }
    return SPMD_OK;
}

/* The first of this process's shards of block bd receives the piece; the others copy it. */
static spmd_status add_receive(plan_builder *b, int bd, int from, const region *r, int ndim)
{
    peer_part *pp = &b->recv_of[from];
    int first = -1;
    for (int j = 0; j < b->dst->nlocal; j++) {
        if (b->dst->local_block[j] != bd)
            continue;
        if (first < 0) {
            first = j;
            continue;
        }
        dst_work *w = &b->p->dst[j];
        if (!grow((void **)&w->replicas, w->nreplicas, &b->cap_replicas[j], sizeof *w->replicas))
            return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
        w->replicas[w->nreplicas++] = (piece){first, *r};
    }
    if (!grow((void **)&pp->pieces, pp->npieces, &b->recv_cap[from], sizeof *pp->pieces))
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    pp->pieces[pp->npieces++] = (piece){first, *r};
    pp->elements += region_elements(ndim, r);
    return SPMD_OK;
}

static spmd_status add_send(plan_builder *b, int bs, int to, const region *r, int ndim)
{
    peer_part *pp = &b->send_of[to];
    if (!grow((void **)&pp->pieces, pp->npieces, &b->send_cap[to], sizeof *pp->pieces))
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    pp->pieces[pp->npieces++] = (piece){local_source_of(b->src, bs, -1), *r};
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

/* Keeps the processes with something to exchange. */
static spmd_status plan_compact(plan_builder *b)
{
    reshard_plan *p = b->p;
    int P = b->num_processes;
    p->sends = calloc((size_t)P, sizeof *p->sends);
    p->recvs = calloc((size_t)P, sizeof *p->recvs);
    SPMD_REQUIRE(p->sends && p->recvs, SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    for (int q = 0; q < P; q++) {
        peer_part *sides[2] = {&b->send_of[q], &b->recv_of[q]};
        for (int k = 0; k < 2; k++) {
            if (sides[k]->npieces == 0)
                continue;
            sides[k]->process = q;
            if (k == 0)
                p->sends[p->nsend++] = *sides[k];
            else
                p->recvs[p->nrecv++] = *sides[k];
            sides[k]->pieces = NULL; /* moved */
        }
    }
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
    plan_builder b = {
        .p = p, .src = &src, .dst = &dst, .me = rt->process_index, .num_processes = P};
    spmd_status st =
        p ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
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
        b.cap_replicas = calloc(nd, sizeof(int));
        b.send_of = calloc((size_t)P, sizeof *b.send_of);
        b.recv_of = calloc((size_t)P, sizeof *b.recv_of);
        b.send_cap = calloc((size_t)P, sizeof(int));
        b.recv_cap = calloc((size_t)P, sizeof(int));
        if (!p->dst || !b.cap_copies || !b.cap_replicas || !b.send_of || !b.recv_of ||
            !b.send_cap || !b.recv_cap)
            st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    }
    for (int j = 0; st == SPMD_OK && j < p->ndst; j++)
        p->dst[j].share_src = -1;
    if (st == SPMD_OK)
        st = plan_walk(&b, ndim);
    if (st == SPMD_OK)
        st = plan_compact(&b);
    if (st == SPMD_OK)
        st = plan_processes(p, from, to, P);
    for (int q = 0; b.send_of && b.recv_of && q < P; q++) {
        free(b.send_of[q].pieces);
        free(b.recv_of[q].pieces);
    }
    free(b.send_of);
    free(b.recv_of);
    free(b.send_cap);
    free(b.recv_cap);
    free(b.cap_copies);
    free(b.cap_replicas);
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

static spmd__set_comm *comms; /* under reshard_lock */

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
    spmd__set_comm *e = spmd__set_comm_find(&comms, processes, n, rt->session);
    if (e) {
        spmd_status st = spmd__comm_agree(e->comm, fingerprint, description, &w);
        if (st != SPMD_OK)
            spmd__set_comm_forget(&comms, e);
        *out = st == SPMD_OK ? e->comm : NULL;
        return st;
    }
    spmd_status st = spmd__set_comm_create(&comms, processes, n, rt->session, RESHARD_TAG,
                                           fingerprint, description, &w, &e);
    *out = st == SPMD_OK ? e->comm : NULL;
    return st;
}

/* ---- execution ---- */

typedef struct job {
    spmd_array *x, *out;
    reshard_plan *plan;
    size_t elem;
} job;

static void *shard_data(const spmd_array *a, int i) { return a->shards[i].buffer->data; }

/* Copies region r of shard i of `from` into shard j of `to`. */
static void copy_region(const job *jb, const spmd_array *from, int i, int j, const region *r)
{
    const spmd_array *to = jb->out;
    int64_t dst_start[SPMD_MAX_RANK], src_start[SPMD_MAX_RANK];
    for (int d = 0; d < to->ndim; d++) {
        dst_start[d] = r->start[d] - to->shards[j].index.start[d];
        src_start[d] = r->start[d] - from->shards[i].index.start[d];
    }
    spmd__copy_region(jb->elem, to->ndim, r->extent, shard_data(to, j), to->shard_shape, dst_start,
                      shard_data(from, i), from->shard_shape, src_start);
}

/* The jobs of one call, as the device workers see them. */
typedef struct batch_work {
    job *jobs;
    int n;
} batch_work;

/* Every destination buffer, a view of a source shard or new. On the calling thread: a new
 * buffer's pages are first touched by the device that fills it. */
static spmd_status make_buffers(const batch_work *bw)
{
    for (int k = 0; k < bw->n; k++) {
        const job *jb = &bw->jobs[k];
        for (int j = 0; j < jb->out->num_shards; j++) {
            spmd__shard_slot *s = &jb->out->shards[j];
            const dst_work *w = &jb->plan->dst[j];
            spmd__buffer *src = w->share_src >= 0 ? jb->x->shards[w->share_src].buffer : NULL;
            if (src && w->share_offset == 0 && src->nbytes == jb->out->shard_bytes)
                s->buffer = spmd__buffer_retain(src);
            else if (src)
                SPMD_CHECK(spmd__buffer_view(src, (size_t)w->share_offset * jb->elem,
                                             jb->out->shard_bytes, &s->buffer));
            else
                SPMD_CHECK(spmd__buffer_create(s->device_id, jb->out->shard_bytes, &s->buffer));
        }
    }
    return SPMD_OK;
}

/* The pieces each destination shard takes from this process's source shards. */
static spmd_status device_copies(int ordinal, void *arg)
{
    const batch_work *bw = arg;
    for (int k = 0; k < bw->n; k++) {
        const job *jb = &bw->jobs[k];
        for (int j = 0; j < jb->out->num_shards; j++) {
            const dst_work *w = &jb->plan->dst[j];
            if (jb->out->shards[j].ordinal != ordinal)
                continue;
            for (int c = 0; c < w->ncopies; c++)
                copy_region(jb, jb->x, w->copies[c].shard, j, &w->copies[c].r);
        }
    }
    return SPMD_OK;
}

/* After the exchange: what another shard of this process received for this one too. */
static spmd_status device_replicas(int ordinal, void *arg);

/* The local ordinals of the devices with copies (or, with replicas set, replica fills) to do:
 * waking idle workers costs more than a small copy. */
static int devices_with_work(const batch_work *bw, int replicas, int num_local, int *ordinals)
{
    int count = 0;
    for (int d = 0; d < num_local; d++) {
        int busy = 0;
        for (int k = 0; k < bw->n && !busy; k++) {
            const job *jb = &bw->jobs[k];
            for (int j = 0; j < jb->out->num_shards && !busy; j++)
                busy = jb->out->shards[j].ordinal == d &&
                       (replicas ? jb->plan->dst[j].nreplicas : jb->plan->dst[j].ncopies) > 0;
        }
        if (busy)
            ordinals[count++] = d;
    }
    return count;
}

static spmd_status device_replicas(int ordinal, void *arg)
{
    const batch_work *bw = arg;
    for (int k = 0; k < bw->n; k++) {
        const job *jb = &bw->jobs[k];
        for (int j = 0; j < jb->out->num_shards; j++) {
            const dst_work *w = &jb->plan->dst[j];
            if (jb->out->shards[j].ordinal != ordinal)
                continue;
            for (int c = 0; c < w->nreplicas; c++)
                copy_region(jb, jb->out, w->replicas[c].shard, j, &w->replicas[c].r);
        }
    }
    return SPMD_OK;
}

/* One message per peer process and direction, made of every job's pieces in job order. */
static spmd_status build_messages(const job *jobs, int n, int sending, const int *processes,
                                  int nproc, spmd__piece_message **out, int *count,
                                  spmd__piece **pieces_out, uint64_t *bytes)
{
    int total = 0;
    for (int k = 0; k < n; k++) {
        const reshard_plan *p = jobs[k].plan;
        for (int i = 0; i < (sending ? p->nsend : p->nrecv); i++)
            total += (sending ? p->sends : p->recvs)[i].npieces;
    }
    spmd__piece_message *m = calloc((size_t)(nproc ? nproc : 1), sizeof *m);
    spmd__piece *pieces = malloc((size_t)(total ? total : 1) * sizeof *pieces);
    *out = m;
    *pieces_out = pieces;
    SPMD_REQUIRE(m && pieces, SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    *count = 0;
    int used = 0;
    for (int r = 0; r < nproc; r++) {
        spmd__piece_message *msg = &m[*count];
        msg->peer = r;
        msg->pieces = &pieces[used];
        for (int k = 0; k < n; k++) {
            const reshard_plan *p = jobs[k].plan;
            const spmd_array *a = sending ? jobs[k].x : jobs[k].out;
            int parts = sending ? p->nsend : p->nrecv;
            const peer_part *pp = NULL;
            for (int i = 0; i < parts && !pp; i++)
                if ((sending ? p->sends : p->recvs)[i].process == processes[r])
                    pp = &(sending ? p->sends : p->recvs)[i];
            if (!pp)
                continue;
            *bytes += (uint64_t)pp->elements * jobs[k].elem;
            for (int i = 0; i < pp->npieces; i++) {
                const piece *c = &pp->pieces[i];
                spmd__piece *q = &pieces[used++];
                q->base = shard_data(a, c->shard);
                q->elem = jobs[k].elem;
                q->ndim = a->ndim;
                q->shape = a->shard_shape;
                for (int d = 0; d < a->ndim; d++) {
                    q->start[d] = c->r.start[d] - a->shards[c->shard].index.start[d];
                    q->extent[d] = c->r.extent[d];
                }
                msg->npieces++;
            }
        }
        *count += msg->npieces > 0;
    }
    return SPMD_OK;
}

static spmd_status exchange(spmd__comm *comm, const job *jobs, int n, const int *processes,
                            int nproc, int (*work)(void *), void *work_arg,
                            spmd_reshard_stats *stats)
{
    spmd__piece_message *sends = NULL, *recvs = NULL;
    spmd__piece *send_pieces = NULL, *recv_pieces = NULL;
    int nsend = 0, nrecv = 0;
    spmd_status st = build_messages(jobs, n, 1, processes, nproc, &sends, &nsend, &send_pieces,
                                    &stats->bytes_sent);
    if (st == SPMD_OK)
        st = build_messages(jobs, n, 0, processes, nproc, &recvs, &nrecv, &recv_pieces,
                            &stats->bytes_received);
    if (st == SPMD_OK && (nsend || nrecv))
        st = spmd__comm_exchange_pieces(comm, nsend, sends, nrecv, recvs, work, work_arg);
    else
        while (st == SPMD_OK && work && work(work_arg))
            ;
    stats->messages_sent = nsend;
    stats->messages_received = nrecv;
    free(sends);
    free(recvs);
    free(send_pieces);
    free(recv_pieces);
    return st;
}

typedef struct exchange_args {
    spmd__comm *comm;
    const job *jobs;
    int n;
    const int *processes;
    int nproc;
    spmd_reshard_stats *stats;
} exchange_args;

static spmd_status exchange_beside(void *arg)
{
    const exchange_args *a = arg;
    return exchange(a->comm, a->jobs, a->n, a->processes, a->nproc, NULL, NULL, a->stats);
}

/* Where the calling thread is in the local copies when it does them itself, between steps of
 * the exchange. */
typedef struct copy_cursor {
    const batch_work *bw;
    int k, j, c;  /* job, destination shard, copy */
    int64_t done; /* rows of that copy's first dimension */
} copy_cursor;

enum { COPY_STEP_BYTES = 256 << 10 };

/* Copies the next slab (about COPY_STEP_BYTES) of the local pieces; 0 once none is left. */
static int copy_step(void *arg)
{
    copy_cursor *cur = arg;
    const batch_work *bw = cur->bw;
    for (; cur->k < bw->n; cur->k++, cur->j = 0) {
        const job *jb = &bw->jobs[cur->k];
        for (; cur->j < jb->out->num_shards; cur->j++, cur->c = 0) {
            const dst_work *w = &jb->plan->dst[cur->j];
            if (cur->c >= w->ncopies)
                continue;
            region r = w->copies[cur->c].r;
            int ndim = jb->out->ndim;
            int64_t rows = ndim ? r.extent[0] : 1, row_bytes = (int64_t)jb->elem;
            for (int d = 1; d < ndim; d++)
                row_bytes *= r.extent[d];
            int64_t step = COPY_STEP_BYTES / row_bytes > 1 ? COPY_STEP_BYTES / row_bytes : 1;
            if (step > rows - cur->done)
                step = rows - cur->done;
            if (ndim) {
                r.start[0] += cur->done;
                r.extent[0] = step;
            }
            copy_region(jb, jb->x, w->copies[cur->c].shard, cur->j, &r);
            cur->done += step;
            if (cur->done == rows) {
                cur->done = 0;
                cur->c++;
            }
            return 1;
        }
    }
    return 0;
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

static spmd_status check_one(const spmd_array *x, const spmd_sharding *to, const char *fn, int k,
                             int batch)
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

/* Elements copied between buffers of this process into one destination shard. */
static uint64_t copied_elements(const dst_work *w, int ndim)
{
    uint64_t n = 0;
    for (int c = 0; c < w->ncopies; c++)
        n += (uint64_t)region_elements(ndim, &w->copies[c].r);
    for (int c = 0; c < w->nreplicas; c++)
        n += (uint64_t)region_elements(ndim, &w->replicas[c].r);
    return n;
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
    int *processes = malloc((size_t)P * sizeof(int)), nproc = 0;
    spmd_status st =
        member && processes ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    for (int k = 0; st == SPMD_OK && k < n; k++) {
        jobs[k].x = xs[k];
        jobs[k].elem = spmd_dtype_size(xs[k]->dtype);
        st = plan_get(xs[k]->sharding, to[k], xs[k]->ndim, xs[k]->shape, rt, &jobs[k].plan);
        if (st == SPMD_OK)
            st = spmd__array_create_empty(to[k], xs[k]->ndim, xs[k]->shape, xs[k]->dtype, fn,
                                          &jobs[k].out);
        if (st != SPMD_OK)
            break;
        for (int i = 0; i < jobs[k].plan->num_processes; i++)
            member[jobs[k].plan->processes[i]] = 1;
    }
    for (int q = 0; st == SPMD_OK && q < P; q++)
        if (member[q])
            processes[nproc++] = q;
    /* Buffers before the agreement (messages land in them): a process that cannot allocate
     * still takes part in it, so that the others fail at once instead of waiting for it. */
    batch_work bw = {jobs, n};
    int prepared = st == SPMD_OK, *ordinals = malloc((size_t)rt->num_local * sizeof(int));
    if (st == SPMD_OK)
        st = ordinals ? make_buffers(&bw)
                      : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    spmd__comm *comm = NULL;
    /* Every process of the operation agrees, even one whose own part moves nothing: otherwise
     * processes in different reshards could exchange data meant for another. */
    if (prepared && nproc > 1 && member[rt->process_index]) {
        char text[120];
        uint64_t fingerprint = describe(jobs, n, text, sizeof text);
        if (st != SPMD_OK) {
            char reason[1024];
            snprintf(reason, sizeof reason, "%s", spmd_last_error());
            snprintf(text, sizeof text, "spmd_reshard, which failed here: %.80s", reason);
            spmd__ignore(comm_agree(rt, processes, nproc, ~fingerprint, text, &comm));
            comm = NULL;
            st = SPMD_ERROR(st, "%s", reason);
        } else {
            st = comm_agree(rt, processes, nproc, fingerprint, text, &comm);
        }
    }
    exchange_args ex = {comm, jobs, n, processes, nproc, stats};
    if (st == SPMD_OK) { /* the local copies beside the exchange */
        int busy = devices_with_work(&bw, 0, rt->num_local, ordinals);
        copy_cursor cur = {&bw, 0, 0, 0, 0};
        if (busy > 1 || !comm) /* the devices copy while this thread exchanges */
            st = spmd__run_on_devices_beside(fn, busy, ordinals, device_copies, &bw,
                                             comm ? exchange_beside : NULL, &ex);
        else /* one device's copies: this thread interleaves them with the exchange */
            st = exchange(comm, jobs, n, processes, nproc, copy_step, &cur, stats);
    }
    if (st != SPMD_OK && comm) { /* MPI failed after the agreement: start afresh next time */
        spmd__set_comm *e = spmd__set_comm_find(&comms, processes, nproc, rt->session);
        if (e)
            spmd__set_comm_forget(&comms, e);
        /* MPI may still read the sources and write the destinations: they outlive the process */
        for (int k = 0; k < n; k++) {
            spmd__array_keep_buffers(jobs[k].x);
            spmd__array_keep_buffers(jobs[k].out);
        }
        st = spmd__error_in(st, fn);
    }
    if (st == SPMD_OK && o->donate)
        for (int k = 0; k < n; k++)
            spmd__array_mark_deleted(xs[k], fn); /* its sent data is out; shared buffers live on */
    if (st == SPMD_OK && comm) {
        int busy = devices_with_work(&bw, 1, rt->num_local, ordinals);
        st = spmd__run_on_devices(fn, busy, ordinals, device_replicas, &bw);
    }
    for (int k = 0; st == SPMD_OK && k < n; k++)
        for (int j = 0; j < jobs[k].out->num_shards; j++)
            if (jobs[k].plan->dst[j].share_src >= 0)
                stats->bytes_shared += jobs[k].out->shard_bytes;
            else
                stats->bytes_copied +=
                    copied_elements(&jobs[k].plan->dst[j], jobs[k].out->ndim) * jobs[k].elem;
    free(ordinals);
    free(member);
    free(processes);
    return st;
}

static spmd_status reshard_batch(const char *fn, int n, spmd_array *const *xs,
                                 const spmd_sharding *const *to,
                                 const spmd_reshard_options *options, spmd_array **outs)
{
    SPMD_CHECK(spmd__worker_refuse_nested(fn));
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
    SPMD_REQUIRE(n >= 0 && n <= MAX_BATCH, SPMD_ERR_INVALID_ARGUMENT, "%s: n=%d must be in 0..%d",
                 fn, n, MAX_BATCH);
    if (n == 0)
        return SPMD_OK;
    SPMD_REQUIRE_NOT_NULL(outs, fn);
    for (int k = 0; k < n; k++)
        outs[k] = NULL;
    SPMD_REQUIRE_NOT_NULL(xs, fn);
    SPMD_REQUIRE_NOT_NULL(new_shardings, fn);
    for (int k = 0; k < n; k++)
        SPMD_REQUIRE(xs[k] && new_shardings[k], SPMD_ERR_INVALID_ARGUMENT, "%s: %s[%d] is NULL", fn,
                     xs[k] ? "new_shardings" : "xs", k);
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
    spmd_array *a = NULL;
    SPMD_CHECK(spmd__array_create_empty(x->sharding, x->ndim, x->shape, x->dtype, fn, &a));
    spmd_status st = spmd__array_for_shards(fn, a, NULL, a->num_shards, copy_shard, (void *)x);
    if (st != SPMD_OK) {
        spmd_array_destroy(a);
        return st;
    }
    a->stacked_replicas = x->stacked_replicas;
    *out = a;
    return SPMD_OK;
}
