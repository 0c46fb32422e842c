/*
 * spmd_op_where (jnp.where / lax.select): every dtype width, a per-element and a scalar cond,
 * in place, bits kept (-0.0, a NaN payload), on the host (ctx NULL) and inside fn on every
 * device (kernels on CUDA devices), against a host reference loop.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { N = 37 };

static void fill(spmd_dtype t, void *p, int salt)
{
    unsigned char *b = p;
    size_t elem = spmd_dtype_size(t);
    for (size_t k = 0; k < N * elem; k++)
        b[k] = (unsigned char)(k * 31 + (size_t)salt * 7 + 1);
    if (t == SPMD_DTYPE_F32) { /* a negative zero and a NaN with a payload must survive */
        uint32_t nz = 0x80000000u, nan = 0x7fc00123u;
        memcpy(b, &nz, 4);
        memcpy(b + 4, &nan, 4);
    }
}

/* host reference: the bits of a or b */
static void reference(const unsigned char *cond, int scalar, const void *a, const void *b,
                      void *out, size_t elem)
{
    for (size_t i = 0; i < N; i++)
        memcpy((char *)out + i * elem,
               (cond[scalar ? 0 : i] ? (const char *)a : (const char *)b) + i * elem, elem);
}

static const spmd_dtype dtypes[] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_I32,
                                    SPMD_DTYPE_I64, SPMD_DTYPE_U8,  SPMD_DTYPE_BOOL,
                                    SPMD_DTYPE_F16, SPMD_DTYPE_BF16};
#define NDT ((int)(sizeof dtypes / sizeof dtypes[0]))

typedef struct inputs {
    unsigned char cond[N], a[NDT][N * 8], b[NDT][N * 8];
} inputs;
static inputs g;

/* Runs every case with ctx (NULL: the host) on blocks made by make (device memory in fn). */
static int run_cases(spmd_ctx *ctx, unsigned char *result, size_t stride)
{
    int failures = 0, at = 0;
    for (int d = 0; d < NDT; d++) {
        spmd_dtype t = dtypes[d];
        size_t elem = spmd_dtype_size(t);
        for (int mode = 0; mode < 4;
             mode++) { /* per element; scalar true; scalar false; in place */
            int scalar = mode == 1 || mode == 2;
            unsigned char c_scalar = mode == 1;
            int64_t shape[1] = {N};
            spmd_block cond, a, b, out;
            unsigned char bufs[4][N * 8];
            if (ctx) {
                if (spmd_ctx_alloc(ctx, scalar ? 0 : 1, shape, SPMD_DTYPE_BOOL, &cond) != SPMD_OK ||
                    spmd_ctx_alloc(ctx, 1, shape, t, &a) != SPMD_OK ||
                    spmd_ctx_alloc(ctx, 1, shape, t, &b) != SPMD_OK ||
                    spmd_ctx_alloc(ctx, 1, shape, t, &out) != SPMD_OK)
                    return -1;
            } else {
                cond = (spmd_block){bufs[0], SPMD_DTYPE_BOOL, scalar ? 0 : 1, {N}};
                a = (spmd_block){bufs[1], t, 1, {N}};
                b = (spmd_block){bufs[2], t, 1, {N}};
                out = (spmd_block){bufs[3], t, 1, {N}};
            }
            memcpy(cond.data, scalar ? &c_scalar : g.cond, scalar ? 1 : N);
            memcpy(a.data, g.a[d], N * elem);
            memcpy(b.data, g.b[d], N * elem);
            spmd_block *dst = mode == 3 ? &a : &out; /* in place: out is a */
            spmd_status st = spmd_op_where(ctx, &cond, &a, &b, dst);
            if (st != SPMD_OK) {
                printf("where %s mode %d: %s\n", spmd_dtype_name(t), mode, spmd_last_error());
                failures++;
                continue;
            }
            unsigned char want[N * 8];
            reference(scalar ? &c_scalar : g.cond, scalar, g.a[d], g.b[d], want, elem);
            if (result)
                memcpy(result + (size_t)at * stride, dst->data, N * elem);
            else if (memcmp(dst->data, want, N * elem) != 0) {
                printf("where %s mode %d: bits differ from the reference\n", spmd_dtype_name(t),
                       mode);
                failures++;
            }
            at++;
        }
    }
    return failures;
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    return run_cases(ctx, out[0].data, N * 8) == 0 ? SPMD_OK : SPMD_ERR_INTERNAL;
}

int main(void)
{
    spmd_test_init();
    for (int i = 0; i < N; i++)
        g.cond[i] = (unsigned char)((i * 5) % 3 == 0 ? 0 : i % 7 == 0 ? 2 : 1); /* 2: true too */
    for (int d = 0; d < NDT; d++) {
        fill(dtypes[d], g.a[d], 1);
        fill(dtypes[d], g.b[d], 2);
    }
    int failures = run_cases(NULL, NULL, 0);
    /* inside fn: each device's results, compared on the host */
    int n = spmd_device_count();
    static const float zeros[SPMD_TEST_MAX_DEVICES];
    spmd_test_line line = spmd_test_line_create(1, zeros); /* its mesh and 'i' */
    const int cases = NDT * 4;
    const spmd_out_desc desc = {2, {(int64_t)n * cases, N * 8}, SPMD_DTYPE_U8};
    spmd_array *y = NULL;
    spmd_status st = spmd_shard_map(line.mesh, body, NULL, 0, NULL, NULL, 1, &desc,
                                    (const spmd_spec *[]){line.split}, NULL, &y);
    SPMD_TEST_CHECK(st == SPMD_OK, "where inside fn: %s", spmd_last_error());
    static unsigned char got[64 * NDT * 4][N * 8];
    for (int k = 0; st == SPMD_OK && k < spmd_array_num_shards(y); k++) {
        st = spmd_array_shard_to_host(y, k, got, sizeof(unsigned char) * (size_t)cases * N * 8);
        for (int d = 0, at = 0; st == SPMD_OK && d < NDT; d++) {
            size_t elem = spmd_dtype_size(dtypes[d]);
            for (int mode = 0; mode < 4; mode++, at++) {
                unsigned char c_scalar = mode == 1, want[N * 8];
                int scalar = mode == 1 || mode == 2;
                reference(scalar ? &c_scalar : g.cond, scalar, g.a[d], g.b[d], want, elem);
                SPMD_TEST_CHECK(memcmp(got[at], want, N * elem) == 0,
                                "shard %d: where %s mode %d differs from the reference", k,
                                spmd_dtype_name(dtypes[d]), mode);
            }
        }
    }
    spmd_array_destroy(y);
    spmd_test_line_destroy(&line);
    return spmd_test_finish(failures + spmd_test_failed_checks());
}
