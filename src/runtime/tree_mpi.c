/*
 * The data of a reduction between processes in the canonical order of runtime/tree.h, once
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

#include "runtime/check.h"
#include "runtime/comm_mpi_impl.h"
#include "runtime/tree.h"

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
    size_t bytes;
    spmd__combine_fn combine;
    void *arg;
    int64_t deadline;
    int *leaves; /* leaves holding this rank's positions, ascending */
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

/* Posts a receive of rbytes from rank `peer` into recv and a send of sbytes from send (either
 * may be absent: NULL). */
static spmd_status post_pair(tree_run *r, int peer, const void *send, size_t sbytes, void *recv,
                             size_t rbytes)
{
    SPMD_REQUIRE(sbytes <= INT_MAX && rbytes <= INT_MAX, SPMD_ERR_UNSUPPORTED,
                 "a reduction of %zu bytes between processes exceeds MPI's int counts; split "
                 "the array",
                 r->bytes);
    SPMD_REQUIRE(room_for_requests(r, 2), SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    spmd__comm *c = r->c;
    int rc = MPI_SUCCESS;
    lock();
    if (recv) {
        r->from[r->nreqs] = peer;
        rc = MPI_Irecv(recv, (int)rbytes, MPI_BYTE, c->peer[peer], r->tag, c->comm,
                       &r->reqs[r->nreqs]);
        r->nreqs += rc == MPI_SUCCESS;
    }
    if (send && rc == MPI_SUCCESS) {
        r->from[r->nreqs] = -1;
        rc = MPI_Isend(send, (int)sbytes, MPI_BYTE, c->peer[peer], r->tag, c->comm,
                       &r->reqs[r->nreqs]);
        r->nreqs += rc == MPI_SUCCESS;
    }
    unlock();
    return rc == MPI_SUCCESS ? SPMD_OK : spmd__mpi_failure(rc, "the reduction's messages");
}

/* A swap with rank `peer`: `mine` goes out, the peer's value arrives in `theirs`. */
static spmd_status post_swap(tree_run *r, int peer, const char *mine, char *theirs)
{
    return post_pair(r, peer, mine, r->bytes, theirs, r->bytes);
}

static spmd_status finish_round(tree_run *r)
{
    spmd_status st = r->nreqs ? spmd__comm_wait_data_until(r->c, r->nreqs, r->reqs, r->from,
                                                           "the reduction's data", r->deadline)
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
        memcpy(v, in->inputs[j], r->bytes);
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
    free(r->bufs);
    free(r->leaves);
    return st;
}

/*
 * Every rank one aligned block, and a combine that applies to any run of elements: a
 * reduce-scatter by recursive halving, then an all-gather by recursive doubling, over the blocks
 * in the tree's order (Rabenseifner's algorithm, distances doubling from 1): each rank sends
 * about 2N bytes instead of log2(P) N, and every element is still the tree's sum, node by node
 * (blocks 2i + 1 < 2 rem first fold into block 2i, as the tree's pair leaves).
 */
static spmd_status halving_doubling(tree_run *r, char *acc, size_t count, size_t elem)
{
    const spmd__tree_inputs *in = r->in;
    spmd__tree t = spmd__tree_of(r->c->size);
    int v = in->my_vrank;
    size_t bytes = count * elem;
    if (v < 2 * t.rem && (v & 1)) { /* hands its block to v - 1, gets the sum back */
        int peer = in->rank_of_vrank[v - 1];
        SPMD_CHECK(post_pair(r, peer, acc, bytes, NULL, 0));
        SPMD_CHECK(finish_round(r));
        SPMD_CHECK(post_pair(r, peer, NULL, 0, acc, bytes));
        return finish_round(r);
    }
    char *tmp = spmd__comm_buffer(r->c, 1, bytes + 1);
    r->staging_taken = 1;
    SPMD_REQUIRE(tmp != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory for a reduction");
    if (v < 2 * t.rem) {
        SPMD_CHECK(post_pair(r, in->rank_of_vrank[v + 1], NULL, 0, tmp, bytes));
        SPMD_CHECK(finish_round(r));
        r->combine(acc, tmp, bytes, r->arg);
    }
    int i = v < 2 * t.rem ? v / 2 : v - t.rem, peer[32];
    size_t lo[32], mid[32], hi[32], a = 0, b = count;
    for (int k = 0; k < t.levels; k++) { /* my region halves; the partner's copy of it arrives */
        int j = i ^ (1 << k);
        peer[k] = in->rank_of_vrank[j < t.rem ? 2 * j : j + t.rem];
        lo[k] = a, hi[k] = b, mid[k] = a + (b - a) / 2;
        int upper = (i >> k) & 1;
        size_t ka = upper ? mid[k] : a, kb = upper ? b : mid[k];
        size_t sa = upper ? a : mid[k], sb = upper ? mid[k] : b;
        SPMD_CHECK(post_pair(r, peer[k], acc + sa * elem, (sb - sa) * elem, tmp, (kb - ka) * elem));
        SPMD_CHECK(finish_round(r));
        r->combine(acc + ka * elem, tmp, (kb - ka) * elem, r->arg);
        a = ka, b = kb;
    }
    for (int k = t.levels - 1; k >= 0; k--) { /* the partner's half of each region arrives */
        int upper = (i >> k) & 1;
        size_t pa = upper ? lo[k] : mid[k], pb = upper ? mid[k] : hi[k];
        SPMD_CHECK(post_pair(r, peer[k], acc + a * elem, (b - a) * elem, acc + pa * elem,
                             (pb - pa) * elem));
        SPMD_CHECK(finish_round(r));
        a = lo[k], b = hi[k];
    }
    if (v < 2 * t.rem) {
        SPMD_CHECK(post_pair(r, in->rank_of_vrank[v + 1], acc, bytes, NULL, 0));
        SPMD_CHECK(finish_round(r));
    }
    return SPMD_OK;
}

spmd_status spmd__comm_tree_allreduce_agreed(spmd__comm *c, int tag, const spmd__tree_inputs *in,
                                             void *acc, size_t count, size_t elem,
                                             spmd__combine_fn combine, void *combine_arg)
{
    spmd__tree_inputs positions;
    const void *acc_input[1] = {acc};
    int my_position[1];
    tree_run r = {.c = c,
                  .tag = tag,
                  .in = in,
                  .t = spmd__tree_of(in->n),
                  .bytes = count * elem,
                  .combine = combine,
                  .arg = combine_arg,
                  .deadline = spmd__comm_data_deadline(c)};
    if (in->block > 0 && in->split)
        return finish_run(&r, halving_doubling(&r, acc, count, elem));
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
        memcpy(acc, nodes[0].value, r.bytes);
    free(nodes);
    return finish_run(&r, st);
}
