/* Resharding (jax.device_put of a committed array). Every process plans only its own part, the
 * same on every process: each destination block is cut along the source blocks; a piece that
 * the receiving process already holds is copied (or its buffer shared), any other is sent by
 * the holder nearest to the receiver, all pieces of a process pair in one message. A process
 * finds its pieces by interval arithmetic, in time proportional to them: for each destination
 * block it holds, the source blocks that meet it (a contiguous range of blocks per dimension);
 * for each source block it holds, the destination blocks that meet it and the processes that
 * need it. Plans are cached on the source layout (every equal sharding shares it), keyed by
 * the destination layout, with the MPI datatypes of their messages. */
#include <spmd/reshard.h>
#include <spmd/runtime.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/calls/calls.h"
#include "runtime/base/check.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/pieces.h"
#include "runtime/comm/process_sets.h"
#include "runtime/runtime_impl.h"
#include "runtime/devices/worker.h"
#include "sharding/mesh_impl.h"
#include "sharding/sharding_impl.h"
#include "sharding/spec_impl.h"
#include "array/array_impl.h"
#include "array/copy.h"

/* Communicator tag of reshard communicators (meshes use 1..30001, processes 30002). */
enum { RESHARD_TAG = 30003, PLANS_PER_LAYOUT = 8, MAX_BATCH = 1024 };

/* A box of the global array, as start and extent. */
typedef struct region {
    int64_t start[SPMD_MAX_RANK];
    int64_t extent[SPMD_MAX_RANK];
} region;

/* Regions of shards of this process, packed: region k of shard shard[k] is box[k * 2 * ndim ...]
 * (start, then extent). */
typedef struct pieces {
    int n, cap;
    int *shard;
    int64_t *box;
} pieces;

typedef struct dst_work { /* one destination shard of this process */
    int share_src;        /* source shard whose memory it reuses (a view), or -1 */
    int64_t share_offset; /* elements into that shard */
    pieces copies;        /* from source shards, before the exchange */
    pieces replicas;      /* from another destination shard (which received it), after */
} dst_work;

/* Element sizes of the dtypes: 1, 2, 4 and 8 bytes, each with its wires. */
enum { ELEM_SIZES = 4 };

typedef struct peer_part { /* what this process sends to or receives from one process */
    int process;
    int64_t elements;
    pieces list; /* source shards (sends) or destination shards (receives), message order */
    spmd__wire *wire[ELEM_SIZES]; /* the message's MPI datatypes per element size, made at first
                                     use */
} peer_part;

typedef struct reshard_plan {
    uint64_t dst_uid; /* the destination layout */
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int num_processes;
    int *processes; /* owning a source or destination device, ascending */
    int ndst;
    dst_work *dst; /* [local destination shards] */
    int nsend, nrecv;
    peer_part *sends, *recvs; /* ascending process */
    uint64_t npieces;         /* copies, shares, replicas, sends and receives */
    uint64_t steps;           /* the work of making it */
} reshard_plan;

/* The plans from one layout, attached to it (it frees them with itself). */
typedef struct reshard_plans {
    spmd__attachment base; /* first */
    int count;
    reshard_plan *plans[PLANS_PER_LAYOUT]; /* most recent first */
} reshard_plans;

/* Calls are collective and issued in the same order everywhere: one at a time. */
static pthread_mutex_t reshard_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- plan ---- */

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

/* Region k of the list; returns its shard. */
static int pieces_get(const pieces *l, int ndim, int k, region *r)
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

static const side *sorting_side; /* qsort has no argument: under reshard_lock */

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

#define NO_MEMORY SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "spmd_reshard: out of memory")

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
        if (!pieces_add(&w->copies, ndim, i, r))
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
        b->p->npieces++;
        if (!pieces_add(&b->p->dst[dst->by_block[k]].replicas, ndim, first, r))
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

static const int64_t *sorting_keys; /* qsort has no argument: under reshard_lock */
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
        int shard = pieces_get(all, ndim, i, &r);
        if (!pieces_add(&pp->list, ndim, shard, &r))
            return NO_MEMORY;
        pp->elements += region_elements(ndim, &r);
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

/* The plan from `from` to `to` for this shape: cached on the source layout (shared by every
 * equal sharding) under the destination layout, or new (*built set). */
static spmd_status plan_get(const spmd_sharding *from, const spmd_sharding *to, int ndim,
                            const int64_t *shape, const spmd__runtime *rt, reshard_plan **out,
                            int *built)
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
    *out = NULL;
    unsigned long call = 0;
    SPMD_CHECK(spmd__set_comm_call(&comms, &e, processes, n, RESHARD_TAG, "spmd_reshard",
                                   description, &call));
    if (e) {
        spmd_status st = spmd__comm_agree(e->comm, fingerprint, description, &w);
        if (st != SPMD_OK)
            spmd__set_comm_forget(&comms, e);
        *out = st == SPMD_OK ? e->comm : NULL;
        return st;
    }
    spmd_status st = spmd__set_comm_create(&comms, processes, n, rt->session, RESHARD_TAG, call,
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
            for (int c = 0; c < w->copies.n; c++) {
                region r;
                int i = pieces_get(&w->copies, jb->out->ndim, c, &r);
                copy_region(jb, jb->x, i, j, &r);
            }
        }
    }
    return SPMD_OK;
}

/* After the exchange: what another shard of this process received for this one too. */
static spmd_status device_replicas(int ordinal, void *arg);

/* The local ordinals of the devices with copies (or, with replicas set, replica fills) to do:
 * waking idle workers costs more than a small copy. `ordinals` has num_local entries. */
static int devices_with_work(const batch_work *bw, int replicas, int num_local, int *ordinals)
{
    memset(ordinals, 0, (size_t)num_local * sizeof *ordinals);
    for (int k = 0; k < bw->n; k++) {
        const job *jb = &bw->jobs[k];
        for (int j = 0; j < jb->out->num_shards; j++) {
            const dst_work *w = &jb->plan->dst[j];
            if ((replicas ? w->replicas.n : w->copies.n) > 0)
                ordinals[jb->out->shards[j].ordinal] = 1;
        }
    }
    int count = 0;
    for (int d = 0; d < num_local; d++)
        if (ordinals[d])
            ordinals[count++] = d;
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
            for (int c = 0; c < w->replicas.n; c++) {
                region r;
                int i = pieces_get(&w->replicas, jb->out->ndim, c, &r);
                copy_region(jb, jb->out, i, j, &r);
            }
        }
    }
    return SPMD_OK;
}

/* Which of a part's wires serves elements of `elem` bytes. */
static int elem_index(size_t elem) { return elem <= 1 ? 0 : elem == 2 ? 1 : elem == 4 ? 2 : 3; }

/* The MPI datatypes of every message of the batch's plans for its element sizes, made once
 * per plan and element size (a box of a shard relative to the shard). */
static spmd_status make_wires(const batch_work *bw)
{
    for (int k = 0; k < bw->n; k++) {
        const job *jb = &bw->jobs[k];
        reshard_plan *p = jb->plan;
        int ndim = p->ndim, e = elem_index(jb->elem);
        SPMD_REQUIRE(jb->elem == (size_t)1 << e, SPMD_ERR_INTERNAL,
                     "spmd_reshard: no message layout for elements of %zu bytes", jb->elem);
        for (int i = 0; i < p->nsend + p->nrecv; i++) {
            peer_part *pp = i < p->nsend ? &p->sends[i] : &p->recvs[i - p->nsend];
            const spmd_array *a = i < p->nsend ? jb->x : jb->out;
            if (pp->wire[e])
                continue;
            size_t cells = (size_t)pp->list.n * (size_t)ndim;
            int64_t *start = malloc((cells ? cells : 1) * sizeof *start);
            int64_t *extent = malloc((cells ? cells : 1) * sizeof *extent);
            spmd_status st = start && extent ? SPMD_OK : NO_MEMORY;
            for (int c = 0; st == SPMD_OK && c < pp->list.n; c++) {
                region r;
                int shard = pieces_get(&pp->list, ndim, c, &r);
                for (int d = 0; d < ndim; d++) {
                    start[(size_t)c * (size_t)ndim + (size_t)d] =
                        r.start[d] - a->shards[shard].index.start[d];
                    extent[(size_t)c * (size_t)ndim + (size_t)d] = r.extent[d];
                }
            }
            if (st == SPMD_OK)
                st = spmd__wire_create(jb->elem, ndim, a->shard_shape, pp->list.n, pp->list.shard,
                                       start, extent, &pp->wire[e]);
            free(start);
            free(extent);
            SPMD_CHECK(st);
        }
    }
    return SPMD_OK;
}

/* One message per peer process and direction, made of every job's part for it in job order
 * (the parts of a plan and `processes` are both ascending). */
static spmd_status build_messages(const job *jobs, int n, int sending, const int *processes,
                                  int nproc, spmd__wire_message **out, int *count,
                                  spmd__wire_part **parts_out, void ***bases_out, uint64_t *bytes)
{
    int total = 0, nbases = 0;
    for (int k = 0; k < n; k++) {
        total += sending ? jobs[k].plan->nsend : jobs[k].plan->nrecv;
        nbases += (sending ? jobs[k].x : jobs[k].out)->num_shards;
    }
    spmd__wire_message *m = calloc((size_t)(nproc ? nproc : 1), sizeof *m);
    spmd__wire_part *parts = malloc((size_t)(total ? total : 1) * sizeof *parts);
    void **bases = malloc((size_t)(nbases ? nbases : 1) * sizeof *bases);
    int *next = calloc((size_t)n, sizeof *next);
    *out = m;
    *parts_out = parts;
    *bases_out = bases;
    if (!m || !parts || !bases || !next) {
        free(next);
        return NO_MEMORY;
    }
    void **job_bases = bases;
    for (int k = 0; k < n; k++) { /* where every shard lies in this call */
        const spmd_array *a = sending ? jobs[k].x : jobs[k].out;
        for (int i = 0; i < a->num_shards; i++)
            job_bases[i] = shard_data(a, i);
        job_bases += a->num_shards;
    }
    *count = 0;
    int used = 0;
    for (int r = 0; r < nproc; r++) {
        spmd__wire_message *msg = &m[*count];
        msg->peer = r;
        msg->parts = &parts[used];
        job_bases = bases;
        for (int k = 0; k < n; k++) {
            const reshard_plan *p = jobs[k].plan;
            const spmd_array *a = sending ? jobs[k].x : jobs[k].out;
            const peer_part *list = sending ? p->sends : p->recvs;
            int nparts = sending ? p->nsend : p->nrecv;
            while (next[k] < nparts && list[next[k]].process < processes[r])
                next[k]++;
            if (next[k] < nparts && list[next[k]].process == processes[r]) {
                const peer_part *pp = &list[next[k]++];
                *bytes += (uint64_t)pp->elements * jobs[k].elem;
                parts[used++] = (spmd__wire_part){pp->wire[elem_index(jobs[k].elem)], job_bases};
                msg->nparts++;
            }
            job_bases += a->num_shards;
        }
        *count += msg->nparts > 0;
    }
    free(next);
    return SPMD_OK;
}

static spmd_status exchange(spmd__comm *comm, const job *jobs, int n, const int *processes,
                            int nproc, int (*work)(void *), void *work_arg,
                            spmd_reshard_stats *stats)
{
    spmd__wire_message *sends = NULL, *recvs = NULL;
    spmd__wire_part *send_parts = NULL, *recv_parts = NULL;
    void **send_bases = NULL, **recv_bases = NULL;
    int nsend = 0, nrecv = 0;
    spmd_status st = build_messages(jobs, n, 1, processes, nproc, &sends, &nsend, &send_parts,
                                    &send_bases, &stats->bytes_sent);
    if (st == SPMD_OK)
        st = build_messages(jobs, n, 0, processes, nproc, &recvs, &nrecv, &recv_parts, &recv_bases,
                            &stats->bytes_received);
    if (st == SPMD_OK && (nsend || nrecv))
        st = spmd__comm_exchange_wires(comm, nsend, sends, nrecv, recvs, work, work_arg);
    else
        while (st == SPMD_OK && work && work(work_arg))
            ;
    stats->messages_sent = nsend;
    stats->messages_received = nrecv;
    free(sends);
    free(recvs);
    free(send_parts);
    free(recv_parts);
    free(send_bases);
    free(recv_bases);
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
            if (cur->c >= w->copies.n)
                continue;
            int ndim = jb->out->ndim;
            region r;
            int shard = pieces_get(&w->copies, ndim, cur->c, &r);
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
            copy_region(jb, jb->x, shard, cur->j, &r);
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
    uint64_t h = spmd__thread_tag() ^ SPMD__FNV1A_SEED;
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, text, size);
    char thread[64];
    spmd__thread_text(thread, sizeof thread);
    spmd__strbuf_printf(&sb, "spmd_reshard of %d array%s (its call #%lu, %s):", n,
                        n == 1 ? "" : "s", spmd__calls_number(), thread);
    for (int k = 0; k < n; k++) {
        const spmd_array *x = jobs[k].x, *out = jobs[k].out;
        char from[SPMD__SPEC_TEXT], to[SPMD__SPEC_TEXT];
        spmd__ignore(spmd_spec_format(x->sharding->spec, from, sizeof from));
        spmd__ignore(spmd_spec_format(out->sharding->spec, to, sizeof to));
        spmd__strbuf_printf(&sb, " %s", spmd_dtype_name(x->dtype));
        spmd__strbuf_shape(&sb, x->shape, x->ndim);
        /* the device sets too: reshards of one shape between other devices read alike */
        spmd__strbuf_printf(&sb, " %s on devices ", from);
        spmd__strbuf_int_list(&sb, x->sharding->mesh->device_ids, x->sharding->mesh->size);
        spmd__strbuf_printf(&sb, " -> %s on devices ", to);
        spmd__strbuf_int_list(&sb, out->sharding->mesh->device_ids, out->sharding->mesh->size);
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
    SPMD_CHECK(spmd__mesh_refuse_abstract(to->mesh, fn, what));
    if (!spmd__runtime_get_session(fn, to->mesh->session))
        return SPMD_ERR_INVALID_ARGUMENT;
    snprintf(what, sizeof what, batch ? "xs[%d]" : "x", k);
    SPMD_CHECK(spmd__sharding_check_shape(to, x->ndim, x->shape, fn, what));
    /* partial sums move only where they stay (spmd_reshard adds them up first) */
    const spmd_sharding *from = x->sharding;
    if ((from->unreduced_mask || to->unreduced_mask) && from->layout != to->layout) {
        char a[SPMD__SPEC_TEXT], b[SPMD__SPEC_TEXT];
        spmd__ignore(spmd_spec_format(from->spec, a, sizeof a));
        spmd__ignore(spmd_spec_format(to->spec, b, sizeof b));
        if (to->unreduced_mask)
            return SPMD_ERROR(SPMD_ERR_UNSUPPORTED,
                              "%s: resharding %s (%s) into unreduced axes (%s) is not offered; "
                              "produce the array in spmd_shard_map with that out_spec",
                              fn, what, a, b);
        return SPMD_ERROR(SPMD_ERR_UNSUPPORTED,
                          "%s: %s is %s, partial sums; reshard it alone with spmd_reshard, which "
                          "adds them up",
                          fn, what, a);
    }
    return SPMD_OK;
}

/* Elements copied between buffers of this process into one destination shard. */
static uint64_t copied_elements(const dst_work *w, int ndim)
{
    uint64_t n = 0;
    region r;
    for (int c = 0; c < w->copies.n; c++) {
        pieces_get(&w->copies, ndim, c, &r);
        n += (uint64_t)region_elements(ndim, &r);
    }
    for (int c = 0; c < w->replicas.n; c++) {
        pieces_get(&w->replicas, ndim, c, &r);
        n += (uint64_t)region_elements(ndim, &r);
    }
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
        int built = 0;
        int64_t t0 = spmd__now_ns();
        st = plan_get(xs[k]->sharding, to[k], xs[k]->ndim, xs[k]->shape, rt, &jobs[k].plan, &built);
        stats->plan_seconds += (double)(spmd__now_ns() - t0) * 1e-9;
        if (st == SPMD_OK) {
            stats->plans_built += built;
            stats->plan_pieces += jobs[k].plan->npieces;
            stats->plan_steps += built ? jobs[k].plan->steps : 0;
        }
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
    if (st == SPMD_OK)
        st = make_wires(&bw);
    spmd__comm *comm = NULL;
    /* Every process of the operation agrees, even one whose own part moves nothing: otherwise
     * processes in different reshards could exchange data meant for another. */
    char text[240] = "";
    if (prepared && nproc > 1 && member[rt->process_index]) {
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

static spmd_status reshard_batch_entered(const char *fn, int n, spmd_array *const *xs,
                                         const spmd_sharding *const *to,
                                         const spmd_reshard_options *options, spmd_array **outs);

/* One call at a time in a process (calls.h). */
static spmd_status reshard_batch(const char *fn, int n, spmd_array *const *xs,
                                 const spmd_sharding *const *to,
                                 const spmd_reshard_options *options, spmd_array **outs)
{
    spmd__call_entry lock;
    SPMD_CHECK(spmd__calls_enter(fn, &lock));
    spmd_status st = reshard_batch_entered(fn, n, xs, to, options, outs);
    spmd__calls_exit(&lock, st);
    return st;
}

static spmd_status reshard_batch_entered(const char *fn, int n, spmd_array *const *xs,
                                         const spmd_sharding *const *to,
                                         const spmd_reshard_options *options, spmd_array **outs)
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
    job *jobs = calloc((size_t)(n > 0 ? n : 1), sizeof *jobs);
    SPMD_REQUIRE(jobs != NULL, SPMD_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    spmd_reshard_stats stats;
    memset(&stats, 0, sizeof stats);
    pthread_mutex_lock(&reshard_lock);
    spmd_status st = reshard_locked(fn, n, xs, to, &o, jobs, &stats);
    pthread_mutex_unlock(&reshard_lock);
    spmd__calls_about(NULL); /* its description is gone */
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

spmd_status spmd__reshard(spmd_array *x, const spmd_sharding *new_sharding,
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
