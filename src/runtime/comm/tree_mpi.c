/*
 * The data of a reduction between processes in the canonical order of runtime/base/tree.h, once
 * every rank agreed to it: recursive doubling over the tree's nodes. A rank holds the values of
 * the nodes that contain its positions; at each level it adds the two children where it holds
 * both, and otherwise swaps its child's value with the ranks holding the sibling's partner
 * leaves (one rank when every rank holds an aligned block; a few where positions are scattered).
 * Every node is its left child plus its right child, whoever adds it: the bits do not depend on
 * how the positions are spread over processes.
 */
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/check.h"
#include "runtime/comm/comm_mpi_impl.h"
#include "runtime/base/stream_copy.h"
#include "runtime/base/tree.h"

#define lock spmd__mpi_lock
#define unlock spmd__mpi_unlock

typedef struct node {
    int index; /* at the current level */
    char *value;
    char *arrived; /* the sibling's value (or the pair's other half), from a swap */
    int first;     /* this rank's leaves in the node: leaves[first .. first + count) */
    int count;
} node;

typedef struct tree_run {
    spmd__comm *c;
    int tag;
    const spmd__tree_inputs *in;
    spmd__tree t;
    size_t bytes, elem;
    size_t *run_at; /* [nruns + 1] each run's first element in the vector, with runs */
    spmd__combine_fn combine;
    void *arg;
    int64_t deadline;
    const spmd__wait *wait; /* whose cancellation ends the waits (the call given up) */
    int bucket;             /* the bucket of runs under way: its streams' rounds its own */
    int *leaves;            /* leaves holding this rank's positions, ascending */
    int nleaves;
    /* buffers MPI may use: kept with the communicator when a wait fails */
    int staging_taken; /* the communicator's staging buffer 1 receives */
    void **bufs;
    int nbufs, cap_bufs;
    /* the round being posted */
    MPI_Request *reqs;
    int *from;
    int nreqs, cap_reqs;
} tree_run;

static char *new_buffer(tree_run *r)
{
    if (r->nbufs == r->cap_bufs) {
        int cap = r->cap_bufs ? 2 * r->cap_bufs : 8;
        void **grown = realloc(r->bufs, (size_t)cap * sizeof *grown);
        if (!grown)
            return NULL;
        r->bufs = grown;
        r->cap_bufs = cap;
    }
    char *b = malloc(r->bytes ? r->bytes : 1);
    if (b)
        r->bufs[r->nbufs++] = b;
    return b;
}

static int room_for_requests(tree_run *r, int more)
{
    if (r->nreqs + more <= r->cap_reqs)
        return 1;
    int cap = 2 * (r->nreqs + more);
    MPI_Request *reqs = realloc(r->reqs, (size_t)cap * sizeof *reqs);
    if (reqs)
        r->reqs = reqs;
    int *from = reqs ? realloc(r->from, (size_t)cap * sizeof *from) : NULL;
    if (from)
        r->from = from;
    if (!reqs || !from)
        return 0;
    r->cap_reqs = cap;
    return 1;
}

/* Bytes a many-block reduction moves at a time (its buckets). */
#define BUCKET_BYTES ((size_t)2 << 20)

/* What one message reads or writes: a buffer of bytes, or (MPI_BOTTOM) a datatype over runs. */
typedef struct span {
    int active; /* 0: no message */
    void *buf;  /* MPI_BOTTOM (which may be NULL) with a datatype over runs */
    int count;
    MPI_Datatype type;
} span;

static span bytes_span(const void *buf, size_t bytes)
{
    return (span){buf != NULL, (void *)buf, (int)bytes, MPI_BYTE};
}

/* Posts a receive from rank `peer` into recv and a send from send (either may be absent); a
 * datatype of either is freed once posted (MPI keeps it while the message is under way). */
static spmd_status post_spans(tree_run *r, int peer, span send, span recv)
{
    SPMD_REQUIRE(room_for_requests(r, 2), SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    spmd__comm *c = r->c;
    int rc = MPI_SUCCESS;
    lock();
    if (recv.active) {
        r->from[r->nreqs] = peer;
        rc = MPI_Irecv(recv.buf, recv.count, recv.type, c->peer[peer], r->tag, c->comm,
                       &r->reqs[r->nreqs]);
        r->nreqs += rc == MPI_SUCCESS;
    }
    if (send.active && rc == MPI_SUCCESS) {
        r->from[r->nreqs] = -1;
        rc = MPI_Isend(send.buf, send.count, send.type, c->peer[peer], r->tag, c->comm,
                       &r->reqs[r->nreqs]);
        r->nreqs += rc == MPI_SUCCESS;
    }
    if (send.type != MPI_BYTE)
        MPI_Type_free(&send.type);
    if (recv.type != MPI_BYTE)
        MPI_Type_free(&recv.type);
    unlock();
    return rc == MPI_SUCCESS ? SPMD_OK : spmd__mpi_failure(rc, "the reduction's messages");
}

/* Posts a receive of rbytes from rank `peer` into recv and a send of sbytes from send (either
 * may be absent: NULL). */
static spmd_status post_pair(tree_run *r, int peer, const void *send, size_t sbytes, void *recv,
                             size_t rbytes)
{
    SPMD_REQUIRE(sbytes <= INT_MAX && rbytes <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                 "a reduction of %zu bytes between processes exceeds MPI's int counts; split "
                 "the array",
                 r->bytes);
    return post_spans(r, peer, bytes_span(send, sbytes), bytes_span(recv, rbytes));
}

/* A swap with rank `peer`: `mine` goes out, the peer's value arrives in `theirs`. */
static spmd_status post_swap(tree_run *r, int peer, const char *mine, char *theirs)
{
    return post_pair(r, peer, mine, r->bytes, theirs, r->bytes);
}

static spmd_status finish_round(tree_run *r)
{
    spmd_status st = r->nreqs
                         ? spmd__comm_wait_data_until(r->c, r->nreqs, r->reqs, r->from,
                                                      "the reduction's data", r->deadline, r->wait)
                         : SPMD_OK;
    if (st == SPMD_OK)
        r->nreqs = 0;
    return st;
}

/* The ranks other than this one that hold positions of leaf `leaf`, added to peers. */
static int add_owners(const tree_run *r, int leaf, int *peers, int n)
{
    int first = spmd__tree_leaf_first(&r->t, leaf);
    for (int k = 0; k < spmd__tree_leaf_size(&r->t, leaf); k++) {
        int rank = r->in->rank_of[first + k], seen = 0;
        for (int i = 0; i < n; i++)
            seen |= peers[i] == rank;
        if (!seen && rank != r->c->rank)
            peers[n++] = rank;
    }
    return n;
}

static int ascending(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The leaves of this rank's positions; with a block, the node they make up. */
static spmd_status find_leaves(tree_run *r, node *start, int *level)
{
    const spmd__tree_inputs *in = r->in;
    int lo, hi;
    if (in->block > 0) {
        lo = spmd__tree_leaf_of(&r->t, in->my_vrank * in->block);
        hi = spmd__tree_leaf_of(&r->t, (in->my_vrank + 1) * in->block - 1) + 1;
    } else {
        lo = spmd__tree_leaf_of(&r->t, in->positions[0]);
        hi = spmd__tree_leaf_of(&r->t, in->positions[in->count - 1]) + 1;
    }
    r->leaves = malloc((size_t)(hi - lo) * sizeof(int));
    SPMD_REQUIRE(r->leaves != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    if (in->block > 0) {
        for (int l = lo; l < hi; l++)
            r->leaves[r->nleaves++] = l;
        *level = 0;
        while ((1 << *level) < hi - lo)
            ++*level;
        *start = (node){lo >> *level, NULL, NULL, 0, hi - lo};
        return SPMD_OK;
    }
    for (int i = 0; i < in->count; i++) {
        int l = spmd__tree_leaf_of(&r->t, in->positions[i]);
        if (!r->nleaves || r->leaves[r->nleaves - 1] != l)
            r->leaves[r->nleaves++] = l;
    }
    *level = 0;
    return SPMD_OK;
}

/* Level 0 from positions: each leaf's value, swapping with the holder of a pair's other half. */
static spmd_status leaf_values(tree_run *r, node *nodes)
{
    const spmd__tree_inputs *in = r->in;
    int j = 0;
    for (int k = 0; k < r->nleaves; k++) {
        int leaf = r->leaves[k], first = spmd__tree_leaf_first(&r->t, leaf);
        char *v = new_buffer(r);
        SPMD_REQUIRE(v != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
        spmd__copy_cached(v, in->inputs[j], r->bytes);
        nodes[k] = (node){leaf, v, NULL, k, 1};
        int mine_first = in->positions[j++] == first;
        if (spmd__tree_leaf_size(&r->t, leaf) == 1)
            continue;
        if (mine_first && j < in->count && in->positions[j] == first + 1) {
            r->combine(v, in->inputs[j++], r->bytes, r->arg);
            continue;
        }
        /* the pair's other position is another rank's: both need the sum */
        nodes[k].arrived = new_buffer(r);
        SPMD_REQUIRE(nodes[k].arrived != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
        SPMD_CHECK(post_swap(r, in->rank_of[mine_first ? first + 1 : first], v, nodes[k].arrived));
    }
    SPMD_CHECK(finish_round(r));
    for (int k = 0; k < r->nleaves; k++)
        if (nodes[k].arrived)
            r->combine(nodes[k].value, nodes[k].arrived, r->bytes, r->arg);
    return SPMD_OK;
}

/* Whether nodes i and i + 1 are siblings (both children of one parent are here). */
static int siblings(const node *nodes, int nn, int i)
{
    return i + 1 < nn && !(nodes[i].index & 1) && nodes[i + 1].index == nodes[i].index + 1;
}

/*
 * One level up: the parents of the nodes of level `level` - 1. Every leaf l of this rank is
 * paired with leaf l ^ 2^(level - 1): the ranks holding the two swap the values of the nodes
 * containing them, even where one of them holds both children already (the other may not), so
 * that every swap has both its sides.
 */
static spmd_status level_up(tree_run *r, node *nodes, int *nn, int level)
{
    int half = 1 << (level - 1), out = 0, total = 0;
    /* each node's peers, then the round's receive buffers out of the staging buffer */
    int *peers = malloc((size_t)(2 * r->nleaves + *nn) * sizeof *peers);
    SPMD_REQUIRE(peers != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    int *starts = peers + 2 * r->nleaves;
    for (int i = 0; i < *nn; i++) {
        node *a = &nodes[i];
        starts[i] = total;
        int np = 0;
        for (int k = a->first; k < a->first + a->count; k++)
            np = add_owners(r, r->leaves[k] ^ half, peers + total, np);
        qsort(peers + total, (size_t)np, sizeof *peers, ascending);
        total += np;
    }
    char *arena = spmd__comm_buffer(r->c, 1, (size_t)total * r->bytes + 1);
    r->staging_taken = 1;
    spmd_status st =
        arena ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory for a reduction");
    for (int i = 0; i < *nn && st == SPMD_OK; i++) {
        node *a = &nodes[i];
        int end = i + 1 < *nn ? starts[i + 1] : total;
        a->arrived = starts[i] < end ? arena + (size_t)starts[i] * r->bytes : NULL;
        for (int p = starts[i]; p < end && st == SPMD_OK; p++) /* the same value from each */
            st = post_swap(r, peers[p], a->value, arena + (size_t)p * r->bytes);
    }
    free(peers);
    if (st == SPMD_OK)
        st = finish_round(r);
    for (int i = 0; i < *nn && st == SPMD_OK; i++) {
        node *a = &nodes[i];
        if (siblings(nodes, *nn, i)) {
            r->combine(a->value, nodes[i + 1].value, r->bytes, r->arg);
            nodes[out++] =
                (node){a->index / 2, a->value, NULL, a->first, a->count + nodes[i + 1].count};
            i++;
            continue;
        }
        SPMD_REQUIRE(a->arrived != NULL, SPMD_ERR_INTERNAL,
                     "reduction order: no rank holds the sibling of node %d of level %d", a->index,
                     level - 1);
        r->combine(a->value, a->arrived, r->bytes, r->arg);
        nodes[out++] = (node){a->index / 2, a->value, NULL, a->first, a->count};
    }
    *nn = out;
    return st;
}

/* Frees what a run allocated; after a failure, keeps what MPI may still use. */
static spmd_status finish_run(tree_run *r, spmd_status st)
{
    for (int i = 0; i < r->nbufs; i++) {
        if (st == SPMD_OK)
            free(r->bufs[i]);
        else
            spmd__comm_keep_with(r->c, r->bufs[i]);
    }
    if (st != SPMD_OK && r->staging_taken)
        spmd__comm_detach_buffer(r->c, 1);
    if (st == SPMD_OK || !r->nreqs)
        free(r->reqs);
    else
        spmd__comm_keep_with(r->c, r->reqs);
    free(r->from);
    free(r->run_at);
    free(r->bufs);
    free(r->leaves);
    return st;
}

/* Elements [a, b) of the vector: of acc, or of the runs (r->run_at: each run's first element),
 * or of their sources (from_sources: of acc's source, if it has one). */
static spmd_status span_of(tree_run *r, char *acc, size_t a, size_t b, int from_sources, span *out)
{
    size_t elem = r->elem;
    const spmd__tree_inputs *in = r->in;
    const spmd__piece_run *runs = from_sources ? in->sources : in->runs;
    if (!in->nruns) {
        SPMD_REQUIRE((b - a) * elem <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                     "a reduction of %zu bytes between processes exceeds MPI's int counts; split "
                     "the array",
                     r->bytes);
        char *from = from_sources && in->acc_source ? (char *)in->acc_source : acc;
        *out = bytes_span(from + a * elem, (b - a) * elem);
        return SPMD_OK;
    }
    int n = 0;
    int *lengths = malloc((size_t)in->nruns * (sizeof(int) + sizeof(MPI_Aint)));
    SPMD_REQUIRE(lengths != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    MPI_Aint *at = (MPI_Aint *)(lengths + in->nruns);
    int fits = 1;
    lock(); /* below MPI_THREAD_MULTIPLE, one thread in MPI at a time */
    for (int k = 0; k < in->nruns; k++) {
        size_t lo = r->run_at[k] > a ? r->run_at[k] : a;
        size_t hi = r->run_at[k + 1] < b ? r->run_at[k + 1] : b;
        if (lo >= hi)
            continue;
        fits &= (hi - lo) * elem <= INT_MAX;
        lengths[n] = (int)((hi - lo) * elem);
        MPI_Get_address((char *)runs[k].data + (lo - r->run_at[k]) * elem, &at[n++]);
    }
    unlock();
    *out = (span){1, MPI_BOTTOM, 1, MPI_BYTE};
    int rc = MPI_SUCCESS;
    if (fits) {
        lock();
        rc = MPI_Type_create_hindexed(n, lengths, at, MPI_BYTE, &out->type);
        if (rc == MPI_SUCCESS)
            rc = MPI_Type_commit(&out->type);
        unlock();
    }
    free(lengths);
    SPMD_REQUIRE(fits, SPMD_ERR_UNSUPPORTED,
                 "a block of more than 2 GiB in a reduction between processes exceeds MPI's int "
                 "counts; split the array");
    return rc == MPI_SUCCESS ? SPMD_OK : spmd__mpi_failure(rc, "MPI_Type_create_hindexed");
}

/* Elements [a, b) of the vector op= `in` (b - a elements). */
static void combine_into(tree_run *r, char *acc, size_t a, size_t b, const char *in)
{
    size_t elem = r->elem;
    if (!r->in->nruns) {
        r->combine(acc + a * elem, in, (b - a) * elem, r->arg);
        return;
    }
    for (int k = 0; k < r->in->nruns; k++) {
        size_t lo = r->run_at[k] > a ? r->run_at[k] : a;
        size_t hi = r->run_at[k + 1] < b ? r->run_at[k + 1] : b;
        if (lo < hi)
            r->combine((char *)r->in->runs[k].data + (lo - r->run_at[k]) * elem,
                       in + (lo - a) * elem, (hi - lo) * elem, r->arg);
    }
}

/* Elements [a, b) of the runs (of acc) from their sources: the first time the reduction needs
 * them. */
static void load_sources(tree_run *r, char *acc, size_t a, size_t b)
{
    const char *source = r->in->acc_source;
    if (!r->in->nruns && source && source != acc)
        spmd__copy_cached(acc + a * r->elem, source + a * r->elem, (b - a) * r->elem);
    for (int k = 0; k < r->in->nruns; k++) {
        size_t lo = r->run_at[k] > a ? r->run_at[k] : a;
        size_t hi = r->run_at[k + 1] < b ? r->run_at[k + 1] : b;
        size_t skip = (lo - r->run_at[k]) * r->elem;
        if (lo < hi && r->in->sources[k].data != r->in->runs[k].data)
            spmd__copy_cached((char *)r->in->runs[k].data + skip,
                              (const char *)r->in->sources[k].data + skip, (hi - lo) * r->elem);
    }
}

/* Elements [a, b) of the vector op= `in` (b - a elements) where their values are in place; while
 * `fresh`, their first sum: the sources op `in`, in one pass where the combine has a form that
 * reads the source (a pass less than loading it first). */
static void add_arrival(tree_run *r, char *acc, size_t a, size_t b, const char *in, int fresh)
{
    if (!fresh || !r->in->combine_sources) {
        if (fresh)
            load_sources(r, acc, a, b);
        combine_into(r, acc, a, b, in);
        return;
    }
    if (!r->in->nruns) {
        r->in->combine_sources(acc + a * r->elem, (const char *)r->in->acc_source + a * r->elem, in,
                               (b - a) * r->elem, r->arg);
        return;
    }
    for (int k = 0; k < r->in->nruns; k++) {
        size_t lo = r->run_at[k] > a ? r->run_at[k] : a;
        size_t hi = r->run_at[k + 1] < b ? r->run_at[k + 1] : b;
        size_t skip = (lo - r->run_at[k]) * r->elem;
        if (lo < hi)
            r->in->combine_sources((char *)r->in->runs[k].data + skip,
                                   (const char *)r->in->sources[k].data + skip,
                                   in + (lo - a) * r->elem, (hi - lo) * r->elem, r->arg);
    }
}

/* Posts a swap of vector ranges with rank `peer`: [sa, sb) goes out (from the sources while
 * `fresh`), the peer's [ra, rb) arrives into `into` (NULL: in place, into the vector). An empty
 * range is no message, on both sides alike. */
static spmd_status swap_ranges(tree_run *r, int peer, char *acc, int fresh, size_t sa, size_t sb,
                               size_t ra, size_t rb, char *into)
{
    span send = {0, NULL, 0, MPI_BYTE}, recv = {0, NULL, 0, MPI_BYTE};
    spmd_status st = sb > sa ? span_of(r, acc, sa, sb, fresh, &send) : SPMD_OK;
    if (st == SPMD_OK && rb > ra && into)
        recv = bytes_span(into, (rb - ra) * r->elem);
    else if (st == SPMD_OK && rb > ra)
        st = span_of(r, acc, ra, rb, 0, &recv);
    if (st == SPMD_OK)
        return post_spans(r, peer, send, recv);
    if (send.type != MPI_BYTE) {
        lock();
        MPI_Type_free(&send.type);
        unlock();
    }
    return st;
}

/* The run holding element x of the vector (r->run_at: x below its end). */
static int run_of(const tree_run *r, size_t x)
{
    int lo = 0, hi = r->in->nruns - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (r->run_at[mid] <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Elements [a, b) of the runs (of their sources: from_sources) to flat (with non-temporal
 * stores where streaming), or flat into the runs (to_runs). */
static void move_runs(tree_run *r, size_t a, size_t b, char *flat, int from_sources, int to_runs,
                      int streaming)
{
    const spmd__piece_run *runs = from_sources ? r->in->sources : r->in->runs;
    for (int k = a < b ? run_of(r, a) : r->in->nruns; k < r->in->nruns && r->run_at[k] < b; k++) {
        size_t lo = r->run_at[k] > a ? r->run_at[k] : a;
        size_t hi = r->run_at[k + 1] < b ? r->run_at[k + 1] : b;
        char *in_run = (char *)runs[k].data + (lo - r->run_at[k]) * r->elem;
        size_t bytes = (hi - lo) * r->elem;
        if (to_runs)
            spmd__copy_cached(in_run, flat, bytes);
        else
            spmd__copy_either(flat, in_run, bytes, streaming);
        flat += bytes;
    }
}

/* A streamed round: the part it sends (from acc, or gathered from the runs or their sources
 * while `fresh`), and where its arrivals go (added, or copied; into the runs, added to their
 * sources while fresh). */
typedef struct stream_part {
    tree_run *r;
    char *acc;
    size_t send_at, recv_at; /* elements: the next one to send, the first to arrive */
    int fresh, add;
} stream_part;

static void fill_chunk(void *arg, char *dst, size_t bytes, int streaming)
{
    stream_part *s = arg;
    size_t n = bytes / s->r->elem;
    move_runs(s->r, s->send_at, s->send_at + n, dst, s->fresh, 0, streaming);
    s->send_at += n;
}

static void take_chunk(void *arg, size_t offset, const void *data, size_t bytes)
{
    stream_part *s = arg;
    tree_run *r = s->r;
    size_t a = s->recv_at + offset / r->elem, b = a + bytes / r->elem;
    if (s->add) /* the same additions as the staged rounds' */
        add_arrival(r, s->acc, a, b, data, s->fresh);
    else if (!r->in->nruns)
        memcpy(s->acc + a * r->elem, data, bytes);
    else
        move_runs(r, a, b, (char *)data, 0, 1, 0);
}

/* 1 when the rounds with rank `peer` go through the shared-memory rings: the peer on this
 * machine. Alike on both sides. */
static int streams(const tree_run *r, int peer)
{
    return spmd__comm_ring_stream_usable(r->c, peer);
}

/* A streamed round's name, alike on both sides of it: the extra rank's hand-off, a level of the
 * halving or of the doubling, the sum handed back; each bucket of runs its own. */
enum {
    ROUND_HAND_OFF = 0,
    ROUND_HALVING = 1,
    ROUND_DOUBLING = 33,
    ROUND_HAND_BACK = 65,
    ROUNDS = 66
};

/* The extra rank's hand-off (its inputs, unchanged until the round ends) may go from this size
 * on as a note of where it lies, to a peer that reads this process's memory straight
 * (ring_stream_mpi.c). What the all-gather's and the hand-back's rounds send was just written
 * (the additions' result) and goes through the slots: read straight, it is pulled out of the
 * sender's cache and stays shared with the reader's, so that where the two share no cache the
 * sender's next writes there wait on the reader's. The reader's own time, by which stop 63 chose
 * the way, misses that: far, it read 1 MiB in 40 us against 68 through the slots while the
 * whole psum took 1.5 times as long. 2 x 1, ratio to MPI with CMA, medians of runs alternating
 * with that choice, labelled by a cache line's round trip: far (440-540 ns, 61 runs) psum
 * 1-8 MiB 0.62-0.99 -> 0.97-1.57; near (110-170 ns, 3-4 runs) psum 1-4 MiB 0.70-0.77 ->
 * 0.86-1.14, but 8-16 MiB 0.90-1.03 -> 0.68-0.88, where the straight read had been faster.
 * The additions' rounds always go through the slots, as smaller copies do (2 x 1, medians of 4
 * runs alternating with the slots alone, ratio to MPI with CMA: psum 128-512 KiB 1.20-1.57 ->
 * 1.09-1.30 read straight, and the additions' rounds read straight lost too). */
#define STRAIGHT_ROUND_BYTES (512 * 1024)

/* A round with rank `peer` through the rings: [sa, sb) of the vector goes out while the peer's
 * [ra, rb) arrives, added into the vector (add) or copied there, chunk by chunk: the same
 * additions as combine_into's, in the same order, straight from the sender's slot. While
 * `fresh`, what goes out comes from the sources, and the arrivals load them first. */
static spmd_status stream_round(tree_run *r, int peer, int round, char *acc, int fresh, size_t sa,
                                size_t sb, size_t ra, size_t rb, int add)
{
    stream_part part = {r, acc, sa, ra, fresh, add};
    /* the hand-off's inputs: host memory, unchanged until the round ends */
    int inputs_stay = round == ROUND_HAND_OFF && r->in->host && !r->in->nruns && !add;
    const char *from = fresh && r->in->acc_source ? r->in->acc_source : acc;
    spmd__stream s = {.peer = peer,
                      .tag = r->tag,
                      .round = r->bucket * ROUNDS + round,
                      .send = from + sa * r->elem,
                      .sbytes = (sb - sa) * r->elem,
                      .rbytes = (rb - ra) * r->elem,
                      .take = take_chunk,
                      .arg = &part,
                      .fill = r->in->nruns ? fill_chunk : NULL,
                      .fill_arg = &part,
                      .send_stays = inputs_stay && (sb - sa) * r->elem >= STRAIGHT_ROUND_BYTES};
    return spmd__comm_ring_streams(r->c, 1, &s, NULL, "the reduction's data", r->deadline, r->wait,
                                   0);
}

/* In p2 space (a non-extra rank's index), the index holding element x once the halving over
 * [first, end) ends, and its region [*a, *b): the halving's splits, replayed. */
static int holder_of(const spmd__tree *t, size_t x, size_t first, size_t end, size_t *a, size_t *b)
{
    *a = first, *b = end;
    int i = 0;
    for (int k = 0; k < t->levels; k++) {
        size_t mid = *a + (*b - *a) / 2;
        if (x >= mid) {
            i |= 1 << k;
            *a = mid;
        } else {
            *b = mid;
        }
    }
    return i;
}

/*
 * The end of a reduce-scatter (in->scatter) over [first, end): this rank holds the sums of
 * [a, b), the region the halving left it (none beyond the largest power of two), and the rank of
 * vrank v needs [v * W, (v + 1) * W). Each region meets a few such
 * ranges and each range a few regions (their sizes differ by less than 2x), so a rank sends and
 * receives a few messages, computed from the splits alone.
 */
static spmd_status scatter_regions(tree_run *r, char *acc, size_t a, size_t b, size_t first,
                                   size_t end)
{
    const spmd__tree_inputs *in = r->in;
    spmd__tree t = spmd__tree_of(r->c->size);
    size_t W = in->scatter;
    int me = r->c->rank;
    for (size_t x = a; x < b;) { /* what this rank holds goes to the ranks that need it */
        size_t v = x / W, stop = (v + 1) * W < b ? (v + 1) * W : b;
        int peer = in->rank_of_vrank[v];
        if (peer != me)
            SPMD_CHECK(swap_ranges(r, peer, acc, 0, x, stop, 0, 0, NULL));
        x = stop;
    }
    size_t lo = (size_t)in->my_vrank * W, hi = lo + W;
    for (size_t x = lo; x < hi;) { /* and what it needs arrives from the ranks that hold it */
        size_t ja, jb;
        int j = holder_of(&t, x, first, end, &ja, &jb);
        size_t stop = jb < hi ? jb : hi;
        int peer = in->rank_of_vrank[j < t.rem ? 2 * j : j + t.rem];
        if (peer != me)
            SPMD_CHECK(swap_ranges(r, peer, acc, 0, 0, 0, x, stop, NULL));
        x = stop;
    }
    return finish_round(r);
}

/*
 * Every rank one aligned block, and a combine that applies to any run of elements: a
 * reduce-scatter by recursive halving, then an all-gather by recursive doubling, over the blocks
 * in the tree's order (Rabenseifner's algorithm, distances doubling from 1): each rank sends
 * about 2N bytes instead of log2(P) N, and every element is still the tree's sum, node by node
 * (blocks 2i + 1 < 2 rem first fold into block 2i, as the tree's pair leaves). The vector is acc,
 * or runs that MPI reads and writes in place through datatypes.
 */
static spmd_status halving_doubling(tree_run *r, char *acc, size_t first, size_t count)
{
    const spmd__tree_inputs *in = r->in;
    spmd__tree t = spmd__tree_of(r->c->size);
    int v = in->my_vrank;
    /* the values still in the sources: each part is sent from there, or read by its first sum,
     * as the arrival is added (no pass over the whole vector first) */
    int fresh = in->sources != NULL || in->acc_source != NULL;
    size_t elem = r->elem, end = first + count;
    if (v < 2 * t.rem && (v & 1)) { /* hands its block to v - 1, gets the sum back */
        int peer = in->rank_of_vrank[v - 1];
        if (streams(r, peer)) {
            SPMD_CHECK(stream_round(r, peer, ROUND_HAND_OFF, acc, fresh, first, end, 0, 0, 0));
            return in->scatter
                       ? scatter_regions(r, acc, 0, 0, first, end)
                       : stream_round(r, peer, ROUND_HAND_BACK, acc, 0, 0, 0, first, end, 0);
        }
        SPMD_CHECK(swap_ranges(r, peer, acc, fresh, first, end, 0, 0, NULL));
        SPMD_CHECK(finish_round(r));
        if (in->scatter) /* only its range, from the ranks that hold it */
            return scatter_regions(r, acc, 0, 0, first, end);
        SPMD_CHECK(swap_ranges(r, peer, acc, 0, 0, 0, first, end, NULL));
        return finish_round(r);
    }
    char *tmp = spmd__comm_buffer(r->c, 1, count * elem + 1);
    r->staging_taken = 1;
    SPMD_REQUIRE(tmp != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory for a reduction");
    if (v < 2 * t.rem && streams(r, in->rank_of_vrank[v + 1])) {
        SPMD_CHECK(stream_round(r, in->rank_of_vrank[v + 1], ROUND_HAND_OFF, acc, fresh, 0, 0,
                                first, end, 1));
        fresh = 0; /* every element loaded as its sum arrived */
    } else if (v < 2 * t.rem) {
        SPMD_CHECK(swap_ranges(r, in->rank_of_vrank[v + 1], acc, 0, 0, 0, first, end, tmp));
        SPMD_CHECK(finish_round(r));
        add_arrival(r, acc, first, end, tmp, fresh);
        fresh = 0;
    }
    int i = v < 2 * t.rem ? v / 2 : v - t.rem, peer[32];
    size_t lo[32], mid[32], hi[32], a = first, b = end;
    for (int k = 0; k < t.levels; k++) { /* my region halves; the partner's copy of it arrives */
        int j = i ^ (1 << k);
        peer[k] = in->rank_of_vrank[j < t.rem ? 2 * j : j + t.rem];
        lo[k] = a, hi[k] = b, mid[k] = a + (b - a) / 2;
        int upper = (i >> k) & 1;
        size_t ka = upper ? mid[k] : a, kb = upper ? b : mid[k];
        size_t sa = upper ? a : mid[k], sb = upper ? mid[k] : b;
        a = ka, b = kb;
        if (streams(r, peer[k])) {
            SPMD_CHECK(stream_round(r, peer[k], ROUND_HALVING + k, acc, fresh, sa, sb, ka, kb, 1));
            fresh = 0; /* the half kept loaded as it summed; the half sent: the all-gather's */
            continue;
        }
        SPMD_CHECK(swap_ranges(r, peer[k], acc, fresh, sa, sb, ka, kb, tmp));
        SPMD_CHECK(finish_round(r));
        add_arrival(r, acc, ka, kb, tmp, fresh); /* the half sent: written by the all-gather */
        fresh = 0;
    }
    if (fresh)
        load_sources(r, acc, a, b);
    if (in->scatter)
        return scatter_regions(r, acc, a, b, first, end);
    for (int k = t.levels - 1; k >= 0; k--) { /* the partner's half of each region arrives */
        int upper = (i >> k) & 1;
        size_t pa = upper ? lo[k] : mid[k], pb = upper ? mid[k] : hi[k];
        if (streams(r, peer[k])) {
            SPMD_CHECK(stream_round(r, peer[k], ROUND_DOUBLING + k, acc, 0, a, b, pa, pb, 0));
        } else {
            SPMD_CHECK(swap_ranges(r, peer[k], acc, 0, a, b, pa, pb, NULL));
            SPMD_CHECK(finish_round(r));
        }
        a = lo[k], b = hi[k];
    }
    if (v < 2 * t.rem && streams(r, in->rank_of_vrank[v + 1]))
        return stream_round(r, in->rank_of_vrank[v + 1], ROUND_HAND_BACK, acc, 0, first, end, 0, 0,
                            0);
    if (v < 2 * t.rem) {
        SPMD_CHECK(swap_ranges(r, in->rank_of_vrank[v + 1], acc, 0, first, end, 0, 0, NULL));
        SPMD_CHECK(finish_round(r));
    }
    return SPMD_OK;
}

spmd_status spmd__comm_tree_allreduce_agreed(spmd__comm *c, int tag, const spmd__tree_inputs *in,
                                             void *acc, size_t count, size_t elem,
                                             spmd__combine_fn combine, void *combine_arg,
                                             const spmd__wait *w)
{
    spmd__tree_inputs positions;
    const void *acc_input[1] = {acc};
    int my_position[1];
    tree_run r = {.c = c,
                  .tag = tag,
                  .in = in,
                  .t = spmd__tree_of(in->n),
                  .bytes = count * elem,
                  .elem = elem,
                  .combine = combine,
                  .arg = combine_arg,
                  .deadline = spmd__comm_data_deadline(c),
                  .wait = w};
    if (in->block > 0 && in->split) {
        spmd_status st = SPMD_OK;
        if (in->nruns) { /* where each run starts in the vector */
            r.run_at = malloc(((size_t)in->nruns + 1) * sizeof *r.run_at);
            st = r.run_at ? SPMD_OK : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
            for (int k = 0; r.run_at && k <= in->nruns; k++)
                r.run_at[k] = k ? r.run_at[k - 1] + in->runs[k - 1].count : 0;
        }
        /* many blocks (runs) go in buckets of a few MiB, one after another: each step's
           arrival is added while it is still in the caches (bench_gradients) */
        size_t bucket = in->nruns ? BUCKET_BYTES / elem : count;
        for (size_t at = 0; st == SPMD_OK && at < count; at += bucket, r.bucket++)
            st = halving_doubling(&r, acc, at, count - at < bucket ? count - at : bucket);
        return finish_run(&r, st);
    }
    spmd__tree_load_acc(in, acc, count * elem);         /* the tree reads it there */
    if (in->block == 1 && in->my_vrank < 2 * r.t.rem) { /* half a leaf: from its position */
        positions = *in;
        positions.block = 0;
        positions.count = 1;
        my_position[0] = in->my_vrank;
        positions.positions = my_position;
        positions.inputs = acc_input;
        in = r.in = &positions;
    }
    node start;
    int level = 0, nn = 1;
    spmd_status st = find_leaves(&r, &start, &level);
    node *nodes = st == SPMD_OK ? malloc((size_t)r.nleaves * sizeof *nodes) : NULL;
    if (st == SPMD_OK && !nodes)
        st = SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == SPMD_OK && in->block > 0) {
        start.value = acc;
        nodes[0] = start;
    } else if (st == SPMD_OK) {
        nn = r.nleaves;
        st = leaf_values(&r, nodes);
    }
    for (int k = level + 1; k <= r.t.levels && st == SPMD_OK; k++)
        st = level_up(&r, nodes, &nn, k);
    if (st == SPMD_OK && nodes[0].value != acc)
        spmd__copy_cached(acc, nodes[0].value, r.bytes);
    free(nodes);
    return finish_run(&r, st);
}
