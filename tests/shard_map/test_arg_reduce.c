/*
 * spmd_op_reduce's min, argmax and argmin (jnp.min, jnp.argmax, jnp.argmin): along each axis of
 * a (4, 5, 3) block and over all axes, with ties (the first index wins) and NaNs (argmax and
 * argmin give the first NaN, min gives NaN), for float32, float64, int32 and int64, on the host
 * and inside fn on every device, against nested reference loops.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

enum { A = 4, B = 5, C = 3, N = A * B * C };

static const spmd_dtype dtypes[] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_I32, SPMD_DTYPE_I64};
#define NDT 4
static const spmd_reduce_kind kinds[] = {SPMD_REDUCE_MIN, SPMD_REDUCE_ARGMAX, SPMD_REDUCE_ARGMIN};
#define NK 3
static const int axes[] = {0, 1, 2, SPMD_ALL_AXES};
#define NAX 4

/* values with ties; float dtypes also get NaNs in some rows */
static double value(int d, int k)
{
    double v = (double)((k * 7) % 11) - 5.0;
    if (d < 2 && (k == 17 || k == 40 || k == 41))
        v = NAN;
    return v;
}

/* The reference: out[r] for the r-th slice (row-major over the kept axes). */
static int reference(int d, spmd_reduce_kind kind, int axis, double *out)
{
    int dims[3] = {A, B, C}, count = 0;
    int slices = axis == SPMD_ALL_AXES ? 1 : N / dims[axis];
    for (int r = 0; r < slices; r++) {
        int members[N], m = 0;
        for (int k = 0; k < N; k++) {
            int c[3] = {k / (B * C), k / C % B, k % C}, kept = 0, mult = 1;
            for (int j = 2; j >= 0; j--)
                if (j != axis && axis != SPMD_ALL_AXES)
                    kept += c[j] * mult, mult *= dims[j];
            if (axis == SPMD_ALL_AXES || kept == r)
                members[m++] = k; /* in order along the axis */
        }
        double best = value(d, members[0]);
        int at = 0;
        for (int e = 1; e < m; e++) {
            double v = value(d, members[e]);
            if (isnan(best))
                break;
            int better = kind == SPMD_REDUCE_ARGMAX ? v > best : v < best;
            if (isnan(v) || better)
                best = v, at = e;
        }
        out[count++] = kind == SPMD_REDUCE_MIN ? best : (double)at;
    }
    return count;
}

static int run(spmd_ctx *ctx, double *results)
{
    int failures = 0, at = 0;
    for (int d = 0; d < NDT; d++)
        for (int q = 0; q < NK; q++)
            for (int x = 0; x < NAX; x++) {
                spmd_dtype t = dtypes[d], ot = kinds[q] == SPMD_REDUCE_MIN ? t : SPMD_DTYPE_I32;
                int axis = axes[x];
                int64_t ishape[3] = {A, B, C}, oshape[2];
                int ond = axis == SPMD_ALL_AXES ? 0 : 2;
                for (int j = 0, k = 0; axis != SPMD_ALL_AXES && j < 3; j++)
                    if (j != axis)
                        oshape[k++] = ishape[j];
                spmd_block in, out;
                static double hin[N], hout[N];
                if (ctx) {
                    if (spmd_ctx_alloc(ctx, 3, ishape, t, &in) != SPMD_OK ||
                        spmd_ctx_alloc(ctx, ond, oshape, ot, &out) != SPMD_OK)
                        return -1;
                } else {
                    in = (spmd_block){hin, t, 3, {A, B, C}};
                    out = (spmd_block){hout, ot, ond, {0}};
                    memcpy(out.shape, oshape, sizeof(int64_t) * (size_t)ond);
                }
                for (int k = 0; k < N; k++)
                    spmd_test_store(t, in.data, k, value(d, k));
                spmd_status st = spmd_op_reduce(ctx, kinds[q], &in, axis, &out);
                double want[N];
                int n = reference(d, kinds[q], axis, want);
                for (int r = 0; r < n; r++) {
                    double got = st == SPMD_OK ? spmd_test_load(ot, out.data, r) : -999;
                    if (results)
                        results[at + r] = got;
                    else if (!(got == want[r] || (isnan(got) && isnan(want[r])))) {
                        printf("%s kind %d axis %d slice %d: %g, want %g (%s)\n",
                               spmd_dtype_name(t), (int)kinds[q], axis, r, got, want[r],
                               st == SPMD_OK ? "ok" : spmd_last_error());
                        failures++;
                    }
                }
                at += n;
            }
    return failures;
}

static int total(void)
{
    int t = 0;
    for (int x = 0; x < NAX; x++)
        t += axes[x] == SPMD_ALL_AXES ? 1 : N / (axes[x] == 0 ? A : axes[x] == 1 ? B : C);
    return t * NDT * NK;
}

static spmd_status body(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                        void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    return run(ctx, out[0].data) < 0 ? SPMD_ERR_INTERNAL : SPMD_OK;
}

int main(void)
{
    spmd_test_init();
    int failures = run(NULL, NULL);
    int n = spmd_device_count(), t = total();
    static const float zeros[SPMD_TEST_MAX_DEVICES];
    spmd_test_line line = spmd_test_line_create(1, zeros); /* its mesh and 'i' */
    const spmd_out_desc desc = {1, {(int64_t)n * t}, SPMD_DTYPE_F64};
    spmd_array *y = NULL;
    spmd_status st = spmd_shard_map(line.mesh, body, NULL, 0, NULL, NULL, 1, &desc,
                                    (const spmd_spec *[]){line.split}, NULL, &y);
    SPMD_TEST_CHECK(st == SPMD_OK, "inside fn: %s", spmd_last_error());
    static double got[4096], want[4096];
    SPMD_TEST_CHECK(t <= 4096, "%d results", t);
    for (int d = 0, at = 0; d < NDT; d++) /* the same order as run() */
        for (int q = 0; q < NK; q++)
            for (int x = 0; x < NAX; x++)
                at += reference(d, kinds[q], axes[x], want + at);
    for (int k = 0; st == SPMD_OK && k < spmd_array_num_shards(y); k++) {
        st = spmd_array_shard_to_host(y, k, got, sizeof(double) * (size_t)t);
        for (int r = 0; st == SPMD_OK && r < t; r++)
            SPMD_TEST_CHECK(got[r] == want[r] || (isnan(got[r]) && isnan(want[r])),
                            "shard %d result %d: %g, want %g", k, r, got[r], want[r]);
    }
    spmd_array_destroy(y);
    spmd_test_line_destroy(&line);
    return spmd_test_finish(failures + spmd_test_failed_checks());
}
