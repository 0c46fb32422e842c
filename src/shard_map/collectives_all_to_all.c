/*
 * all_to_all and its _groups form (the same paths); all_to_all_many and pswapaxes_many (chunk
 * g of every block packed into row g, one untiled all_to_all); ragged_all_to_all (a pmax of
 * the longest slice, then one untiled all_to_all of padded rows).
 *   in process: each member assembles its output from the local inputs' chunks;
 *   between processes: the chunks staged in scratch and one alltoallv by the first local
 *     member, or for large host blocks one exchange of pieces straight between the blocks.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "array/copy.h"
#include "shard_map/collective_frame.h"
#include "runtime/base/stream_copy.h"

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

/* 1 when a chunk of `extent` with these strides is one run of consecutive elements. */
static int chunk_is_run(int cdims, const int64_t *extent, const int64_t *strides)
{
    int64_t next = 1;
    for (int j = cdims - 1; j >= 0; j--) {
        if (extent[j] > 1 && strides[j] != next)
            return 0;
        next *= extent[j];
    }
    return 1;
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

/* The exchange of `straight` chunks (one member per process, each chunk a run): to each other
 * member, chunk pos[k] of this input; from it, slot pos[k] of this output. */
static spmd_status a2a_exchange_straight(coll *c, const members *m, const spmd_block *in,
                                         const spmd_block *out, const a2a *L)
{
    enum { STACK_MESSAGES = 16 };
    const spmd__group *g = c->g;
    size_t elem = spmd_dtype_size(in->dtype), cbytes = (size_t)L->chunk_elems * elem;
    spmd__message stack[2 * STACK_MESSAGES];
    spmd__message *msg =
        c->n <= STACK_MESSAGES ? stack : malloc(2 * (size_t)c->n * sizeof(spmd__message));
    if (!msg)
        return spmd__coll_fail(c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
    spmd__message *sends = msg, *recvs = msg + c->n;
    int me = g->member_rank[m->member_at[c->pos]], nmsg = 0;
    for (int k = 0; k < c->n; k++) {
        int r = g->member_rank[k];
        if (r == me)
            continue;
        sends[nmsg] =
            (spmd__message){r, (char *)in->data + (size_t)(m->pos[k] * L->src_step) * elem, cbytes};
        recvs[nmsg++] = (spmd__message){
            r, (char *)out->data + (size_t)(m->pos[k] * L->dst_step) * elem, cbytes};
    }
    spmd__agreement a = spmd__coll_agreement(c);
    spmd__wait w = spmd__coll_cross_wait(c);
    spmd_status st = spmd__coll_crossed(
        c, spmd__comm_paired_exchange(g->comm, &a, nmsg, sends, nmsg, recvs, &w), &w);
    if (msg != stack)
        free(msg);
    return st;
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
        return spmd__coll_fail(c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
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
    spmd__agreement a = spmd__coll_agreement(c);
    spmd__wait w = spmd__coll_cross_wait(c);
    spmd_status st = spmd__coll_crossed(
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
    return spmd__coll_check_out_shape(out, in->dtype, in->ndim, want, "all_to_all");
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
        st = spmd__coll_group_of(ctx, axes, axis_ids, &naxes, &group_size);
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
        return spmd__coll_fail_args(ctx, st);
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
        return spmd__coll_fail_args(ctx, st);
    }
    move_chunks(layouts, in, n, send.data, row, group_size, 1);
    ctx->packed_layout = layout | 1;
    st = spmd_all_to_all_checked(ctx, &send, &recv, axes, 0, 0, 0, NULL);
    ctx->packed_layout = 0;
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
        return spmd__coll_fail_args(ctx, st);
    coll c;
    SPMD_CHECK(spmd__coll_begin(ctx, axes, OP_ALL_TO_ALL, in, groups, &c));
    c.fingerprint = mix(mix(mix(c.fingerprint, (uint64_t)s), (uint64_t)cc), (uint64_t)tiled);
    st = check_a2a_shapes(in, out, s, cc, c.n, tiled);
    if (st != SPMD_OK)
        return spmd__coll_fail(&c, st);

    a2a L;
    a2a_layout(in, out, s, cc, c.n, tiled, &L);
    size_t elem = spmd_dtype_size(in->dtype), cbytes = (size_t)L.chunk_elems * elem;
    size_t in_bytes = spmd__block_bytes(in);
    spmd__group *g = c.g;
    /* Large: some process sends more than SPMD__COMM_COMBINED_BYTES, or a message between two
     * processes (their members' chunks for each other) outgrows a paired exchange's (every
     * process finds the same from the group's tables and the comm, and so picks the same
     * protocol). Large exchanges of host blocks go straight from the inputs into the outputs. */
    int large = 0, most = 0, next = 0; /* the two most members a process holds */
    for (int r = 0; g->comm && r < g->num_ranks; r++) {
        int k = g->rank_members[r];
        large |= (size_t)k * (size_t)(c.n - k) * cbytes > SPMD__COMM_COMBINED_BYTES;
        next = k > most ? most : k > next ? k : next;
        most = k > most ? k : most;
    }
    large |= g->comm && (size_t)most * (size_t)next * cbytes > paired_max_bytes(ctx, g->comm);
    int direct = large && blocks_on_host(ctx);
    /* Small exchanges between processes of one member each whose chunks are runs of the input
     * and of the output: each message goes from the input, and lands in the output once its
     * sender's check is read, without the scratch's two copies (the same messages as the
     * scratch's: either way on either side). Medians of 4-5 runs at 2 x 1, ratio to
     * MPI_Alltoall: 1-4 KiB 0.77-0.78 -> 0.88-0.89, 8-64 KiB 0.90-1.55 -> 1.08-1.77; over TCP,
     * 32 KiB 0.84 -> 0.96, 64 KiB 0.84 -> 0.94. Within an uncrowded machine, messages beyond
     * 32 KiB are large: read straight or through the slots, as measured (ring_stream_mpi.c). */
    int straight = g->comm && !large && c.nl == 1 && c.n == g->num_ranks && in->data != out->data &&
                   blocks_on_host(ctx) && chunk_is_run(L.cdims, L.extent, L.src_strides) &&
                   chunk_is_run(L.cdims, L.extent, L.dst_strides);
    if (g->comm && !direct && !straight) {
        c.scratch_need[0] = (size_t)c.nl * (size_t)c.n * cbytes; /* to other processes */
        c.scratch_need[1] = (size_t)c.nl * (size_t)c.n * cbytes; /* from them */
    }
    SPMD_CHECK(spmd__coll_arrive(&c, in->data, out->data, NULL));
    members m;
    st = spmd__coll_members_init(&c, &m);
    if (st != SPMD_OK)
        return spmd__coll_fail(&c, st);
    /* An output over its own input would be overwritten while members still read it: the
     * inputs are then read from copies. */
    int in_place = 0;
    for (int i = 0; i < c.nl; i++)
        in_place |= g->slots[i].in == g->slots[i].out;
    if (in_place) {
        if (c.li == 0)
            st = spmd__group_scratch(g, 2, (size_t)c.nl * in_bytes);
        st = st == SPMD_OK ? spmd__coll_barrier(&c, 0) : spmd__coll_fail(&c, st);
        if (st == SPMD_OK) {
            spmd__copy_cached((char *)g->scratch[2] + (size_t)c.li * in_bytes, in->data, in_bytes);
            st = spmd__coll_barrier(&c, 0);
        }
        if (st != SPMD_OK) {
            spmd__coll_members_free(&m);
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
    } else if (straight) {
        st = a2a_exchange_straight(&c, &m, in, out, &L);
    } else if (g->comm) {
        /* To rank r: for each of its members (index order), this process's chunks for it,
         * one per local member (local order). Each device packs its own input's chunks. */
        sc = calloc(4 * (size_t)g->num_ranks, sizeof *sc);
        if (!sc) {
            spmd__coll_members_free(&m);
            return spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
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
        st = spmd__coll_barrier(&c, 0);
        if (st == SPMD_OK && c.li == 0) {
            spmd__agreement a = spmd__coll_agreement(&c);
            spmd__wait w = spmd__coll_cross_wait(&c);
            st = spmd__coll_crossed(&c,
                                    spmd__comm_checked_alltoallv(g->comm, &a, g->scratch[0], sc,
                                                                 g->scratch[1], rc, large, &w),
                                    &w);
        }
        if (st == SPMD_OK)
            st = spmd__coll_barrier(&c, 0);
    }
    /* Assemble: slot h of this device's output is chunk `pos` of member h's input (the
     * direct exchange wrote the other processes' slots already). The straight exchange's one
     * local member copies its own chunk, a run of host memory on both sides, as one piece
     * (medians of 6 runs at 2 x 1 against the copier: 8-512 B 0.59-0.69 -> 0.70-0.79 of MPI). */
    if (straight) {
        if (st == SPMD_OK)
            spmd__copy_cached((char *)out->data + (size_t)(c.pos * L.dst_step) * elem,
                              (const char *)in->data + (size_t)(c.pos * L.src_step) * elem, cbytes);
        if (st == SPMD_OK)
            st = spmd__coll_barrier(&c, 0);
        spmd__coll_members_free(&m);
        return st;
    }
    const void *ptrs[2] = {out->data, SOURCE(c.li)};
    copier cp = spmd__coll_copier_for(ctx, spmd__block_bytes(out), 2, ptrs);
    int rc = 0;
    for (int k = 0; st == SPMD_OK && !rc && k < c.n; k++) {
        char *dst = (char *)out->data + (size_t)(m.pos[k] * L.dst_step) * elem;
        int r = g->member_rank[k];
        if (r == me) {
            const char *src = SOURCE(m.local_of[k]) + (size_t)(c.pos * L.src_step) * elem;
            rc = spmd__copy_strided_with(spmd__coll_copy_rows, &cp, elem, L.cdims, L.extent, dst,
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
        st = spmd__coll_copier_finish(&cp, rc);
        if (st != SPMD_OK)
            st = spmd__coll_fail(&c, st);
    }
    /* local inputs stay valid until every member has read them */
    if (st == SPMD_OK || (direct && c.li != 0))
        st = spmd__coll_barrier(&c, 0);
    free(sc);
    spmd__coll_members_free(&m);
    return st;
}

/* ---- ragged all_to_all (JAX's lax.ragged_all_to_all) ---- */

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
        spmd__coll_shape_text(operand, a, sizeof a);
        spmd__coll_shape_text(output, b, sizeof b);
        return SPMD_ERROR(
            SPMD_ERR_SHAPE,
            "spmd_ragged_all_to_all: input and output shapes must be equal, except for "
            "the outermost dimension (and at least rank 1): operand is %s, output %s",
            a, b);
    }
    return spmd__coll_check_out_shape(out, output->dtype, output->ndim, output->shape,
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
        st = spmd__coll_group_of(ctx, axes, ids, &naxes, &n);
    int me = 0;
    if (st == SPMD_OK)
        st = spmd__axis_index_checked(ctx, axes, &me);
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
        return spmd__coll_fail_args(ctx, st);
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
        return spmd__coll_fail_args(ctx, st);
    }
    int64_t most = 0;
    for (int j = 0; j < n; j++)
        most = v[n + j] > most ? v[n + j] : most;
    *(int64_t *)mine.data = most;
    ctx->packed_layout = layout | 1;
    st = spmd__pmax_checked(ctx, &mine, &longest, axes, NULL);
    ctx->packed_layout = 0;
    st = spmd__coll_finished(ctx, st, 0, NULL); /* its trace record: the all_to_all makes its own */
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
        return spmd__coll_fail_args(ctx, st);
    }
    for (int j = 0; j < n; j++) {
        char *r = (char *)send.data + (size_t)j * row;
        ragged_header h = {v[2 * (size_t)n + j], v[n + j]};
        size_t bytes = (size_t)h.rows * row_bytes;
        memcpy(r, &h, sizeof h);
        spmd__copy_cached(r + sizeof h, (const char *)operand->data + (size_t)v[j] * row_bytes,
                          bytes);
        memset(r + sizeof h + bytes, 0, row - sizeof h - bytes); /* no stray bytes on the wire */
    }
    ctx->packed_layout = layout | 1;
    st = spmd_all_to_all_checked(ctx, &send, &recv, axes, 0, 0, 0, NULL);
    ctx->packed_layout = 0;
    if (st == SPMD_OK && out->data != output->data)
        memmove(out->data, output->data, spmd__block_bytes(output));
    for (int h = 0; st == SPMD_OK && h < n; h++) {
        const char *r = (const char *)recv.data + (size_t)h * row;
        ragged_header head;
        memcpy(&head, r, sizeof head);
        const int64_t *recv_sizes_v = v + 3 * (size_t)n;
        if (head.rows != recv_sizes_v[h] || head.out_offset < 0 ||
            head.out_offset > output->shape[0] - head.rows)
            st = spmd__coll_fail_args(
                ctx, SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                                "spmd_ragged_all_to_all: member %d of the group sends %lld "
                                "rows to this one (member %d) but recv_sizes[%d] is "
                                "%lld; each recv_sizes[h] must equal member h's "
                                "send_sizes for this member",
                                h, (long long)head.rows, me, h, (long long)recv_sizes_v[h]));
        else if (head.rows > 0)
            spmd__copy_cached((char *)out->data + (size_t)head.out_offset * row_bytes,
                              r + sizeof head, (size_t)head.rows * row_bytes);
    }
    free(v);
    return st;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_all_to_all(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                            int split_axis, int concat_axis, int tiled)
{
    return spmd__error_in(
        spmd__coll_finished(
            ctx, spmd_all_to_all_checked(ctx, in, out, axes, split_axis, concat_axis, tiled, NULL),
            1, out),
        "spmd_all_to_all");
}

spmd_status spmd_all_to_all_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                                 const char *axes, const int *split_axes, const int *concat_axes,
                                 int tiled)
{
    spmd_status st = spmd_all_to_all_many_checked(ctx, n, in, out, axes, split_axes, concat_axes,
                                                  tiled, "spmd_all_to_all_many");
    return spmd__error_in(spmd__coll_finished_many(ctx, st, n, out, "all_to_all_many"),
                          "spmd_all_to_all_many");
}

spmd_status spmd_pswapaxes_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                                const char *axes, const int *axis)
{
    spmd_status st =
        spmd_all_to_all_many_checked(ctx, n, in, out, axes, axis, axis, 0, "spmd_pswapaxes_many");
    return spmd__error_in(spmd__coll_finished_many(ctx, st, n, out, "pswapaxes_many"),
                          "spmd_pswapaxes_many");
}

spmd_status spmd_ragged_all_to_all(spmd_ctx *ctx, const spmd_block *operand,
                                   const spmd_block *output, const spmd_block *input_offsets,
                                   const spmd_block *send_sizes, const spmd_block *output_offsets,
                                   const spmd_block *recv_sizes, spmd_block *out, const char *axes)
{
    spmd_status st = spmd_ragged_all_to_all_checked(ctx, operand, output, input_offsets, send_sizes,
                                                    output_offsets, recv_sizes, out, axes);
    return spmd__error_in(spmd__coll_finished_many(ctx, st, 1, out, "ragged_all_to_all"),
                          "spmd_ragged_all_to_all");
}

spmd_status spmd_all_to_all_groups(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                   const char *axes, int split_axis, int concat_axis, int tiled,
                                   const spmd_axis_groups *groups)
{
    return spmd__error_in(
        spmd__coll_finished(
            ctx,
            spmd_all_to_all_checked(ctx, in, out, axes, split_axis, concat_axis, tiled, groups), 1,
            out),
        "spmd_all_to_all_groups");
}
