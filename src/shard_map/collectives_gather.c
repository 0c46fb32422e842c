/*
 * all_gather, its _invariant and _groups forms (the same paths), and all_gather_many.
 *   in process: each member copies every local member's block into its place in its output
 *     (on the host, or on the device's stream for large CUDA blocks);
 *   between processes: the local blocks staged in scratch, one allgatherv by the first local
 *     member, then each member places every block; large host gathers in which each process
 *     holds consecutive positions (and two processes' of one device each at any size) go
 *     straight into the first member's output, which the others copy whole;
 *   many blocks: each member's blocks packed in one segment, one allgatherv of the segments.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "array/copy.h"
#include "shard_map/collective_frame.h"
#include "runtime/base/stream_copy.h"

/* ---- where the processes' blocks lie ---- */

/* Tables of up to this many processes lie on the stack: a small gather allocates nothing. */
#define STACK_RANKS 16

/* A table of n entries: `stack` where it fits (n <= STACK_RANKS), else allocated (or NULL). */
static size_t *rank_table(size_t *stack, int n)
{
    return n <= STACK_RANKS ? stack : malloc((size_t)n * sizeof(size_t));
}

static void free_rank_table(size_t *table, const size_t *stack)
{
    if (table != stack)
        free(table);
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

/* ---- all_gather ---- */

/* Writes `block` (shape `b`) into out as member `p` of the stack/concatenation along axis. */
static int place_gathered(copier *cp, const spmd_block *out, const void *block, const spmd_block *b,
                          int axis, int tiled, int p)
{
    size_t elem = spmd_dtype_size(b->dtype), outer = 1;
    for (int j = 0; j < axis; j++)
        outer *= (size_t)b->shape[j];
    if (outer == 1) { /* the block is one run of the output (a gather along its first axis) */
        size_t bytes = spmd__block_bytes(b);
        return bytes ? spmd__coll_copy_rows(cp, (char *)out->data + (size_t)p * bytes, 0, block, 0,
                                            bytes, 1)
                     : 0;
    }
    int64_t extent[SPMD_MAX_RANK + 1], start[SPMD_MAX_RANK + 1] = {0};
    if (tiled) {
        memcpy(extent, b->shape, (size_t)b->ndim * sizeof(int64_t));
        start[axis] = p * b->shape[axis];
        return spmd__copy_region_with(spmd__coll_copy_rows, cp, elem, b->ndim, extent, out->data,
                                      out->shape, start, block, extent,
                                      (int64_t[SPMD_MAX_RANK + 1]){0});
    }
    for (int j = 0, k = 0; j <= b->ndim; j++)
        extent[j] = j == axis ? 1 : b->shape[k++];
    start[axis] = p;
    return spmd__copy_region_with(spmd__coll_copy_rows, cp, elem, out->ndim, extent, out->data,
                                  out->shape, start, block, extent,
                                  (int64_t[SPMD_MAX_RANK + 1]){0});
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
        return spmd__coll_fail_args(ctx, st);
    coll c;
    SPMD_CHECK(spmd__coll_begin(ctx, axes, OP_ALL_GATHER, in, groups, &c));
    c.fingerprint = mix(mix(c.fingerprint, (uint64_t)a), (uint64_t)tiled);
    int64_t want[SPMD_MAX_RANK + 1];
    for (int j = 0, k = 0; j < rank_out; j++)
        want[j] = tiled ? in->shape[j] * (j == a ? c.n : 1) : (j == a ? c.n : in->shape[k++]);
    st = spmd__coll_check_out_shape(out, in->dtype, rank_out, want, "all_gather");
    if (st != SPMD_OK)
        return spmd__coll_fail(&c, st);
    size_t bytes = spmd__block_bytes(in);
    spmd__group *g = c.g;
    members m;
    st = spmd__coll_members_init(&c, &m);
    if (st != SPMD_OK)
        return spmd__coll_fail(&c, st);
    /* large gathers between processes of host blocks go straight into the outputs, when each
     * process's blocks are consecutive there (every member finds the same from the same tables) */
    /* an output past the caches goes through them all the same: since the copies go in pieces
     * (runtime/base/stream_copy.h), writing around them lost (2 x 1, CMA, medians of 4 runs
     * alternating, all_gather 32 / 64 MiB 2.09 / 5.08 -> 2.02 / 4.68 ms; in one process at 2
     * devices alike; until then it had won, 32 MiB 5.0-5.4 against 6.2 ms) */
    spmd__block_layout layout = {1, bytes, 0, NULL};
    for (int j = 0; j < a; j++)
        layout.outer *= (size_t)in->shape[j];
    if (layout.outer == 1 && c.nl == 1) /* the process's one block, as fn left it */
        layout.own = in->data;
    layout.run = bytes / (layout.outer ? layout.outer : 1);
    layout.stride = layout.run * (size_t)c.n;
    /* (runs of a few elements, as a stack at a new last axis makes, MPI moves slower than the
     * staging copy). Within a machine whose processes all made their rings, whole blocks
     * go there from a few pages on (streamed through the rings past 8 KiB a message, through
     * MPI's shared memory below): two copies where the staged exchange makes four
     * (measured at 2 x 1, 32 KiB 4.0 against 5.3 us, 64 KiB 5.8 against 10.8; at 8-16 KiB
     * the agreement's round trip costs more than the copies saved). Two processes of one
     * device each, in rank order, at any size, anywhere: their one message each way goes from
     * and into the output, the scratch's copies saved (with more devices the extra barrier
     * and copy cost more: 2 x 2, 64 B-4 KiB, 7.1-8.7 against 8.2-9.8 us). */
    size_t direct_above = layout.outer == 1 && g->comm && spmd__comm_on_linked_machine(g->comm)
                              ? SPMD__COMM_LINKED_GATHER_BYTES
                              : SPMD__COMM_COMBINED_BYTES;
    if (layout.outer == 1 && g->comm && g->num_ranks == 2 && g->rank_members[0] == 1 &&
        g->rank_members[1] == 1 && m.pos[g->member_rank[0] == 0 ? 0 : 1] == 0)
        direct_above = 0;
    int direct = g->comm && (size_t)c.n * bytes > direct_above &&
                 (layout.outer == 1 || layout.run >= 256) && blocks_on_host(ctx);
    size_t stack_first[STACK_RANKS], stack_table[STACK_RANKS];
    size_t *first = direct ? rank_table(stack_first, g->num_ranks) : NULL;
    if (direct && !first) {
        spmd__coll_members_free(&m);
        return spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    }
    if (direct && !ranks_contiguous(&c, &m, first, 0)) {
        free_rank_table(first, stack_first);
        first = NULL;
        direct = 0;
    }
    if (g->comm && !direct) {
        c.scratch_need[0] = (size_t)c.nl * bytes;
        c.scratch_need[1] = (size_t)c.n * bytes;
    }
    st = spmd__coll_arrive(&c, in->data, out->data, NULL);
    if (st != SPMD_OK) {
        free_rank_table(first, stack_first);
        spmd__coll_members_free(&m);
        return st;
    }
    if (direct) {
        /* Each member places its block in the first member's output, MPI gathers the other
         * processes' blocks there in place, and the other members copy the whole of it. */
        spmd_block root = *out;
        root.data = g->slots[0].out;
        copier host = {ctx, NULL};
        (void)place_gathered(&host, &root, in->data, in, a, tiled, c.pos);
        st = spmd__coll_barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0) {
            size_t *counts = rank_table(stack_table, g->num_ranks);
            if (!counts)
                st = spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
            for (int r = 0; counts && r < g->num_ranks; r++)
                counts[r] = (size_t)g->rank_members[r];
            if (st == SPMD_OK) {
                spmd__agreement ag = spmd__coll_agreement(&c);
                spmd__wait w = spmd__coll_cross_wait(&c);
                st = spmd__coll_crossed(&c,
                                        spmd__comm_checked_allgather_placed(
                                            g->comm, &ag, root.data, &layout, counts, first, &w),
                                        &w);
            }
            free_rank_table(counts, stack_table);
        }
        if (st == SPMD_OK)
            st = spmd__coll_barrier(&c, 0);
        if (st == SPMD_OK && c.li != 0)
            spmd__copy_cached(out->data, root.data, spmd__block_bytes(out));
        if (st == SPMD_OK && c.nl > 1) /* the first member's output is read until here */
            st = spmd__coll_barrier(&c, 0);
    } else if (!g->comm) {
        const void *ptrs[2] = {out->data, in->data}; /* peers check their own */
        copier cp = spmd__coll_copier_for(ctx, spmd__block_bytes(out), 2, ptrs);
        int rc = 0;
        for (int k = 0; k < c.n && !rc; k++)
            rc = place_gathered(&cp, out, g->slots[m.local_of[k]].in, in, a, tiled, m.pos[k]);
        st = spmd__coll_copier_finish(&cp, rc);
        if (st == SPMD_OK) /* the others' inputs stay untouched until everyone has read them */
            st = spmd__coll_barrier(&c, 0);
        else
            st = spmd__coll_fail(&c, st);
    } else {
        spmd__copy_cached((char *)g->scratch[0] + (size_t)c.li * bytes, in->data, bytes);
        st = spmd__coll_barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0) {
            size_t *counts = rank_table(stack_table, g->num_ranks);
            st = counts ? SPMD_OK
                        : spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
            for (int r = 0; st == SPMD_OK && r < g->num_ranks; r++)
                counts[r] = (size_t)g->rank_members[r] * bytes;
            if (st == SPMD_OK) {
                spmd__agreement ag = spmd__coll_agreement(&c);
                spmd__wait w = spmd__coll_cross_wait(&c);
                st = spmd__coll_crossed(&c,
                                        spmd__comm_checked_allgatherv(g->comm, &ag, g->scratch[0],
                                                                      g->scratch[1], counts, &w),
                                        &w);
            }
            free_rank_table(counts, stack_table);
        }
        if (st == SPMD_OK)
            st = spmd__coll_barrier(&c, 0);
        if (st == SPMD_OK) {
            size_t *roff = rank_table(stack_table, g->num_ranks);
            if (!roff) {
                st = spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
            } else {
                rank_offsets(g, roff);
                copier host = {ctx, NULL}; /* the scratch is host memory */
                for (int k = 0; k < c.n; k++) {
                    size_t slot = roff[g->member_rank[k]] + (size_t)g->member_index[k];
                    (void)place_gathered(&host, out, (char *)g->scratch[1] + slot * bytes, in, a,
                                         tiled, m.pos[k]);
                }
                free_rank_table(roff, stack_table);
            }
        }
    }
    free_rank_table(first, stack_first);
    spmd__coll_members_free(&m);
    return st;
}

/* ---- many blocks in one collective (a pytree's leaves) ---- */

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
        return st == SPMD_OK ? SPMD_OK : spmd__coll_fail_args(ctx, st);
    }
    coll c;
    st = spmd__coll_begin(ctx, axes, OP_ALL_GATHER, &in[0], NULL, &c);
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
        seg += spmd__block_bytes(&in[i]);
    }
    c.fingerprint = h;
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        int a = axis_of[i], rank_out = tiled ? in[i].ndim : in[i].ndim + 1;
        int64_t want[SPMD_MAX_RANK + 1];
        for (int j = 0, k = 0; j < rank_out; j++)
            want[j] =
                tiled ? in[i].shape[j] * (j == a ? c.n : 1) : (j == a ? c.n : in[i].shape[k++]);
        st = spmd__coll_check_out_shape(&out[i], in[i].dtype, rank_out, want, "all_gather");
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
    members m = {NULL, NULL, NULL, NULL, {0}};
    if (st == SPMD_OK)
        st = spmd__coll_members_init(&c, &m);
    if (st != SPMD_OK) {
        free(axis_of);
        return spmd__coll_fail(&c, st);
    }
    st = spmd__coll_arrive(&c, in, out, NULL);
    copier host = {ctx, NULL};
    if (st == SPMD_OK && !g->comm) {
        int rc = 0;
        for (int i = 0; i < n && !rc; i++) {
            const void *ptrs[2] = {out[i].data, in[i].data};
            copier cp = spmd__coll_copier_for(ctx, spmd__block_bytes(&out[i]), 2, ptrs);
            for (int k = 0; k < c.n && !rc; k++) {
                const spmd_block *theirs = g->slots[m.local_of[k]].in;
                rc = place_gathered(&cp, &out[i], theirs[i].data, &in[i], axis_of[i], tiled,
                                    m.pos[k]);
            }
            rc = (int)spmd__coll_copier_finish(&cp, rc);
        }
        st = rc ? spmd__coll_fail(&c, (spmd_status)rc) : spmd__coll_barrier(&c, 0);
    } else if (st == SPMD_OK) {
        /* this member's blocks packed in its segment; one all-gather of the segments */
        char *mine = (char *)g->scratch[0] + (size_t)c.li * seg;
        for (int i = 0; i < n; i++) {
            spmd__copy_cached(mine, in[i].data, spmd__block_bytes(&in[i]));
            mine += spmd__block_bytes(&in[i]);
        }
        st = spmd__coll_barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0) {
            size_t *counts = malloc((size_t)g->num_ranks * sizeof *counts);
            if (!counts)
                st = spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
            for (int r = 0; counts && r < g->num_ranks; r++)
                counts[r] = (size_t)g->rank_members[r] * seg;
            if (st == SPMD_OK) {
                spmd__agreement ag = spmd__coll_agreement(&c);
                spmd__wait w = spmd__coll_cross_wait(&c);
                st = spmd__coll_crossed(&c,
                                        spmd__comm_checked_allgatherv(g->comm, &ag, g->scratch[0],
                                                                      g->scratch[1], counts, &w),
                                        &w);
            }
            free(counts);
        }
        if (st == SPMD_OK)
            st = spmd__coll_barrier(&c, 0);
        size_t *roff = st == SPMD_OK ? malloc((size_t)g->num_ranks * sizeof *roff) : NULL;
        if (st == SPMD_OK && !roff)
            st = spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
        if (st == SPMD_OK) {
            rank_offsets(g, roff);
            for (int k = 0; k < c.n; k++) {
                const char *theirs = (const char *)g->scratch[1] +
                                     (roff[g->member_rank[k]] + (size_t)g->member_index[k]) * seg;
                for (int i = 0; i < n; i++) {
                    (void)place_gathered(&host, &out[i], theirs, &in[i], axis_of[i], tiled,
                                         m.pos[k]);
                    theirs += spmd__block_bytes(&in[i]);
                }
            }
        }
        free(roff);
    }
    spmd__coll_members_free(&m);
    free(axis_of);
    return st;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_all_gather(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                            int axis, int tiled)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd_all_gather_checked(ctx, in, out, axes, axis, tiled, NULL), 1,
                            out),
        "spmd_all_gather");
}

spmd_status spmd_all_gather_invariant(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                      const char *axes, int axis, int tiled)
{
    spmd_status st = spmd_all_gather_checked(ctx, in, out, axes, axis, tiled, NULL);
    if (st == SPMD_OK)                  /* ctx is one to read */
        ctx->pending_proof.varying = 0; /* JAX's Varying -> Invariant */
    return spmd__error_in(spmd__coll_finished(ctx, st, 1, out), "spmd_all_gather_invariant");
}

spmd_status spmd_all_gather_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                   const char *axes, int axis, int tiled,
                                   const spmd_axis_groups *groups)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd_all_gather_checked(ctx, in, out, axes, axis, tiled, groups),
                            1, out),
        "spmd_all_gather_groups");
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
    if (st == SPMD_OK)
        ctx->pending_proof.varying_by = "all_gather_many";
    return spmd__error_in(spmd__coll_finished(ctx, st, n, out), "spmd_all_gather_many");
}
