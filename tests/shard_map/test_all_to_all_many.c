/*
 * spmd_all_to_all_many and spmd_pswapaxes_many: blocks of different dtypes, ranks, split and
 * concat axes moved in one collective, untiled and tiled, and pswapaxes in place, each output
 * element checked against a reference that reads JAX's all_to_all rule off coordinates
 * (member p's out at y comes from member h's in at x). Members whose blocks differ in layout
 * fail alike instead of reading each other's bytes wrongly.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { MAX_DEV = 64, MAXR = 3 };

typedef struct spec {
    spmd_dtype t;
    int ndim;
    int64_t shape[MAXR]; /* G stands for the group size */
    int s, c;
} spec;
#define G (-1)
#define TRY SPMD_TEST_TRY

/* the value of member q's element k of block b, exact in every dtype used */
static double value(int q, int b, int64_t k, spmd_dtype t)
{
    int64_t v = q * 97 + b * 31 + k * 5 + 1;
    return t == SPMD_DTYPE_U8 ? (double)(v & 0xff) : (double)v;
}

static void put(spmd_dtype t, void *p, int64_t k, double v)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        ((float *)p)[k] = (float)v;
        break;
    case SPMD_DTYPE_F64:
        ((double *)p)[k] = v;
        break;
    case SPMD_DTYPE_I32:
        ((int32_t *)p)[k] = (int32_t)v;
        break;
    case SPMD_DTYPE_I64:
        ((int64_t *)p)[k] = (int64_t)v;
        break;
    default:
        ((uint8_t *)p)[k] = (uint8_t)v;
    }
}

static double get(spmd_dtype t, const void *p, int64_t k)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        return ((const float *)p)[k];
    case SPMD_DTYPE_F64:
        return ((const double *)p)[k];
    case SPMD_DTYPE_I32:
        return ((const int32_t *)p)[k];
    case SPMD_DTYPE_I64:
        return (double)((const int64_t *)p)[k];
    default:
        return ((const uint8_t *)p)[k];
    }
}

static int64_t flat(int nd, const int64_t *shape, const int64_t *x)
{
    int64_t k = 0;
    for (int j = 0; j < nd; j++)
        k = k * shape[j] + x[j];
    return k;
}

/* out's shape, and the reference: member p's out at y holds member h's in at x */
static void out_shape(const spec *sp, const int64_t *in, int n, int tiled, int64_t *out)
{
    if (tiled) {
        memcpy(out, in, sizeof(int64_t) * MAXR);
        out[sp->s] /= n;
        out[sp->c] *= n;
        return;
    }
    int64_t rest[MAXR];
    for (int j = 0, k = 0; j < sp->ndim; j++)
        if (j != sp->s)
            rest[k++] = in[j];
    for (int j = 0, k = 0; j < sp->ndim; j++)
        out[j] = j == sp->c ? n : rest[k++];
}

static int check_block(const spec *sp, int b, const int64_t *in, const spmd_block *o, int p, int n,
                       int tiled)
{
    int64_t total = spmd_block_size(o);
    for (int64_t e = 0; e < total; e++) {
        int64_t y[MAXR] = {0}, x[MAXR] = {0}, rest = e;
        for (int j = sp->ndim - 1; j >= 0; j--) {
            y[j] = rest % o->shape[j];
            rest /= o->shape[j];
        }
        int h;
        if (tiled) { /* chunk p along s of member h, h's place along c */
            int64_t ce = sp->c == sp->s ? in[sp->c] / n : in[sp->c];
            memcpy(x, y, sizeof x);
            h = (int)(y[sp->c] / ce);
            x[sp->c] = y[sp->c] % ce;
            x[sp->s] += p * (in[sp->s] / n);
        } else { /* y without c, with p inserted at s */
            h = (int)y[sp->c];
            int64_t r[MAXR];
            for (int j = 0, k = 0; j < sp->ndim; j++)
                if (j != sp->c)
                    r[k++] = y[j];
            for (int j = 0, k = 0; j < sp->ndim; j++)
                x[j] = j == sp->s ? p : r[k++];
        }
        double want = value(h, b, flat(sp->ndim, in, x), sp->t);
        if (get(sp->t, o->data, e) != want) {
            printf("block %d (tiled %d) at flat %lld: %g, want %g (member %d)\n", b, tiled,
                   (long long)e, get(sp->t, o->data, e), want, h);
            return 0;
        }
    }
    return 1;
}

static const spec untiled[] = {
    {SPMD_DTYPE_F32, 2, {G, 3}, 0, 0},
    {SPMD_DTYPE_U8, 3, {3, G, 2}, 1, 2},
    {SPMD_DTYPE_I64, 1, {G}, 0, 0},
};
static const spec tiled_specs[] = {
    {SPMD_DTYPE_I64, 2, {2, 2 * G}, 1, 0},
    {SPMD_DTYPE_F64, 2, {2 * G, 3}, 0, 1},
    {SPMD_DTYPE_I32, 3, {2, G, 3}, 1, 1},
};
static const spec swaps[] = {
    {SPMD_DTYPE_F32, 2, {G, 2}, 0, 0},
    {SPMD_DTYPE_I32, 2, {3, G}, 1, 1},
};

typedef struct job {
    int uneven; /* position 0 stacks the first block of the untiled set along axis 1 */
} job;

/* runs one set (kind 0 untiled, 1 tiled, 2 pswapaxes in place); *ok keeps whether every out
 * matched its reference */
static spmd_status run_set(spmd_ctx *ctx, const spec *set, int nb, int kind, int p, int n,
                           int uneven, int *ok)
{
    spmd_block ins[3], outs[3];
    int64_t in_shapes[3][MAXR];
    int split[3], concat[3];
    for (int b = 0; b < nb; b++) {
        const spec *sp = &set[b];
        int64_t os[MAXR];
        for (int j = 0; j < sp->ndim; j++)
            in_shapes[b][j] = sp->shape[j] < 0 ? -sp->shape[j] * n : sp->shape[j];
        out_shape(sp, in_shapes[b], n, kind == 1, os);
        TRY(spmd_ctx_alloc(ctx, sp->ndim, in_shapes[b], sp->t, &ins[b]));
        if (kind == 2)
            outs[b] = ins[b]; /* pswapaxes in place */
        else
            TRY(spmd_ctx_alloc(ctx, sp->ndim, os, sp->t, &outs[b]));
        for (int64_t k = 0; k < spmd_block_size(&ins[b]); k++)
            put(sp->t, ins[b].data, k, value(p, b, k, sp->t));
        split[b] = sp->s, concat[b] = sp->c;
    }
    if (uneven && p == 0) { /* the same bytes per member, stacked along another axis */
        concat[0] = 1;
        outs[0].shape[0] = outs[0].shape[1], outs[0].shape[1] = n;
    }
    spmd_status st = kind == 2   ? spmd_pswapaxes_many(ctx, nb, ins, outs, "i", split)
                     : kind == 1 ? spmd_all_to_all_many(ctx, nb, ins, outs, "i", split, concat, 1)
                                 : spmd_all_to_all_many(ctx, nb, ins, outs, "i", split, concat, 0);
    if (st != SPMD_OK)
        return st;
    for (int b = 0; b < nb; b++)
        *ok &= check_block(&set[b], b, in_shapes[b], &outs[b], p, n, kind == 1);
    return SPMD_OK;
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout;
    const job *j = user;
    int p = 0, n = 0, ok = 1;
    TRY(spmd_axis_index(ctx, "i", &p));
    TRY(spmd_axis_size(ctx, "i", &n));
    TRY(run_set(ctx, untiled, 3, 0, p, n, j->uneven, &ok));
    TRY(run_set(ctx, tiled_specs, 3, 1, p, n, 0, &ok));
    TRY(run_set(ctx, swaps, 2, 2, p, n, 0, &ok));
    ((float *)out[0].data)[0] = (float)ok;
    return SPMD_OK;
}

int main(void)
{
    int n = spmd_test_init_devices(MAX_DEV);
    float zeros[MAX_DEV] = {0};
    spmd_test_line line = spmd_test_line_create(1, zeros);
    const spmd_out_desc desc = {1, {(int64_t)n}, SPMD_DTYPE_F32};
    float got[MAX_DEV];
    job j = {0};
    spmd_array *y = NULL;
    spmd_status st =
        spmd_shard_map(line.mesh, body, &j, 1, &line.x, (const spmd_spec *[]){line.split}, 1, &desc,
                       (const spmd_spec *[]){line.split}, NULL, &y);
    SPMD_TEST_CHECK(st == SPMD_OK, "all_to_all_many: %s", spmd_last_error());
    if (st == SPMD_OK)
        st = spmd_process_allgather(y, 1, got, sizeof(float) * (size_t)n);
    for (int d = 0; st == SPMD_OK && d < n; d++)
        SPMD_TEST_CHECK(got[d] == 1.0f, "position %d: an output differs from the reference", d);
    spmd_array_destroy(y);
    if (n > 1) {
        job uneven = {1};
        y = NULL;
        st = spmd_shard_map(line.mesh, body, &uneven, 1, &line.x, (const spmd_spec *[]){line.split},
                            1, &desc, (const spmd_spec *[]){line.split}, NULL, &y);
        SPMD_TEST_CHECK(st == SPMD_ERR_COLLECTIVE_MISMATCH && y == NULL,
                        "blocks of another layout: %s (%s)", spmd_status_name(st),
                        spmd_last_error());
        spmd_array_destroy(y);
    }
    spmd_test_line_destroy(&line);
    return spmd_test_finish(spmd_test_failed_checks());
}
