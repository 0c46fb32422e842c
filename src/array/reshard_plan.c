/* The plan of a reshard: which pieces each process copies, shares, sends and receives. Kept apart
 * from the moving of data (reshard.c) because it outlives the call: worked out once per pair of
 * layouts and shape, cached on the source layout, it serves every later reshard between them. */
#include <stdlib.h>
#include <string.h>

#include "runtime/base/check.h"
#include "runtime/comm/pieces.h"
#include "runtime/runtime_impl.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"
#include "sharding/spec_impl.h"
#include "array/reshard_plan.h"

enum { PLANS_PER_LAYOUT = 8 };

/* The plans from one layout, attached to it (it frees them with itself). */
typedef struct reshard_plans {
    spmd__attachment base; /* first */
    int count;
    reshard_plan *plans[PLANS_PER_LAYOUT]; /* most recent first */
} reshard_plans;

static void pieces_free(pieces *l)
{
    free(l->shard);
    free(l->box);
}

static int pieces_add(pieces *l, int ndim, int shard, const region *r)
{
    size_t stride = (size_t)(2 * ndim);
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        int *s = realloc(l->shard, (size_t)cap * sizeof *s);
        if (s)
            l->shard = s;
        int64_t *b = s ? realloc(l->box, (size_t)cap * (stride ? stride : 1) * sizeof *b) : NULL;
        if (!b)
            return 0;
        l->box = b;
        l->cap = cap;
    }
    l->shard[l->n] = shard;
    int64_t *b = &l->box[(size_t)l->n * stride];
    for (int d = 0; d < ndim; d++) {
        b[d] = r->start[d];
        b[ndim + d] = r->extent[d];
    }
    l->n++;
    return 1;
}

static int runs_add(copy_runs *l, int shard, int64_t src_at, int64_t dst_at, int64_t count)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        copy_run *r = realloc(l->run, (size_t)cap * sizeof *r);
        if (!r)
            return 0;
        l->run = r;
        l->cap = cap;
    }
    l->run[l->n++] = (copy_run){src_at, dst_at, count, shard};
    return 1;
}

int spmd__reshard_pieces_get(const pieces *l, int ndim, int k, region *r)
{
    const int64_t *b = &l->box[(size_t)k * (size_t)(2 * ndim)];
    for (int d = 0; d < ndim; d++) {
        r->start[d] = b[d];
        r->extent[d] = b[ndim + d];
    }
    return l->shard[k];
}

static void plan_free(reshard_plan *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->ndst; i++) {
        free(p->dst[i].runs.run);
        pieces_free(&p->dst[i].copies);
        pieces_free(&p->dst[i].replicas);
    }
    for (int i = 0; i < p->nsend + p->nrecv; i++) {
        peer_part *pp = i < p->nsend ? &p->sends[i] : &p->recvs[i - p->nsend];
        pieces_free(&pp->list);
        for (int e = 0; e < ELEM_SIZES; e++)
            spmd__wire_free(pp->wire[e]);
    }
    free(p->dst);
    free(p->sends);
    free(p->recvs);
    free(p->processes);
    free(p);
}

static void reshard_plans_free(spmd__attachment *a)
{
    reshard_plans *plans = (reshard_plans *)a;
    for (int i = 0; i < plans->count; i++)
        plan_free(plans->plans[i]);
    free(plans);
}

int64_t spmd__reshard_region_elements(int ndim, const region *r)
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

/* Linear block index of mesh position `flat` (row-major over the array's dimensions). */
static int block_of(const spmd_sharding *sh, int ndim, int flat)
{
    int b = 0;
    for (int d = 0; d < ndim; d++)
        b = b * spmd__sharding_blocks(sh, d) + spmd__sharding_block(sh, flat, d);
    return b;
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

/* The blocks of a tiling (tiles of `tile` elements, `nblocks` per dimension) that meet a box,
 * in row-major block order, each with its part of the box: a range of tiles per dimension. */
typedef struct tiles {
    int ndim;
    const int *nblocks;
    const int64_t *tile;
    const spmd_box *box;
    int lo[SPMD_MAX_RANK], hi[SPMD_MAX_RANK], at[SPMD_MAX_RANK];
    int done;
} tiles;

static void tiles_begin(tiles *t, int ndim, const int *nblocks, const int64_t *tile,
                        const spmd_box *box)
{
    t->ndim = ndim;
    t->nblocks = nblocks;
    t->tile = tile;
    t->box = box;
    t->done = 0;
    for (int d = 0; d < ndim; d++) {
        t->lo[d] = (int)(box->start[d] / tile[d]);
        t->hi[d] = (int)((box->stop[d] - 1) / tile[d]);
        t->at[d] = t->lo[d];
    }
}

/* The next block and its part of the box; 0 once there is none. */
static int tiles_next(tiles *t, int *block, region *r)
{
    if (t->done)
        return 0;
    int b = 0;
    for (int d = 0; d < t->ndim; d++) {
        b = b * t->nblocks[d] + t->at[d];
        int64_t s0 = t->at[d] * t->tile[d], s1 = s0 + t->tile[d];
        r->start[d] = s0 > t->box->start[d] ? s0 : t->box->start[d];
        r->extent[d] = (s1 < t->box->stop[d] ? s1 : t->box->stop[d]) - r->start[d];
    }
    *block = b;
    int d = t->ndim - 1;
    while (d >= 0 && t->at[d] == t->hi[d]) {
        t->at[d] = t->lo[d];
        d--;
    }
    if (d < 0)
        t->done = 1;
    else
        t->at[d]++;
    return 1;
}

/* Sorted, distinct process lists of blocks, each found once (open addressing on the block). */
typedef struct block_sets {
    int cap, count; /* slots (a power of two), used */
    int *key;       /* [cap] block, or -1 */
    int *first, *size;
    int *pool; /* the lists, one after another */
    int pool_n, pool_cap;
} block_sets;

static void block_sets_free(block_sets *s)
{
    free(s->key);
    free(s->first);
    free(s->size);
    free(s->pool);
}

/* The slot of `block`: its own, or the empty one where it would go. */
static int block_sets_slot(const block_sets *s, int block)
{
    unsigned h = (unsigned)block * 2654435761u & (unsigned)(s->cap - 1);
    while (s->key[h] >= 0 && s->key[h] != block)
        h = (h + 1) & (unsigned)(s->cap - 1);
    return (int)h;
}

/* Room for one more block and `items` more entries; 0 when out of memory. */
static int block_sets_reserve(block_sets *s, int items)
{
    if (s->pool_n + items > s->pool_cap) {
        int cap = s->pool_cap ? s->pool_cap : 64;
        while (cap < s->pool_n + items)
            cap *= 2;
        int *p = realloc(s->pool, (size_t)cap * sizeof *p);
        if (!p)
            return 0;
        s->pool = p;
        s->pool_cap = cap;
    }
    if (2 * (s->count + 1) <= s->cap)
        return 1;
    block_sets old = *s;
    s->cap = old.cap ? 2 * old.cap : 16;
    s->key = malloc((size_t)s->cap * sizeof(int));
    s->first = malloc((size_t)s->cap * sizeof(int));
    s->size = malloc((size_t)s->cap * sizeof(int));
    if (!s->key || !s->first || !s->size) {
        free(s->key);
        free(s->first);
        free(s->size);
        *s = old;
        return 0;
    }
    for (int i = 0; i < s->cap; i++)
        s->key[i] = -1;
    for (int i = 0; i < old.cap; i++)
        if (old.key[i] >= 0) {
            int h = block_sets_slot(s, old.key[i]);
            s->key[h] = old.key[i];
            s->first[h] = old.first[i];
            s->size[h] = old.size[i];
        }
    free(old.key);
    free(old.first);
    free(old.size);
    return 1;
}

/* Index of the first entry >= q in a sorted list (n when none). */
static int lower_bound(const int *list, int n, int q)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (list[mid] < q)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* What planning needs about one sharding. */
typedef struct side {
    const spmd_sharding *sh;
    const spmd_mesh *m;
    int ndim;
    int nblocks[SPMD_MAX_RANK];
    int64_t shard_shape[SPMD_MAX_RANK];
    int nlocal;
    int *local_block;    /* [nlocal] block of each local shard (mesh flat order) */
    spmd_box *local_box; /* [nlocal] */
    int *local_device;   /* [nlocal] */
    int *local_flat;     /* [nlocal] mesh position (ascending) */
    int *by_block;       /* [nlocal] the local shards by (block, shard) */
    int *sorted_block;   /* [nlocal] their blocks, ascending */
    int nfree;           /* mesh axes no spec entry names: a block's replicas lie along them */
    int free_axis[SPMD_MAX_MESH_AXES];
    int replicas; /* positions per block */
    block_sets processes;
} side;

static void side_free(side *s)
{
    free(s->local_block);
    free(s->local_box);
    free(s->local_device);
    free(s->local_flat);
    free(s->by_block);
    free(s->sorted_block);
    block_sets_free(&s->processes);
}

static const side *sorting_side; /* qsort has no argument: under reshard.c's lock */

static int cmp_by_block(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    int x = sorting_side->local_block[i], y = sorting_side->local_block[j];
    return x != y ? (x > y) - (x < y) : (i > j) - (i < j);
}

static spmd_status side_build(const spmd_sharding *sh, int ndim, const int64_t *shape, side *s)
{
    memset(s, 0, sizeof *s);
    s->sh = sh;
    s->m = sh->mesh;
    s->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        s->nblocks[d] = spmd__sharding_blocks(sh, d);
        s->shard_shape[d] = shape[d] / s->nblocks[d];
    }
    int used[SPMD_MAX_MESH_AXES] = {0};
    for (int d = 0; d < sh->length; d++)
        for (int k = 0; k < sh->spec->entry_size[d]; k++)
            used[sh->entry_mesh_axis[d][k]] = 1;
    s->replicas = 1;
    for (int a = 0; a < s->m->ndim; a++)
        if (!used[a]) {
            s->free_axis[s->nfree++] = a;
            s->replicas *= s->m->shape[a];
        }
    const spmd_mesh *m = s->m;
    s->nlocal = m->num_local;
    size_t n = (size_t)(m->num_local ? m->num_local : 1);
    s->local_block = malloc(n * sizeof *s->local_block);
    s->local_box = malloc(n * sizeof *s->local_box);
    s->local_device = malloc(n * sizeof *s->local_device);
    s->local_flat = malloc(n * sizeof *s->local_flat);
    s->by_block = malloc(n * sizeof *s->by_block);
    s->sorted_block = malloc(n * sizeof *s->sorted_block);
    SPMD_REQUIRE(s->local_block && s->local_box && s->local_device && s->local_flat &&
                     s->by_block && s->sorted_block,
                 SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    for (int i = 0; i < m->num_local; i++) {
        s->local_device[i] = m->local_ids[i];
        s->local_flat[i] = m->position_of[m->local_ids[i]];
        s->local_block[i] = block_of(sh, ndim, s->local_flat[i]);
        block_box(s->shard_shape, ndim, s->local_block[i], s->nblocks, &s->local_box[i]);
        s->by_block[i] = i;
    }
    sorting_side = s;
    qsort(s->by_block, (size_t)s->nlocal, sizeof *s->by_block, cmp_by_block);
    for (int k = 0; k < s->nlocal; k++)
        s->sorted_block[k] = s->local_block[s->by_block[k]];
    return SPMD_OK;
}

/* Where `v` is in an ascending list, or -1. */
static int find(const int *list, int n, int v)
{
    int k = lower_bound(list, n, v);
    return k < n && list[k] == v ? k : -1;
}

/* Where the local shards of `block` begin in s->by_block, or -1. */
static int local_first(const side *s, int block) { return find(s->sorted_block, s->nlocal, block); }

/* The local shard of s on global device `device`, or -1. */
static int local_on_device(const side *s, int device)
{
    int flat = s->m->position_of[device];
    return flat < 0 ? -1 : find(s->local_flat, s->nlocal, flat);
}

typedef struct plan_builder {
    reshard_plan *p;
    side *src, *dst;
    int *same_device; /* [dst->nlocal] the local source shard on each destination's device, or -1 */
    int me, num_processes;
    pieces rx;    /* receives, in plan order */
    int *rx_peer; /* [rx.n] the sender of each */
    int rx_cap;
    pieces tx;       /* sends, in the order found */
    int64_t *tx_key; /* [3 * tx.n] receiver, destination block, source block */
    int tx_cap;
    uint64_t steps;
} plan_builder;

/* The processes holding `block` of side s (ascending, each once), found on first use from the
 * block's mesh positions: its coordinates on the named axes, any along the others. */
static spmd_status block_processes(plan_builder *b, side *s, int block, const int **list,
                                   int *count)
{
    block_sets *set = &s->processes;
    if (!block_sets_reserve(set, s->replicas))
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory");
    int h = block_sets_slot(set, block);
    if (set->key[h] < 0) {
        const spmd_sharding *sh = s->sh;
        const spmd_mesh *m = s->m;
        int base = 0, rest = block;
        for (int d = s->ndim - 1; d >= 0; d--) {
            int c = rest % s->nblocks[d];
            rest /= s->nblocks[d];
            for (int k = d < sh->length ? sh->spec->entry_size[d] - 1 : -1; k >= 0; k--) {
                int a = sh->entry_mesh_axis[d][k];
                base += c % m->shape[a] * m->strides[a];
                c /= m->shape[a];
            }
        }
        int *out = &set->pool[set->pool_n], at[SPMD_MAX_MESH_AXES] = {0};
        for (int k = 0; k < s->replicas; k++) {
            int flat = base;
            for (int i = 0; i < s->nfree; i++)
                flat += at[i] * m->strides[s->free_axis[i]];
            out[k] = m->process_of[flat];
            for (int i = s->nfree - 1; i >= 0 && ++at[i] == m->shape[s->free_axis[i]]; i--)
                at[i] = 0;
        }
        qsort(out, (size_t)s->replicas, sizeof *out, cmp_int);
        int n = 0;
        for (int k = 0; k < s->replicas; k++)
            if (n == 0 || out[k] != out[n - 1])
                out[n++] = out[k];
        set->key[h] = block;
        set->first[h] = set->pool_n;
        set->size[h] = n;
        set->pool_n += n;
        set->count++;
        b->steps += (uint64_t)s->replicas;
    }
    *list = &set->pool[set->first[h]];
    *count = set->size[h];
    return SPMD_OK;
}

/* The holder nearest to `process` in process index (cyclically; ties to the lower index), so
 * that the receivers of a replicated block spread over its holders. Only the holders just
 * below and just above it (cyclically) can be nearest. */
static int nearest_holder(const int *holders, int n, int process, int num_processes)
{
    int k = lower_bound(holders, n, process);
    int cand[2] = {holders[(k + n - 1) % n], holders[k % n]}, best = -1, best_distance = 0;
    for (int c = 0; c < 2; c++) {
        int d = abs(cand[c] - process);
        if (num_processes - d < d)
            d = num_processes - d;
        if (best < 0 || d < best_distance || (d == best_distance && cand[c] < best)) {
            best = cand[c];
            best_distance = d;
        }
    }
    return best;
}

/* The local source shard for destination shard j: the one on its device when it holds
 * `block`, else the first that does (at `first` in src->by_block). */
static int local_source_of(const plan_builder *b, int first, int block, int j)
{
    int i = b->same_device[j];
    return i >= 0 && b->src->local_block[i] == block ? i : b->src->by_block[first];
}

/* Piece r of source block bs (held here, from src->by_block[sfirst]) lands on this process's
 * shards of destination block bd (from dst->by_block[dfirst]). */
static spmd_status add_local(plan_builder *b, int dfirst, int bs, int sfirst, const region *r)
{
    const side *src = b->src, *dst = b->dst;
    int ndim = dst->ndim, bd = dst->local_block[dst->by_block[dfirst]];
    for (int k = dfirst; k < dst->nlocal && dst->local_block[dst->by_block[k]] == bd; k++) {
        int j = dst->by_block[k];
        dst_work *w = &b->p->dst[j];
        int i = local_source_of(b, sfirst, bs, j);
        /* the whole destination block, one run of a source shard on the same device: a view */
        int whole = 1;
        for (int d = 0; d < ndim; d++)
            whole &= r->extent[d] == dst->local_box[j].stop[d] - dst->local_box[j].start[d];
        int64_t offset = contiguous_offset(ndim, r, &src->local_box[i]);
        b->p->npieces++;
        if (whole && offset >= 0 && src->local_device[i] == dst->local_device[j]) {
            w->share_src = i;
            w->share_offset = offset;
            continue;
        }
        int64_t count = spmd__reshard_region_elements(ndim, r);
        int64_t dst_at = offset >= 0 ? contiguous_offset(ndim, r, &dst->local_box[j]) : -1;
        w->copy_elements += count;
        if (dst_at >= 0 ? !runs_add(&w->runs, i, offset, dst_at, count)
                        : !pieces_add(&w->copies, ndim, i, r))
            return NO_MEMORY;
    }
    return SPMD_OK;
}

/* The first of this process's shards of block bd receives the piece from `from`; the others
 * copy it from there. */
static spmd_status add_receive(plan_builder *b, int dfirst, int from, const region *r)
{
    const side *dst = b->dst;
    int ndim = dst->ndim, first = dst->by_block[dfirst], bd = dst->local_block[first];
    for (int k = dfirst + 1; k < dst->nlocal && dst->local_block[dst->by_block[k]] == bd; k++) {
        dst_work *w = &b->p->dst[dst->by_block[k]];
        b->p->npieces++;
        w->replica_elements += spmd__reshard_region_elements(ndim, r);
        if (!pieces_add(&w->replicas, ndim, first, r))
            return NO_MEMORY;
    }
    if (b->rx.n == b->rx_cap) {
        int cap = b->rx_cap ? 2 * b->rx_cap : 16;
        int *p = realloc(b->rx_peer, (size_t)cap * sizeof *p);
        if (!p)
            return NO_MEMORY;
        b->rx_peer = p;
        b->rx_cap = cap;
    }
    b->rx_peer[b->rx.n] = from;
    b->p->npieces++;
    return pieces_add(&b->rx, ndim, first, r) ? SPMD_OK : NO_MEMORY;
}

static spmd_status add_send(plan_builder *b, int shard, int to, int bd, int bs, const region *r)
{
    if (b->tx.n == b->tx_cap) {
        int cap = b->tx_cap ? 2 * b->tx_cap : 16;
        int64_t *k = realloc(b->tx_key, (size_t)cap * 3 * sizeof *k);
        if (!k)
            return NO_MEMORY;
        b->tx_key = k;
        b->tx_cap = cap;
    }
    int64_t *key = &b->tx_key[(size_t)b->tx.n * 3];
    key[0] = to;
    key[1] = bd;
    key[2] = bs;
    b->p->npieces++;
    return pieces_add(&b->tx, b->src->ndim, shard, r) ? SPMD_OK : NO_MEMORY;
}

/* Every destination block of this process against the source blocks that meet it: copies
 * from its own source shards, receives of the others. */
static spmd_status plan_arrivals(plan_builder *b)
{
    side *src = b->src, *dst = b->dst;
    b->same_device = malloc((size_t)(dst->nlocal ? dst->nlocal : 1) * sizeof *b->same_device);
    if (!b->same_device)
        return NO_MEMORY;
    for (int j = 0; j < dst->nlocal; j++)
        b->same_device[j] = local_on_device(src, dst->local_device[j]);
    for (int k = 0; k < dst->nlocal; k++) {
        int j = dst->by_block[k];
        if (k > 0 && dst->local_block[dst->by_block[k - 1]] == dst->local_block[j])
            continue; /* one more shard of the block before */
        tiles t;
        tiles_begin(&t, dst->ndim, src->nblocks, src->shard_shape, &dst->local_box[j]);
        int bs;
        region r;
        while (tiles_next(&t, &bs, &r)) {
            b->steps++;
            int sfirst = local_first(src, bs);
            if (sfirst >= 0) {
                SPMD_CHECK(add_local(b, k, bs, sfirst, &r));
                continue;
            }
            const int *holders;
            int nh;
            SPMD_CHECK(block_processes(b, src, bs, &holders, &nh));
            SPMD_CHECK(add_receive(b, k, nearest_holder(holders, nh, b->me, b->num_processes), &r));
        }
    }
    return SPMD_OK;
}

/* 1 when every process of mesh m is among the (ascending) holders: none needs the block. */
static int held_everywhere(const int *holders, int nh, const spmd_mesh *m)
{
    if (nh < m->num_processes)
        return 0;
    for (int q = 0, h = 0; q < m->num_processes; q++) {
        while (h < nh && holders[h] < m->processes[q])
            h++;
        if (h == nh || holders[h] != m->processes[q])
            return 0;
    }
    return 1;
}

/* Every source block of this process against the destination blocks that meet it: a send to
 * each process that needs a piece, lacks it and is nearer to this one than to other holders. */
static spmd_status plan_departures(plan_builder *b)
{
    side *src = b->src, *dst = b->dst;
    for (int k = 0; k < src->nlocal; k++) {
        int i = src->by_block[k], bs = src->local_block[i];
        if (k > 0 && src->local_block[src->by_block[k - 1]] == bs)
            continue;
        const int *holders;
        int nh;
        SPMD_CHECK(block_processes(b, src, bs, &holders, &nh));
        b->steps++;
        if (held_everywhere(holders, nh, dst->m))
            continue; /* (no more work than finding the holders was) */
        tiles t;
        tiles_begin(&t, src->ndim, dst->nblocks, dst->shard_shape, &src->local_box[i]);
        int bd;
        region r;
        while (tiles_next(&t, &bd, &r)) {
            const int *needers;
            int nn;
            SPMD_CHECK(block_processes(b, dst, bd, &needers, &nn));
            b->steps += 1 + (uint64_t)nn;
            for (int q = 0; q < nn; q++) {
                if (find(holders, nh, needers[q]) >= 0)
                    continue; /* it holds the piece (this process too) */
                if (nearest_holder(holders, nh, needers[q], b->num_processes) == b->me)
                    SPMD_CHECK(add_send(b, i, needers[q], bd, bs, &r));
            }
        }
    }
    return SPMD_OK;
}

static const int64_t *sorting_keys; /* qsort has no argument: under reshard.c's lock */
static const int *sorting_peers;

static int cmp_send(const void *a, const void *b)
{
    const int64_t *x = &sorting_keys[3 * *(const int *)a], *y = &sorting_keys[3 * *(const int *)b];
    for (int k = 0; k < 3; k++)
        if (x[k] != y[k])
            return x[k] < y[k] ? -1 : 1;
    return 0;
}

static int cmp_receive(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    int x = sorting_peers[i], y = sorting_peers[j];
    return x != y ? (x > y) - (x < y) : (i > j) - (i < j);
}

/* The pieces of `all`, taken in `order`, as one part per peer (peer_of(k) of piece k). */
static spmd_status group_by_peer(const pieces *all, const int *order, const int *peer, int ndim,
                                 peer_part **out, int *count)
{
    *count = 0;
    *out = calloc((size_t)(all->n ? all->n : 1), sizeof **out);
    if (!*out)
        return NO_MEMORY;
    for (int k = 0; k < all->n; k++) {
        int i = order[k];
        if (k == 0 || peer[i] != peer[order[k - 1]])
            (*out)[(*count)++].process = peer[i];
        peer_part *pp = &(*out)[*count - 1];
        region r;
        int shard = spmd__reshard_pieces_get(all, ndim, i, &r);
        if (!pieces_add(&pp->list, ndim, shard, &r))
            return NO_MEMORY;
        pp->elements += spmd__reshard_region_elements(ndim, &r);
    }
    return SPMD_OK;
}

/* The sends by receiver in plan order (destination block, then source block), the receives
 * by sender (found in plan order): the order in which both ends lay out a message. */
static spmd_status plan_messages(plan_builder *b)
{
    reshard_plan *p = b->p;
    int ndim = b->src->ndim, n = b->tx.n > b->rx.n ? b->tx.n : b->rx.n;
    int *order = malloc((size_t)(n ? n : 1) * sizeof *order), *peer = NULL;
    if (order)
        peer = malloc((size_t)(b->tx.n ? b->tx.n : 1) * sizeof *peer);
    if (!order || !peer) {
        free(order);
        return NO_MEMORY;
    }
    for (int k = 0; k < b->tx.n; k++) {
        order[k] = k;
        peer[k] = (int)b->tx_key[3 * k];
    }
    sorting_keys = b->tx_key;
    qsort(order, (size_t)b->tx.n, sizeof *order, cmp_send);
    spmd_status st = group_by_peer(&b->tx, order, peer, ndim, &p->sends, &p->nsend);
    for (int k = 0; k < b->rx.n; k++)
        order[k] = k;
    sorting_peers = b->rx_peer;
    qsort(order, (size_t)b->rx.n, sizeof *order, cmp_receive);
    if (st == SPMD_OK)
        st = group_by_peer(&b->rx, order, b->rx_peer, ndim, &p->recvs, &p->nrecv);
    free(order);
    free(peer);
    return st;
}

/* The processes of either mesh, ascending. */
static spmd_status plan_processes(reshard_plan *p, const spmd_mesh *a, const spmd_mesh *b)
{
    p->processes = malloc((size_t)(a->num_processes + b->num_processes) * sizeof(int));
    if (!p->processes)
        return NO_MEMORY;
    int i = 0, j = 0, n = 0;
    while (i < a->num_processes || j < b->num_processes) {
        int q =
            j >= b->num_processes || (i < a->num_processes && a->processes[i] <= b->processes[j])
                ? a->processes[i++]
                : b->processes[j++];
        if (n == 0 || p->processes[n - 1] != q)
            p->processes[n++] = q;
    }
    p->num_processes = n;
    return SPMD_OK;
}

/* Every process plans only its own part, the same on every process: each destination block is
 * cut along the source blocks; a piece that the receiving process already holds is copied (or its
 * buffer shared), any other is sent by the holder nearest to the receiver, all pieces of a process
 * pair in one message. A process finds its pieces by interval arithmetic, in time proportional to
 * them: for each destination block it holds, the source blocks that meet it (a contiguous range
 * of blocks per dimension); for each source block it holds, the destination blocks that meet it
 * and the processes that need it. The plan keeps the MPI datatypes of its messages. */
static spmd_status plan_build(const spmd_sharding *from, const spmd_sharding *to, int ndim,
                              const int64_t *shape, const spmd__runtime *rt, reshard_plan **out)
{
    reshard_plan *p = calloc(1, sizeof *p);
    side src, dst;
    memset(&src, 0, sizeof src);
    memset(&dst, 0, sizeof dst);
    plan_builder b;
    memset(&b, 0, sizeof b);
    b.p = p;
    b.src = &src;
    b.dst = &dst;
    b.me = rt->process_index;
    b.num_processes = rt->process_count;
    spmd_status st = p ? SPMD_OK : NO_MEMORY;
    if (st == SPMD_OK) {
        p->dst_uid = to->layout->uid;
        p->ndim = ndim;
        memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
        st = side_build(from, ndim, shape, &src);
    }
    if (st == SPMD_OK)
        st = side_build(to, ndim, shape, &dst);
    if (st == SPMD_OK) {
        p->ndst = dst.nlocal;
        p->dst = calloc((size_t)(dst.nlocal ? dst.nlocal : 1), sizeof *p->dst);
        st = p->dst ? SPMD_OK : NO_MEMORY;
    }
    for (int j = 0; st == SPMD_OK && j < p->ndst; j++)
        p->dst[j].share_src = -1;
    if (st == SPMD_OK)
        st = plan_arrivals(&b);
    if (st == SPMD_OK)
        st = plan_departures(&b);
    if (st == SPMD_OK)
        st = plan_messages(&b);
    if (st == SPMD_OK)
        st = plan_processes(p, from->mesh, to->mesh);
    if (p)
        p->steps = b.steps;
    free(b.same_device);
    pieces_free(&b.rx);
    pieces_free(&b.tx);
    free(b.rx_peer);
    free(b.tx_key);
    side_free(&src);
    side_free(&dst);
    if (st != SPMD_OK) {
        plan_free(p);
        return st;
    }
    *out = p;
    return SPMD_OK;
}

spmd_status spmd__reshard_plan_get(const spmd_sharding *from, const spmd_sharding *to, int ndim,
                                   const int64_t *shape, const spmd__runtime *rt,
                                   reshard_plan **out, int *built)
{
    *built = 0;
    reshard_plans *c = (reshard_plans *)from->layout->reshard_plans;
    for (int i = 0; c && i < c->count; i++) {
        reshard_plan *p = c->plans[i];
        if (p->dst_uid != to->layout->uid || p->ndim != ndim ||
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
        c->base.destroy = reshard_plans_free;
        from->layout->reshard_plans = &c->base;
    }
    reshard_plan *p = NULL;
    SPMD_CHECK(plan_build(from, to, ndim, shape, rt, &p));
    if (c->count == PLANS_PER_LAYOUT)
        plan_free(c->plans[--c->count]);
    memmove(&c->plans[1], &c->plans[0], (size_t)c->count * sizeof *c->plans);
    c->plans[0] = p;
    c->count++;
    *out = p;
    *built = 1;
    return SPMD_OK;
}
