/*
 * The legacy pmap collectives that JAX itself builds from others (jax/_src/lax/parallel.py):
 * pswapaxes is an all_to_all, pshuffle a ppermute, pargmax/pargmin a pmax/pmin followed by a
 * pmin of positions. Each costs what its parts cost; no data path of its own. (pargmax and
 * pargmin hold one temporary of in's size until fn returns.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/check.h"
#include "shard_map/executor.h"
#include "shard_map/reduce.h"

/* An argument error aborts the call: the other devices would otherwise wait for this one. */
static spmd_status refuse(spmd_ctx *ctx, spmd_status st)
{
    char detail[SPMD__MESSAGE_CAPACITY];
    spmd__copy_text(detail, sizeof detail, spmd_last_error());
    return spmd__call_abort(ctx->call, SPMD_ERROR(st, "device %d: %s", ctx->device_id, detail));
}

spmd_status spmd_pswapaxes(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axes,
                           int axis, const spmd_axis_groups *groups)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pswapaxes"));
    return spmd__error_in(spmd_all_to_all_groups(ctx, in, out, axes, axis, axis, 0, groups),
                          "spmd_pswapaxes");
}

/* JAX's docstring rule (its code checks only that perm is a permutation of range(len(perm))):
 * perm holds each of 0..N-1 exactly once, N the group size along `axis`; a shorter perm would
 * leave some positions receiving nothing (zeros). */
static spmd_status check_permutation(const spmd_ctx *ctx, const char *axis, const int *perm, int n)
{
    SPMD_REQUIRE(n >= 0 && (n == 0 || perm != NULL), SPMD_ERR_INVALID_ARGUMENT,
                 "pshuffle: perm is NULL or n (%d) is negative", n);
    int size = 0;
    /* a bad axis name is left to ppermute, which names it */
    if (spmd_axis_size(ctx, axis, &size) == SPMD_OK)
        SPMD_REQUIRE(n == size, SPMD_ERR_INVALID_ARGUMENT,
                     "pshuffle: perm has %d entries but axis '%s' has %d positions; perm must "
                     "hold each of 0..%d exactly once",
                     n, axis, size, size - 1);
    unsigned char *seen = calloc((size_t)n + 1, 1);
    SPMD_REQUIRE(seen != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of memory");
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        ok = perm[i] >= 0 && perm[i] < n && !seen[perm[i]];
        if (ok)
            seen[perm[i]] = 1;
    }
    free(seen);
    if (ok)
        return SPMD_OK;
    char list[256];
    spmd__strbuf sb;
    spmd__strbuf_init(&sb, list, sizeof list);
    for (int i = 0; i < n && i < 32; i++)
        spmd__strbuf_printf(&sb, "%s%d", i ? ", " : "", perm[i]);
    return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                      "pshuffle: `perm` does not represent a permutation: [%s%s] (it must hold "
                      "each of 0..%d once)",
                      list, n > 32 ? ", ..." : "", n - 1);
}

spmd_status spmd_pshuffle(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axis,
                          const int *perm, int n)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pshuffle"));
    spmd__ctx_note_write(ctx, out); /* its out is written on the host */
    spmd_status st = check_permutation(ctx, axis, perm, n);
    if (st != SPMD_OK)
        return spmd__error_in(refuse(ctx, st), "spmd_pshuffle");
    int *pairs = malloc(2 * (size_t)(n ? n : 1) * sizeof *pairs);
    if (!pairs)
        return spmd__error_in(
            refuse(ctx, SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY, "pshuffle: out of memory")),
            "spmd_pshuffle");
    for (int i = 0; i < n; i++) { /* output i comes from perm[i] */
        pairs[2 * i] = perm[i];
        pairs[2 * i + 1] = i;
    }
    st = spmd_ppermute(ctx, in, out, axis, pairs, n);
    free(pairs);
    return spmd__error_in(st, "spmd_pshuffle");
}

/* The names in an axes text ("i", "i,j", "('i', 'j')"), split as the collectives split them. */
static int count_names(const char *text)
{
    int names = 0, in_name = 0;
    for (const char *p = text; *p; p++) {
        int separator = strchr(" ,()'\"\t", *p) != NULL;
        names += !separator && !in_name;
        in_name = !separator;
    }
    return names;
}

/* out[i] = position where extreme[i] == in[i] (as the dtype compares: -0 == 0, NaN never),
 * else INT32_MAX. */
static void mark_extremes(const spmd_block *in, const void *extreme, int32_t *out, int position)
{
    size_t count = (size_t)spmd_block_size(in);
    int exact = spmd__int_like(in->dtype);
    for (size_t i = 0; i < count; i++) {
        int same =
            exact ? spmd__load_int(in->dtype, in->data, i) == spmd__load_int(in->dtype, extreme, i)
                  : spmd__load(in->dtype, in->data, i) == spmd__load(in->dtype, extreme, i);
        out[i] = same ? position : INT32_MAX;
    }
}

static spmd_status parg(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axis,
                        int is_max)
{
    const char *name = is_max ? "pargmax" : "pargmin";
    spmd_status st = spmd__check_block(in, "in", name);
    if (st == SPMD_OK)
        st = spmd__check_block(out, "out", name);
    if (st == SPMD_OK && axis && count_names(axis) > 1)
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT, "%s only accepts a single axis, got \"%s\"",
                        name, axis);
    if (st == SPMD_OK && !spmd__block_has_layout(out, SPMD_DTYPE_I32, in->ndim, in->shape))
        st = SPMD_ERROR(SPMD_ERR_SHAPE,
                        "%s: out must be int32 with in's shape (the positions of the extreme "
                        "values)",
                        name);
    if (st == SPMD_OK && out->data == in->data && in->dtype != SPMD_DTYPE_I32)
        st = SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                        "%s: in (%s) and out (int32) share memory; pass a separate out", name,
                        spmd_dtype_name(in->dtype));
    if (st != SPMD_OK)
        return refuse(ctx, st);
    spmd_block extreme;
    st = spmd_ctx_alloc(ctx, in->ndim, in->shape, in->dtype, &extreme);
    if (st != SPMD_OK)
        return refuse(ctx, st);
    st = is_max ? spmd_pmax(ctx, in, &extreme, axis) : spmd_pmin(ctx, in, &extreme, axis);
    int position = 0;
    if (st == SPMD_OK)
        st = spmd_axis_index(ctx, axis, &position);
    if (st == SPMD_OK)
        st = spmd__ctx_sync(ctx); /* kernels may still write either block */
    if (st != SPMD_OK)
        return st;
    mark_extremes(in, extreme.data, out->data, position);
    return spmd_pmin(ctx, out, out, axis); /* the smallest position holding it */
}

spmd_status spmd_pargmax(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axis)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pargmax"));
    spmd__ctx_note_write(ctx, out); /* its out is written on the host */
    return spmd__error_in(parg(ctx, in, out, axis, 1), "spmd_pargmax");
}

spmd_status spmd_pargmin(spmd_ctx *ctx, const spmd_block *in, spmd_block *out, const char *axis)
{
    SPMD_CHECK(spmd__ctx_check(ctx, "spmd_pargmin"));
    spmd__ctx_note_write(ctx, out); /* its out is written on the host */
    return spmd__error_in(parg(ctx, in, out, axis, 0), "spmd_pargmin");
}
