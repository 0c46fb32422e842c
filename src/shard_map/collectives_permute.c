/*
 * ppermute (ppermute_many packs its blocks into one), pbroadcast, and psend/precv (a psend
 * keeps a copy of its block; its precv runs the ppermute). No axis_index_groups here.
 *   in process: each destination copies its source's block (from copies of the inputs when
 *     some device permutes in place);
 *   between processes: the first local member sends and receives the blocks that cross, point
 *     to point (paired when small and the pairs link every process); pbroadcast: an
 *     allgatherv in which only the source's process has bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shard_map/collective_frame.h"
#include "runtime/base/stream_copy.h"

/* ---- ppermute ---- */

/* Groups of up to this many positions keep a ppermute's tables on the stack: a small exchange's
 * frame allocates nothing. */
#define STACK_POSITIONS 64

/* A pair's index as JAX reads it (-1 is the last); in range already in the usual case. */
static int wrap_position(int i, int n) { return i >= 0 && i < n ? i : ((i % n) + n) % n; }

static spmd_status check_pairs(const int *pairs, int npairs, int n, int *src_of, uint64_t *hash)
{
    SPMD_REQUIRE(npairs >= 0 && (npairs == 0 || pairs != NULL), SPMD_ERR_INVALID_ARGUMENT,
                 "ppermute: pairs is NULL or npairs (%d) is negative", npairs);
    int stack_seen[STACK_POSITIONS];
    int *seen_src = n <= STACK_POSITIONS ? stack_seen : malloc((size_t)n * sizeof *seen_src);
    SPMD_REQUIRE(seen_src != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    for (int p = 0; p < n; p++)
        src_of[p] = -1, seen_src[p] = 0;
    uint64_t h = 0;
    spmd_status st = SPMD_OK;
    for (int i = 0; i < npairs && st == SPMD_OK; i++) {
        int s = wrap_position(pairs[2 * i], n), d = wrap_position(pairs[2 * i + 1], n);
        if (seen_src[s] || src_of[d] >= 0)
            st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                            "ppermute sources and destinations must be unique, got pair %d "
                            "(%d -> %d) repeating a %s",
                            i, pairs[2 * i], pairs[2 * i + 1],
                            seen_src[s] ? "source" : "destination");
        seen_src[s] = 1;
        src_of[d] = s;
        h = mix(mix(h, (uint64_t)s), (uint64_t)d);
    }
    if (seen_src != stack_seen)
        free(seen_src);
    *hash = h;
    return st;
}

/* A loop, not memcmp: a ring's pairs are a few ints, fewer than memcmp's call costs. */
static int same_ints(const int *a, const int *b, int count)
{
    for (int i = 0; i < count; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/* check_pairs, or what it found last on this device for the same pairs over as many positions */
static spmd_status check_pairs_once(spmd_ctx *ctx, const int *pairs, int npairs, int n, int *src_of,
                                    uint64_t *hash)
{
    spmd__checked_pairs *last = &ctx->checked_pairs;
    int cacheable = n <= SPMD__CTX_PAIRS && npairs > 0 && npairs <= SPMD__CTX_PAIRS && pairs;
    if (cacheable && ctx->checked_pairs_valid && last->n == n && last->npairs == npairs &&
        same_ints(last->pairs, pairs, 2 * npairs)) {
        memcpy(src_of, last->src_of, (size_t)n * sizeof *src_of);
        *hash = last->hash;
        return SPMD_OK;
    }
    spmd_status st = check_pairs(pairs, npairs, n, src_of, hash);
    ctx->checked_pairs_valid = cacheable && st == SPMD_OK;
    if (ctx->checked_pairs_valid) {
        last->n = n;
        last->npairs = npairs;
        memcpy(last->pairs, pairs, 2 * (size_t)npairs * sizeof *pairs);
        memcpy(last->src_of, src_of, (size_t)n * sizeof *src_of);
        last->hash = *hash;
        last->group = NULL;
    }
    return st;
}

static spmd_status check_mesh_order(const coll *c)
{
    for (int k = 1; k < c->naxes; k++)
        SPMD_REQUIRE(c->axes[k] > c->axes[k - 1], SPMD_ERR_INVALID_ARGUMENT,
                     "%s: axes must be named in the same order as the mesh declares them "
                     "('%s' comes before '%s' in the mesh)",
                     spmd__coll_op_names[c->op], c->mesh->names[c->axes[k]],
                     c->mesh->names[c->axes[k - 1]]);
    return SPMD_OK;
}

/* 1 when the pairs link every process of the group to every other, through messages between
 * processes (a ring does): a check carried by each message then reaches them all, and no
 * agreement of its own is needed. Every process computes the same from the same pairs. */
static int pairs_connect_processes(const coll *c, const members *m, const int *src_of)
{
    int n = c->g->num_ranks, stack_root[2 * STACK_POSITIONS], parts = n;
    int *root = n <= STACK_POSITIONS ? stack_root : malloc((size_t)n * 2 * sizeof *root);
    if (!root)
        return 0;
    int *touched = root + n;
    for (int r = 0; r < n; r++)
        root[r] = r, touched[r] = 0;
    for (int dpos = 0; dpos < c->n; dpos++) {
        if (src_of[dpos] < 0)
            continue;
        int a = c->g->member_rank[m->member_at[src_of[dpos]]];
        int b = c->g->member_rank[m->member_at[dpos]];
        if (a == b)
            continue;
        touched[a] = touched[b] = 1;
        while (root[a] != a)
            a = root[a] = root[root[a]];
        while (root[b] != b)
            b = root[b] = root[root[b]];
        if (a != b) {
            root[a] = b;
            parts--;
        }
    }
    int all = parts == 1;
    for (int r = 0; r < n; r++)
        all &= touched[r];
    if (root != stack_root)
        free(root);
    return all;
}

/* pairs_connect_processes for the pairs check_pairs_once just checked, found once per group */
static int connects_once(spmd_ctx *ctx, const coll *c, const members *m, const int *src_of)
{
    spmd__checked_pairs *last = &ctx->checked_pairs;
    if (ctx->checked_pairs_valid && last->group == c->g)
        return last->connects;
    int connects = pairs_connect_processes(c, m, src_of);
    if (ctx->checked_pairs_valid) {
        last->group = c->g;
        last->connects = connects;
    }
    return connects;
}

/* in and out are blocks, out of in's shape and dtype (pbroadcast, ppermute); a failure aborts
 * the call, as other argument errors do. */
static spmd_status check_out_like_in(spmd_ctx *ctx, const spmd_block *in, const spmd_block *out,
                                     const char *name)
{
    spmd_status st = spmd__check_block(in, "in", name);
    if (st == SPMD_OK && spmd__block_like_checked(out, in))
        return SPMD_OK; /* the usual case */
    if (st == SPMD_OK)
        st = spmd__check_block(out, "out", name);
    if (st == SPMD_OK)
        st = spmd__coll_check_out_shape(out, in->dtype, in->ndim, in->shape, name);
    return st == SPMD_OK ? SPMD_OK : spmd__coll_fail_args(ctx, st);
}

/* ---- pbroadcast ---- */

static spmd_status spmd_pbroadcast_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                           const char *axes, int source)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pbroadcast"));
    SPMD_CHECK(check_out_like_in(ctx, in, out, "pbroadcast"));
    spmd_status st = SPMD_OK;
    coll c;
    SPMD_CHECK(spmd__coll_begin(ctx, axes, OP_PBROADCAST, in, NULL, &c));
    if (source < 0 || source >= c.n)
        return spmd__coll_fail(&c,
                               SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                                          "pbroadcast: source %d is out of range for a group of %d "
                                          "positions over the axes given; use 0..%d",
                                          source, c.n, c.n - 1));
    st = check_mesh_order(&c);
    if (st != SPMD_OK)
        return spmd__coll_fail(&c, st);
    /* members that name another source never pair with this one */
    c.fingerprint = mix(c.fingerprint, (uint64_t)source);
    size_t bytes = spmd__block_bytes(in);
    spmd__group *g = c.g;
    members m;
    st = spmd__coll_members_init(&c, &m);
    if (st != SPMD_OK)
        return spmd__coll_fail(&c, st);
    int from = m.member_at[source], local_from = m.local_of[from];
    if (g->comm)
        c.scratch_need[0] = bytes ? bytes : 1;
    st = spmd__coll_arrive(&c, in->data, out->data, NULL);
    if (st != SPMD_OK) {
        spmd__coll_members_free(&m);
        return st;
    }
    const void *src = local_from >= 0 ? g->slots[local_from].in : NULL;
    if (g->comm) {
        /* the first member of each process receives the source's block (its process sends
         * it): an all-gather in which only the source's process has bytes */
        if (c.li == 0) {
            size_t *counts = calloc((size_t)g->num_ranks, sizeof *counts);
            st = counts ? SPMD_OK
                        : spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
            if (st == SPMD_OK) {
                counts[g->member_rank[from]] = bytes;
                if (src)
                    spmd__copy_cached(g->scratch[0], src, bytes);
                spmd__agreement ag = spmd__coll_agreement(&c);
                spmd__wait w = spmd__coll_cross_wait(&c);
                st = spmd__coll_crossed(
                    &c,
                    spmd__comm_checked_allgatherv(g->comm, &ag, NULL, g->scratch[0], counts, &w),
                    &w);
            }
            free(counts);
        }
        if (st == SPMD_OK)
            st = spmd__coll_barrier(&c, 0);
        src = g->scratch[0];
    }
    if (st == SPMD_OK && out->data != src)
        spmd__copy_cached(out->data, src, bytes);
    if (st == SPMD_OK && c.nl > 1) /* the source's block (or the scratch) is read until here */
        st = spmd__coll_barrier(&c, 0);
    spmd__coll_members_free(&m);
    return st;
}

static spmd_status spmd_ppermute_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                         const char *axes, const int *pairs, int npairs);

/* ppermute of n blocks: packed into one byte block, permuted once, unpacked. */
static spmd_status spmd_ppermute_many_checked(spmd_ctx *ctx, int n, const spmd_block *in,
                                              spmd_block *out, const char *axes, const int *pairs,
                                              int npairs)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_ppermute_many"));
    spmd_status st = SPMD_OK;
    if (n < 0 || (n > 0 && (!in || !out)))
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "ppermute of many blocks: n is %d, in %s, out %s; pass n >= 0 and arrays "
                        "of n blocks",
                        n, in ? "given" : "NULL", out ? "given" : "NULL");
    size_t total = 0;
    uint64_t layout = mix(0x70706d616e79ull, (uint64_t)n); /* "ppmany" */
    for (int i = 0; i < n && st == SPMD_OK; i++) {
        st = spmd__check_block(&in[i], "in", "ppermute");
        if (st == SPMD_OK)
            st = spmd__check_block(&out[i], "out", "ppermute");
        if (st == SPMD_OK)
            st = spmd__coll_check_out_shape(&out[i], in[i].dtype, in[i].ndim, in[i].shape,
                                            "ppermute");
        if (st != SPMD_OK) {
            char detail[SPMD__MESSAGE_CAPACITY];
            spmd__copy_text(detail, sizeof detail, spmd_last_error());
            st = SPMD_ERROR(st, "block %d of %d: %s", i, n, detail);
        }
        total += st == SPMD_OK ? spmd__block_bytes(&in[i]) : 0;
        layout = mix_block(layout, &in[i]);
    }
    if (st != SPMD_OK)
        return spmd__coll_fail_args(ctx, st);
    if (n == 0)
        return SPMD_OK;       /* an empty tree: no collective, as in JAX */
    st = spmd__ctx_sync(ctx); /* kernels fn queued may still be writing the blocks */
    int64_t shape[1] = {(int64_t)total};
    spmd_block send, recv;
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_U8, &send);
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, shape, SPMD_DTYPE_U8, &recv);
    if (st != SPMD_OK)
        return spmd__coll_fail_args(ctx, st);
    for (size_t i = 0, at = 0; i < (size_t)n; i++) {
        spmd__copy_cached((char *)send.data + at, in[i].data, spmd__block_bytes(&in[i]));
        at += spmd__block_bytes(&in[i]);
    }
    ctx->packed_layout = layout | 1;
    st = spmd_ppermute_checked(ctx, &send, &recv, axes, pairs, npairs);
    ctx->packed_layout = 0;
    for (size_t i = 0, at = 0; st == SPMD_OK && i < (size_t)n; i++) {
        spmd__copy_cached(out[i].data, (const char *)recv.data + at, spmd__block_bytes(&out[i]));
        at += spmd__block_bytes(&out[i]);
    }
    return st;
}

/* The key of a psend / precv: its axes and its permutation as the group reads them (the
 * same whatever the text or the order of the pairs). */
static spmd_status send_key(spmd_ctx *ctx, const char *axes, const int *pairs, int npairs,
                            uint64_t *key)
{
    int ids[SPMD_MAX_MESH_AXES], naxes = 0, n = 0;
    SPMD_CHECK(spmd__coll_group_of(ctx, axes, ids, &naxes, &n));
    int stack_src_of[STACK_POSITIONS];
    int *src_of = n <= STACK_POSITIONS ? stack_src_of : malloc((size_t)n * sizeof *src_of);
    SPMD_REQUIRE(src_of != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    uint64_t pairs_hash = 0, h = mix(0x7073656e64ull, (uint64_t)naxes); /* "psend" */
    spmd_status st = check_pairs_once(ctx, pairs, npairs, n, src_of, &pairs_hash);
    for (int k = 0; k < naxes; k++)
        h = mix(h, (uint64_t)ids[k]);
    for (int p = 0; st == SPMD_OK && p < n; p++)
        h = mix(h, (uint64_t)(int64_t)src_of[p]);
    if (src_of != stack_src_of)
        free(src_of);
    *key = h;
    return st;
}

/* JAX's psend: this device's half of a ppermute, kept (a copy) until its precv. */
static spmd_status spmd_psend_checked(spmd_ctx *ctx, const spmd_block *in, const char *axes,
                                      const int *pairs, int npairs)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_psend"));
    SPMD_CHECK(spmd__check_block(in, "in", "spmd_psend"));
    SPMD_REQUIRE(axes != NULL, SPMD_ERR_INVALID_ARGUMENT, "spmd_psend: argument 'axes' is NULL");
    uint64_t key = 0;
    SPMD_CHECK(send_key(ctx, axes, pairs, npairs, &key));
    SPMD_REQUIRE(ctx->pending_sends < SPMD__PENDING_SENDS, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_psend: %d sends already wait for their spmd_precv on device %d; receive "
                 "them before sending more",
                 ctx->pending_sends, ctx->device_id);
    SPMD_CHECK(spmd__ctx_sync(ctx)); /* kernels fn queued may still be writing the block */
    spmd_block copy;
    int spare = -1; /* the smallest spare copy that holds it */
    for (int i = 0; i < ctx->spare_sends; i++)
        if (spmd__block_bytes(&ctx->spares[i]) >= spmd__block_bytes(in) &&
            (spare < 0 ||
             spmd__block_bytes(&ctx->spares[i]) < spmd__block_bytes(&ctx->spares[spare])))
            spare = i;
    if (spare >= 0) { /* reshaped over the spare's bytes: they are fn's until the call ends */
        copy = *in;
        copy.data = ctx->spares[spare].data;
        ctx->spares[spare] = ctx->spares[--ctx->spare_sends];
    } else {
        SPMD_CHECK(spmd_ctx_alloc(ctx, in->ndim, in->shape, in->dtype, &copy));
    }
    spmd__copy_cached(copy.data, in->data, spmd__block_bytes(in));
    ctx->sends[ctx->pending_sends++] = (spmd__pending_send){copy, key};
    return SPMD_OK;
}

/* JAX's precv: the oldest psend's ppermute, its result in out. */
static spmd_status spmd_precv_checked(spmd_ctx *ctx, spmd_block *out, const char *axes,
                                      const int *pairs, int npairs)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_precv"));
    /* a refused precv aborts the call: the other devices would wait in its ppermute */
    uint64_t key = 0;
    spmd_status st =
        axes ? send_key(ctx, axes, pairs, npairs, &key)
             : SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT, "spmd_precv: argument 'axes' is NULL");
    if (st == SPMD_OK && ctx->pending_sends == 0)
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "spmd_precv on device %d: no spmd_psend waits for it; call spmd_psend "
                        "with the block to send first (JAX: precv takes the token psend returns)",
                        ctx->device_id);
    else if (st == SPMD_OK && ctx->sends[0].key != key)
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "spmd_precv on device %d: its axes ('%s') or pairs differ from those of "
                        "the spmd_psend it receives (the oldest waiting); give both the same",
                        ctx->device_id, axes);
    if (st != SPMD_OK)
        return spmd__coll_fail_args(ctx, st);
    spmd_block sent = ctx->sends[0].block;
    ctx->pending_sends--;
    memmove(ctx->sends, ctx->sends + 1, (size_t)ctx->pending_sends * sizeof ctx->sends[0]);
    ctx->packed_layout = mix(0x7073656e64ull, 1) | 1; /* "psend": not a plain ppermute */
    st = spmd_ppermute_checked(ctx, &sent, out, axes, pairs, npairs);
    ctx->packed_layout = 0;
    ctx->pending_proof.varying_by = "precv";
    /* after a failure MPI may still read it: never reused */
    if (st == SPMD_OK && ctx->spare_sends < SPMD__PENDING_SENDS)
        ctx->spares[ctx->spare_sends++] = sent;
    return st;
}

static spmd_status spmd_ppermute_checked(spmd_ctx *ctx, const spmd_block *in, spmd_block *out,
                                         const char *axes, const int *pairs, int npairs)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_ppermute"));
    SPMD_CHECK(check_out_like_in(ctx, in, out, "ppermute"));
    spmd_status st = SPMD_OK;
    coll c;
    SPMD_CHECK(spmd__coll_begin(ctx, axes, OP_PPERMUTE, in, NULL, &c));
    int stack_src_of[STACK_POSITIONS];
    int *src_of = c.n <= STACK_POSITIONS ? stack_src_of : malloc((size_t)c.n * sizeof *src_of);
    uint64_t pairs_hash = 0;
    st = src_of ? check_mesh_order(&c) : SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == SPMD_OK)
        st = check_pairs_once(ctx, pairs, npairs, c.n, src_of, &pairs_hash);
    if (st != SPMD_OK) {
        if (src_of != stack_src_of)
            free(src_of);
        return spmd__coll_fail(&c, st);
    }
    c.fingerprint = mix(c.fingerprint, pairs_hash);
    size_t bytes = spmd__block_bytes(in);
    spmd__group *g = c.g;
    c.scratch_need[0] = (size_t)c.nl * bytes; /* inputs, when some device permutes in place */
    st = spmd__coll_arrive(&c, in->data, out->data, NULL);
    if (st != SPMD_OK) {
        if (src_of != stack_src_of)
            free(src_of);
        return st;
    }
    members m;
    st = spmd__coll_members_init(&c, &m);
    int in_place = 0;
    for (int i = 0; i < c.nl; i++)
        in_place |= g->slots[i].in == g->slots[i].out;
    /* Sources are read from copies when a destination overwrites its own input. */
    if (st == SPMD_OK && in_place) {
        spmd__copy_cached((char *)g->scratch[0] + (size_t)c.li * bytes, in->data, bytes);
        st = spmd__coll_barrier(&c, 0);
    }
#define SOURCE(local)                                                                              \
    (in_place ? (const char *)g->scratch[0] + (size_t)(local)*bytes : g->slots[local].in)
    if (st == SPMD_OK && g->comm && c.li == 0) {
        spmd__message stack_msgs[2 * SPMD__MEMBERS_INLINE];
        spmd__message *msgs =
            c.n <= SPMD__MEMBERS_INLINE ? stack_msgs : malloc(2 * (size_t)c.n * sizeof *msgs);
        if (st == SPMD_OK && !msgs)
            st = spmd__coll_fail(&c, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "out of memory"));
        if (st == SPMD_OK) {
            int nsend = 0, nrecv = 0;
            spmd__message *sends = msgs, *recvs = msgs + c.n;
            int my_rank = g->member_rank[m.member_at[c.pos]];
            for (int dpos = 0; dpos < c.n; dpos++) {
                int s = src_of[dpos];
                if (s < 0)
                    continue;
                int ms = m.member_at[s], md = m.member_at[dpos];
                int s_local = g->member_rank[ms] == my_rank,
                    d_local = g->member_rank[md] == my_rank;
                if (s_local && !d_local)
                    sends[nsend++] =
                        (spmd__message){g->member_rank[md], (void *)SOURCE(m.local_of[ms]), bytes};
                else if (!s_local && d_local)
                    recvs[nrecv++] =
                        (spmd__message){g->member_rank[ms], g->slots[m.local_of[md]].out, bytes};
            }
            /* between two processes both sides list their messages in destination order */
            spmd__agreement a = spmd__coll_agreement(&c);
            spmd__wait w = spmd__coll_cross_wait(&c);
            spmd_status (*exchange)(spmd__comm *, const spmd__agreement *, int,
                                    const spmd__message *, int, const spmd__message *,
                                    spmd__wait *) =
                bytes <= paired_max_bytes(ctx, g->comm) && connects_once(ctx, &c, &m, src_of)
                    ? spmd__comm_paired_exchange
                : blocks_on_host(ctx) ? spmd__comm_checked_exchange_host /* read straight */
                                      : spmd__comm_checked_exchange;
            st = spmd__coll_crossed(&c, exchange(g->comm, &a, nsend, sends, nrecv, recvs, &w), &w);
        }
        if (msgs != stack_msgs)
            free(msgs);
    }
    if (st == SPMD_OK && g->comm)
        st = spmd__coll_barrier(&c, 0);
    if (st == SPMD_OK) {
        int s = src_of[c.pos];
        if (s < 0)
            memset(out->data, 0, bytes); /* not a destination: zeros */
        else if (m.local_of[m.member_at[s]] >= 0 &&
                 SOURCE(m.local_of[m.member_at[s]]) != out->data) {
            const void *ptrs[2] = {out->data, SOURCE(m.local_of[m.member_at[s]])};
            copier cp = spmd__coll_copier_for(ctx, bytes, 2, ptrs);
            st = spmd__coll_copier_finish(
                &cp, spmd__coll_copy_rows(&cp, out->data, 0, ptrs[1], 0, bytes, 1));
        }
        if (st == SPMD_OK) /* sources stay valid until every destination has read them */
            st = spmd__coll_barrier(&c, 0);
        else
            st = spmd__coll_fail(&c, st);
    }
#undef SOURCE
    spmd__coll_members_free(&m);
    if (src_of != stack_src_of)
        free(src_of);
    return st;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_ppermute(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                          const int *pairs, int npairs)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd_ppermute_checked(ctx, in, out, axes, pairs, npairs), 1, out),
        "spmd_ppermute");
}

spmd_status spmd_pbroadcast(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                            int source)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd_pbroadcast_checked(ctx, in, out, axes, source), 1, out),
        "spmd_pbroadcast");
}

spmd_status spmd_psend(spmd_ctx *ctx, const spmd_block *in, const char *axes, const int *pairs,
                       int npairs)
{
    return spmd__error_in(spmd_psend_checked(ctx, in, axes, pairs, npairs), "spmd_psend");
}

spmd_status spmd_precv(spmd_ctx *ctx, spmd_block *out, const char *axes, const int *pairs,
                       int npairs)
{
    return spmd__error_in(
        spmd__coll_finished(ctx, spmd_precv_checked(ctx, out, axes, pairs, npairs), 1, out),
        "spmd_precv");
}

spmd_status spmd_ppermute_many(spmd_ctx *ctx, int n, const spmd_block *in, spmd_block *out,
                               const char *axes, const int *pairs, int npairs)
{
    spmd_status st = spmd_ppermute_many_checked(ctx, n, in, out, axes, pairs, npairs);
    return spmd__error_in(spmd__coll_finished_many(ctx, st, n, out, "ppermute_many"),
                          "spmd_ppermute_many");
}
