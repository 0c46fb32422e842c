/* spmd_pmap against host references: in_axes 0/1/-1/NONE, out_axes 0/1/NONE (verified),
 * every collective by axis name, nested names, devices, strict and copying modes, donation,
 * errors (test_pmap_pairs compares pmap with the equivalent shard_map). Inputs and outputs are
 * host-local under several processes, as in JAX. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static int P, L, me, N; /* processes, local devices, this process, mapped devices */

/* An array on this process's devices laid out as the pmap needs it: `axis` mapped over a mesh
 * of the local devices named `name` (SPMD_NONE: replicated on them). */
static spmd_array *local_input(const float *host, int ndim, const int64_t *shape, int axis,
                               const char *name)
{
    int ids[64];
    for (int i = 0; i < L; i++)
        ids[i] = spmd_local_device_id(i);
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, &L, &name, ids, L, &mesh));
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_create(&spec));
    for (int d = 0; axis != SPMD_NONE && d < axis; d++)
        assert_ok(spmd_spec_append(spec, 0, NULL));
    if (axis != SPMD_NONE)
        assert_ok(spmd_spec_append_axis(spec, name));
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create(mesh, spec, &sh));
    spmd_array *a = NULL;
    assert_ok(spmd_device_put(host, ndim, shape, SPMD_DTYPE_F32, sh, &a));
    spmd_sharding_destroy(sh);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
    return a;
}

static void to_host(const spmd_array *a, float *dst, size_t count)
{
    assert_int_equal(spmd_array_size(a), (int64_t)count);
    assert_ok(spmd_array_to_host(a, dst, count * sizeof *dst));
}

static float *fblock(const spmd_block *b) { return b->data; }

/* out = 2 in + axis_index; in and out are rank-reduced */
static spmd_status affine(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    (void)nin;
    (void)nout;
    int index = 0;
    spmd_status st = spmd_axis_index(ctx, user, &index);
    if (st != SPMD_OK)
        return st;
    if (in[0].ndim != out[0].ndim)
        return SPMD_ERR_SHAPE;
    for (int64_t k = 0; k < spmd_block_size(&in[0]); k++)
        fblock(&out[0])[k] = 2 * fblock(&in[0])[k] + (float)index;
    return SPMD_OK;
}

/* in_axes 0, 1 and -1 map the same data: x[g][c] at global index g */
static void test_in_axes(void **state)
{
    (void)state;
    enum { C = 3 };
    float rows[64 * C], cols[64 * C], out[64 * C];
    for (int i = 0; i < L; i++)
        for (int c = 0; c < C; c++) {
            float v = (float)(100 * (me * L + i) + c);
            rows[i * C + c] = v; /* (L, C) */
            cols[c * L + i] = v; /* (C, L) */
        }
    int64_t shape_rows[2] = {L, C}, shape_cols[2] = {C, L};
    spmd_out_desc desc = {1, {C}, SPMD_DTYPE_F32};
    const int axes_cases[3] = {0, 1, -1};
    for (int t = 0; t < 3; t++) {
        int in_axis = axes_cases[t], out_axis = in_axis == 0 ? 0 : 1;
        spmd_array *x = in_axis == 0 ? local_input(rows, 2, shape_rows, 0, "i")
                                     : local_input(cols, 2, shape_cols, 1, "i");
        spmd_array *y = NULL;
        assert_ok(
            spmd_pmap(affine, "i", 1, &x, &in_axis, 1, &desc, &out_axis, "i", NULL, 0, NULL, &y));
        assert_int_equal(spmd_array_shape(y)[out_axis], L); /* host-local */
        to_host(y, out, (size_t)(L * C));
        for (int i = 0; i < L; i++)
            for (int c = 0; c < C; c++) {
                float want = 2 * (float)(100 * (me * L + i) + c) + (float)(me * L + i);
                float got = out_axis == 0 ? out[i * C + c] : out[c * L + i];
                assert_true(got == want);
            }
        spmd_array_destroy(x);
        spmd_array_destroy(y);
    }
}

static spmd_status add_broadcast(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                 spmd_block *out, void *user)
{
    (void)ctx, (void)nin, (void)nout, (void)user;
    if (in[1].ndim != 1 || in[1].shape[0] != 4)
        return SPMD_ERR_SHAPE; /* the unmapped input arrives whole */
    for (int k = 0; k < 4; k++)
        fblock(&out[0])[k] = fblock(&in[0])[k] + fblock(&in[1])[k];
    return SPMD_OK;
}

static spmd_status psum_all(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                            void *user)
{
    (void)nin, (void)nout;
    return spmd_psum(ctx, &in[0], &out[0], user);
}

/* Legacy pmap has no varying types: its all_gather under out_axes NONE goes by the values. */
static spmd_status gather_all(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    return spmd_all_gather(ctx, &in[0], &out[0], "i", 0, 0);
}

static spmd_status copy_in(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                           void *user)
{
    (void)ctx, (void)nin, (void)nout, (void)user;
    memcpy(out[0].data, in[0].data, spmd_block_nbytes(&in[0]));
    return SPMD_OK;
}

/* in_axes NONE broadcasts; out_axes NONE returns one verified value */
static void test_unmapped(void **state)
{
    (void)state;
    float xs[64 * 4], y[4] = {0.5f, 1.5f, 2.5f, 3.5f}, out[64 * 4];
    for (int i = 0; i < L * 4; i++)
        xs[i] = (float)(me * L * 4 + i);
    int64_t xshape[2] = {L, 4}, yshape[1] = {4};
    spmd_array *in[2] = {local_input(xs, 2, xshape, 0, "i"),
                         local_input(y, 1, yshape, SPMD_NONE, "i")};
    int in_axes[2] = {0, SPMD_NONE}, out0 = 0, none = SPMD_NONE;
    spmd_out_desc desc = {1, {4}, SPMD_DTYPE_F32};
    spmd_array *r = NULL;
    assert_ok(
        spmd_pmap(add_broadcast, NULL, 2, in, in_axes, 1, &desc, &out0, "i", NULL, 0, NULL, &r));
    to_host(r, out, (size_t)(L * 4));
    for (int i = 0; i < L * 4; i++)
        assert_true(out[i] == xs[i] + y[i % 4]);
    spmd_array_destroy(r);
    /* psum with out_axes NONE: the sum over every device, once */
    assert_ok(spmd_pmap(psum_all, "i", 1, in, in_axes, 1, &desc, &none, "i", NULL, 0, NULL, &r));
    assert_int_equal(spmd_array_ndim(r), 1);
    to_host(r, out, 4);
    for (int c = 0; c < 4; c++) {
        double want = 0;
        for (int g = 0; g < N; g++)
            want += g * 4 + c;
        assert_true(out[c] == (float)want);
    }
    spmd_array_destroy(r);
    /* all_gather with out_axes NONE: every row, once (shard_map would refuse it by type) */
    spmd_out_desc gathered = {2, {N, 4}, SPMD_DTYPE_F32};
    assert_ok(
        spmd_pmap(gather_all, NULL, 1, in, in_axes, 1, &gathered, &none, "i", NULL, 0, NULL, &r));
    float rows[64 * 4];
    to_host(r, rows, (size_t)(N * 4));
    for (int i = 0; i < N * 4; i++)
        assert_true(rows[i] == (float)i);
    spmd_array_destroy(r);
    /* a varying value claimed unmapped fails the check, with the fix in the message */
    if (N > 1) {
        spmd_status st =
            spmd_pmap(copy_in, NULL, 1, in, in_axes, 1, &desc, &none, "i", NULL, 0, NULL, &r);
        assert_int_equal(st, SPMD_ERR_SPEC);
        assert_null(r);
        assert_non_null(strstr(spmd_last_error(), "psum"));
    }
    spmd_array_destroy(in[0]);
    spmd_array_destroy(in[1]);
}

/* Every collective by the pmap's axis name, against a reference over the N devices. */
enum { OUTS = 9 };
static spmd_status collectives(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                               spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    int idx = 0, n = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &idx);
    if (st == SPMD_OK)
        st = spmd_axis_size(ctx, "i", &n);
    if (st == SPMD_OK)
        st = spmd_psum(ctx, &in[0], &out[0], "i");
    if (st == SPMD_OK)
        st = spmd_pmax(ctx, &in[0], &out[1], "i");
    if (st == SPMD_OK)
        st = spmd_pmin(ctx, &in[0], &out[2], "i");
    if (st == SPMD_OK)
        st = spmd_pmean(ctx, &in[0], &out[3], "i");
    if (st == SPMD_OK)
        st = spmd_all_gather(ctx, &in[0], &out[4], "i", 0, 0);
    int pairs[2 * 64];
    for (int d = 0; d < n; d++) {
        pairs[2 * d] = d;
        pairs[2 * d + 1] = (d + 1) % n;
    }
    if (st == SPMD_OK)
        st = spmd_ppermute(ctx, &in[0], &out[5], "i", pairs, n);
    fblock(&out[6])[0] = (float)idx;
    spmd_block v;
    int64_t vshape[1] = {n};
    if (st == SPMD_OK)
        st = spmd_ctx_alloc(ctx, 1, vshape, SPMD_DTYPE_F32, &v);
    for (int k = 0; st == SPMD_OK && k < n; k++)
        fblock(&v)[k] = (float)((idx + 1) * (k + 1));
    if (st == SPMD_OK)
        st = spmd_psum_scatter(ctx, &v, &out[7], "i", 0, 1);
    for (int k = 0; st == SPMD_OK && k < n; k++)
        fblock(&v)[k] = (float)(100 * idx + k);
    if (st == SPMD_OK)
        st = spmd_all_to_all(ctx, &v, &out[8], "i", 0, 0, 1);
    return st;
}

static void test_collectives(void **state)
{
    (void)state;
    float xs[64 * 2];
    for (int i = 0; i < L; i++) {
        xs[2 * i] = (float)(me * L + i);
        xs[2 * i + 1] = (float)(3 * (me * L + i) % 7);
    }
    int64_t shape[2] = {L, 2};
    spmd_array *x = local_input(xs, 2, shape, 0, "i");
    spmd_out_desc descs[OUTS] = {
        {1, {2}, SPMD_DTYPE_F32}, {1, {2}, SPMD_DTYPE_F32},    {1, {2}, SPMD_DTYPE_F32},
        {1, {2}, SPMD_DTYPE_F32}, {2, {N, 2}, SPMD_DTYPE_F32}, {1, {2}, SPMD_DTYPE_F32},
        {1, {1}, SPMD_DTYPE_F32}, {1, {1}, SPMD_DTYPE_F32},    {1, {N}, SPMD_DTYPE_F32}};
    int in_axis = 0, out_axes[OUTS] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    spmd_array *o[OUTS] = {NULL};
    assert_ok(spmd_pmap(collectives, NULL, 1, &x, &in_axis, OUTS, descs, out_axes, "i", NULL, 0,
                        NULL, o));
    float g[64][2];
    for (int d = 0; d < N; d++) {
        g[d][0] = (float)d;
        g[d][1] = (float)(3 * d % 7);
    }
    float *buf = malloc((size_t)(L * N * 2) * sizeof *buf);
    for (int c = 0; c < 2; c++) {
        float sum = 0, mx = -1e30f, mn = 1e30f;
        for (int d = 0; d < N; d++) {
            sum += g[d][c];
            mx = fmaxf(mx, g[d][c]);
            mn = fminf(mn, g[d][c]);
        }
        const float want[4] = {sum, mx, mn, sum / (float)N};
        for (int k = 0; k < 4; k++) {
            to_host(o[k], buf, (size_t)(L * 2));
            for (int i = 0; i < L; i++)
                assert_true(fabsf(buf[2 * i + c] - want[k]) <= 1e-5f * fabsf(want[k]));
        }
    }
    to_host(o[4], buf, (size_t)(L * N * 2)); /* every device sees every row */
    for (int i = 0; i < L; i++)
        for (int d = 0; d < N; d++)
            for (int c = 0; c < 2; c++)
                assert_true(buf[(i * N + d) * 2 + c] == g[d][c]);
    to_host(o[5], buf, (size_t)(L * 2)); /* device d receives from d - 1 */
    for (int i = 0; i < L; i++)
        for (int c = 0; c < 2; c++)
            assert_true(buf[2 * i + c] == g[(me * L + i + N - 1) % N][c]);
    to_host(o[6], buf, (size_t)L);
    for (int i = 0; i < L; i++)
        assert_true(buf[i] == (float)(me * L + i));
    to_host(o[7], buf, (size_t)L); /* sum over d of (d + 1)(idx + 1) */
    for (int i = 0; i < L; i++)
        assert_true(buf[i] == (float)((me * L + i + 1) * N * (N + 1) / 2));
    to_host(o[8], buf, (size_t)(L * N)); /* out[k] = 100 k + idx */
    for (int i = 0; i < L; i++)
        for (int k = 0; k < N; k++)
            assert_true(buf[i * N + k] == (float)(100 * k + me * L + i));
    free(buf);
    for (int k = 0; k < OUTS; k++)
        spmd_array_destroy(o[k]);
    spmd_array_destroy(x);
}

static spmd_status nested(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    (void)nin, (void)nout, (void)user;
    spmd_status st = spmd_psum(ctx, &in[0], &out[0], "j");
    return st == SPMD_OK ? spmd_psum(ctx, &in[0], &out[1], "i, j") : st;
}

/* "i, j": what pmap(pmap(f, 'j'), 'i') did, on an (A, B) mesh */
static void test_nested_names(void **state)
{
    (void)state;
    int B = L % 2 == 0 ? 2 : 1, A = L / B, A_all = A * P;
    float xs[64 * 2];
    for (int a = 0; a < A; a++)
        for (int b = 0; b < B; b++)
            for (int c = 0; c < 2; c++)
                xs[(a * B + b) * 2 + c] = (float)(1000 * (me * A + a) + 10 * b + c);
    /* lay it out on a local (A, B) mesh as P('i', 'j') */
    int ids[64], lshape[2] = {A, B};
    for (int i = 0; i < L; i++)
        ids[i] = spmd_local_device_id(i);
    const char *names[2] = {"i", "j"};
    spmd_mesh *lm = NULL;
    spmd_sharding *sh = NULL;
    assert_ok(spmd_mesh_create(2, lshape, names, ids, L, &lm));
    assert_ok(spmd_sharding_create_parse(lm, "'i', 'j'", &sh));
    int64_t shape[3] = {A, B, 2};
    spmd_array *x = NULL;
    assert_ok(spmd_device_put(xs, 3, shape, SPMD_DTYPE_F32, sh, &x));
    spmd_out_desc descs[2] = {{1, {2}, SPMD_DTYPE_F32}, {1, {2}, SPMD_DTYPE_F32}};
    int in_axis = 0, out_axes[2] = {0, 0};
    spmd_array *o[2] = {NULL, NULL};
    assert_ok(
        spmd_pmap(nested, NULL, 1, &x, &in_axis, 2, descs, out_axes, "i, j", NULL, 0, NULL, o));
    assert_int_equal(spmd_array_ndim(o[0]), 3); /* (A, B, 2): both names inserted */
    float got[64 * 2];
    to_host(o[0], got, (size_t)(L * 2));
    for (int a = 0; a < A; a++)
        for (int b = 0; b < B; b++)
            for (int c = 0; c < 2; c++) {
                float want = 0;
                for (int bb = 0; bb < B; bb++)
                    want += (float)(1000 * (me * A + a) + 10 * bb + c);
                assert_true(got[(a * B + b) * 2 + c] == want);
            }
    to_host(o[1], got, (size_t)(L * 2));
    for (int c = 0; c < 2; c++) {
        float want = 0;
        for (int a = 0; a < A_all; a++)
            for (int b = 0; b < B; b++)
                want += (float)(1000 * a + 10 * b + c);
        for (int k = 0; k < L; k++)
            assert_true(got[k * 2 + c] == want);
    }
    spmd_array_destroy(o[0]);
    spmd_array_destroy(o[1]);
    spmd_array_destroy(x);
    spmd_sharding_destroy(sh);
    spmd_mesh_destroy(lm);
}

/* One process: a devices list in reverse, the strict and the copying modes, donation. */
static void test_devices_strict_donation(void **state)
{
    (void)state;
    if (P > 1)
        skip();
    float xs[64 * 4], out[64 * 4];
    for (int i = 0; i < L * 4; i++)
        xs[i] = (float)i;
    int64_t shape[2] = {L, 4};
    int reversed[64];
    for (int i = 0; i < L; i++)
        reversed[i] = L - 1 - i;
    spmd_out_desc desc = {1, {4}, SPMD_DTYPE_F32};
    /* committed to one device: copied with a warning, or refused when strict */
    spmd_array *one = NULL, *r = NULL;
    assert_ok(
        spmd_array_create_on_device(spmd_local_device_id(0), xs, 2, shape, SPMD_DTYPE_F32, &one));
    assert_ok(spmd_pmap(affine, "i", 1, &one, NULL, 1, &desc, NULL, "i", reversed, L, NULL, &r));
    to_host(r, out, (size_t)(L * 4));
    for (int i = 0; i < L * 4; i++)
        assert_true(out[i] == 2 * xs[i] + (float)(i / 4));
    spmd_shard s0;
    assert_ok(spmd_array_shard(r, 0, &s0)); /* shards in mesh order: index 0 on device L-1 */
    assert_int_equal(s0.device_id, L - 1);
    spmd_array_destroy(r);
    spmd_pmap_options strict = SPMD_PMAP_OPTIONS_INIT;
    strict.strict = 1;
    if (L > 1) {
        assert_status(
            spmd_pmap(affine, "i", 1, &one, NULL, 1, &desc, NULL, "i", reversed, L, &strict, &r),
            SPMD_ERR_INCOMPATIBLE_DEVICES, "input 0", "reshard");
        assert_null(r);
    }
    spmd_array_destroy(one);
    /* donation: the input's buffers become the output's */
    spmd_array *x = local_input(xs, 2, shape, 0, "i");
    spmd_shard in0;
    assert_ok(spmd_array_shard(x, 0, &in0));
    int donate[1] = {SPMD_DONATE_IN_PLACE};
    spmd_pmap_options give = SPMD_PMAP_OPTIONS_INIT;
    give.donate = donate;
    assert_ok(spmd_pmap(affine, "i", 1, &x, NULL, 1, &desc, NULL, "i", NULL, 0, &give, &r));
    spmd_shard o0;
    assert_ok(spmd_array_shard(r, 0, &o0));
    assert_ptr_equal(o0.data, in0.data);
    to_host(r, out, (size_t)(L * 4));
    for (int i = 0; i < L * 4; i++)
        assert_true(out[i] == 2 * (float)i + (float)(i / 4));
    float probe[4];
    assert_int_not_equal(spmd_array_to_host(x, probe, sizeof probe), SPMD_OK); /* deleted */
    spmd_array_destroy(x);
    spmd_array_destroy(r);
}

static void test_errors(void **state)
{
    (void)state;
    float xs[64 * 4] = {0};
    int64_t shape[2] = {L, 4};
    spmd_array *x = local_input(xs, 2, shape, 0, "i"), *r = NULL;
    spmd_out_desc desc = {1, {4}, SPMD_DTYPE_F32};
    int none = SPMD_NONE, far = 2, neg_far = -3;
    assert_status(spmd_pmap(affine, "i", 1, &x, &none, 1, &desc, NULL, "i", NULL, 0, NULL, &r),
                  SPMD_ERR_INVALID_ARGUMENT, "no input is mapped");
    assert_status(spmd_pmap(affine, "i", 1, &x, &far, 1, &desc, NULL, "i", NULL, 0, NULL, &r),
                  SPMD_ERR_INVALID_ARGUMENT, "in_axes[0] = 2", "beyond the rank");
    assert_status(spmd_pmap(affine, "i", 1, &x, NULL, 1, &desc, &far, "i", NULL, 0, NULL, &r),
                  SPMD_ERR_INVALID_ARGUMENT, "out_axes[0] = 2", "beyond the rank");
    assert_status(spmd_pmap(affine, "i", 1, &x, NULL, 1, &desc, &neg_far, "i", NULL, 0, NULL, &r),
                  SPMD_ERR_INVALID_ARGUMENT, "out_axes[0] = -3");
    int two[2] = {0, 1};
    if (P == 1 && L != 2)
        assert_status(spmd_pmap(affine, "i", 1, &x, NULL, 1, &desc, NULL, "i", two, 2, NULL, &r),
                      SPMD_ERR_INVALID_ARGUMENT, "2 devices were given", "mapped size is");
    /* a collective over a name the pmap does not have */
    assert_status(spmd_pmap(psum_all, "k", 1, &x, NULL, 1, &desc, NULL, "i", NULL, 0, NULL, &r),
                  SPMD_ERR_SPEC, "'k'");
    assert_null(r);
    assert_status(spmd_pmap(affine, "i", 1, &x, NULL, 1, &desc, NULL, NULL, NULL, 0, NULL, &r),
                  SPMD_ERR_INVALID_ARGUMENT, "axis_name");
    assert_status(spmd_pmap(NULL, "i", 1, &x, NULL, 1, &desc, NULL, "i", NULL, 0, NULL, &r),
                  SPMD_ERR_INVALID_ARGUMENT, "fn");
    spmd_array_destroy(x);
    if (P == 1) { /* more mapped slices than devices */
        float big[65 * 4] = {0};
        int64_t bshape[2] = {spmd_device_count() + 1, 4};
        spmd_array *b = NULL;
        assert_ok(spmd_array_create_on_device(0, big, 2, bshape, SPMD_DTYPE_F32, &b));
        assert_status(spmd_pmap(affine, "i", 1, &b, NULL, 1, &desc, NULL, "i", NULL, 0, NULL, &r),
                      SPMD_ERR_INVALID_ARGUMENT, "needs");
        spmd_array_destroy(b);
    }
}

int main(void)
{
    spmd_test_init();
    P = spmd_process_count();
    L = spmd_local_device_count();
    me = spmd_process_index();
    N = P * L;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_axes),
        cmocka_unit_test(test_unmapped),
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_nested_names),

        cmocka_unit_test(test_devices_strict_donation),
        cmocka_unit_test(test_errors),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
