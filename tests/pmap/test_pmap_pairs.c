/* The pmap migration guide's examples, each written once with spmd_pmap and once with
 * spmd_shard_map: basic map; an unmapped input with out_axes NONE; two axes of parallelism
 * (nested names against a 2-D mesh, psum over both); donation. The results must be the same
 * bits. Runs on 1 process × 8 devices and under mpirun 2 × 4 and 4 × 2 (and 2 × 2, 4 × 4). */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static int P, L, me, N;

static float *fb(const spmd_block *b) { return b->data; }

/* A host-local array on this process's devices: axis 0 mapped over a local mesh named `names`
 * of shape `mesh_shape` (SPMD_NONE for axis: replicated). */
static spmd_array *local_array(const float *host, int ndim, const int64_t *shape, int mapped,
                               int mesh_ndim, const int *mesh_shape, const char **names)
{
    int ids[64];
    for (int i = 0; i < L; i++)
        ids[i] = spmd_local_device_id(i);
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(mesh_ndim, mesh_shape, names, ids, L, &mesh));
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_create(&spec));
    for (int a = 0; mapped && a < mesh_ndim; a++)
        assert_ok(spmd_spec_append_axis(spec, names[a]));
    spmd_sharding *sh = NULL;
    assert_ok(spmd_sharding_create(mesh, spec, &sh));
    spmd_array *x = NULL;
    assert_ok(spmd_device_put(host, ndim, shape, SPMD_DTYPE_F32, sh, &x));
    spmd_sharding_destroy(sh);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
    return x;
}

/* The global view of a host-local array on `mesh` with `spec_text`. */
static spmd_array *global_of(const spmd_array *local, spmd_mesh *mesh, const char *spec_text)
{
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse(spec_text, &spec));
    spmd_array *g = NULL;
    assert_ok(spmd_host_local_to_global(local, mesh, spec, &g));
    spmd_spec_destroy(spec);
    return g;
}

/* Host bytes of this process's part of a shard_map result, to compare with pmap's. */
static void local_bytes(const spmd_array *global, spmd_mesh *mesh, const char *spec_text,
                        float *dst, size_t count)
{
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse(spec_text, &spec));
    spmd_array *local = NULL;
    assert_ok(spmd_global_to_host_local(global, mesh, spec, &local));
    assert_ok(spmd_array_to_host(local, dst, count * sizeof *dst));
    spmd_array_destroy(local);
    spmd_spec_destroy(spec);
}

static void same_bits(const spmd_array *by_pmap, const float *by_shard_map, size_t count)
{
    float *a = malloc(count * sizeof *a);
    assert_int_equal(spmd_array_size(by_pmap), (int64_t)count);
    assert_ok(spmd_array_to_host(by_pmap, a, count * sizeof *a));
    assert_memory_equal(a, by_shard_map, count * sizeof *a);
    free(a);
}

static spmd_mesh *mesh_1d(void)
{
    const char *name = "i";
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(1, &N, &name, NULL, 0, &mesh));
    return mesh;
}

/* ---- 1. basic map: y = sin-free affine of x and the device index ---- */

static spmd_status affine(spmd_ctx *ctx, int nin, const spmd_block *in, int nout, spmd_block *out,
                          void *user)
{
    (void)nin, (void)nout, (void)user;
    int index = 0;
    spmd_status st = spmd_axis_index(ctx, "i", &index);
    for (int64_t k = 0; st == SPMD_OK && k < spmd_block_size(&in[0]); k++)
        fb(&out[0])[k] = 1.5f * fb(&in[0])[k] - 0.25f * (float)index;
    return st;
}

static void test_basic_map(void **state)
{
    (void)state;
    float xs[64 * 4];
    for (int i = 0; i < L * 4; i++)
        xs[i] = 0.37f * (float)(me * L * 4 + i) - 5.0f;
    int64_t shape[2] = {L, 4};
    const char *name = "i";
    spmd_array *x = local_array(xs, 2, shape, 1, 1, &L, &name), *y = NULL;
    spmd_out_desc desc = {1, {4}, SPMD_DTYPE_F32};
    assert_ok(spmd_pmap(affine, NULL, 1, &x, NULL, 1, &desc, NULL, "i", NULL, 0, NULL, &y));

    spmd_mesh *mesh = mesh_1d();
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'i'", &spec));
    spmd_array *gx = global_of(x, mesh, "'i'"), *gy = NULL;
    spmd_out_desc gdesc = {2, {N, 4}, SPMD_DTYPE_F32};
    const spmd_spec *specs[1] = {spec};
    assert_ok(spmd_shard_map(mesh, affine, NULL, 1, &gx, specs, 1, &gdesc, specs, NULL, &gy));
    float ref[64 * 4];
    local_bytes(gy, mesh, "'i'", ref, (size_t)(L * 4));
    same_bits(y, ref, (size_t)(L * 4));
    spmd_array_destroy(gy);
    spmd_array_destroy(gx);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
    spmd_array_destroy(y);
    spmd_array_destroy(x);
}

/* ---- 2. an unmapped input, out_axes NONE: psum(x * w) ---- */

static spmd_status weighted_sum(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    spmd_block t;
    spmd_status st = spmd_ctx_alloc(ctx, out[0].ndim, out[0].shape, SPMD_DTYPE_F32, &t);
    for (int64_t k = 0; st == SPMD_OK && k < spmd_block_size(&t); k++)
        fb(&t)[k] = fb(&in[0])[k] * fb(&in[1])[k];
    return st == SPMD_OK ? spmd_psum(ctx, &t, &out[0], "i") : st;
}

static void test_unmapped_and_replicated_output(void **state)
{
    (void)state;
    float xs[64 * 4], w[4] = {0.3f, -1.1f, 2.7f, 0.9f};
    for (int i = 0; i < L * 4; i++)
        xs[i] = 0.11f * (float)(me * L * 4 + i) + 0.5f;
    int64_t xshape[2] = {L, 4}, wshape[1] = {4};
    const char *name = "i";
    spmd_array *in[2] = {local_array(xs, 2, xshape, 1, 1, &L, &name),
                         local_array(w, 1, wshape, 0, 1, &L, &name)};
    int in_axes[2] = {0, SPMD_NONE}, none = SPMD_NONE;
    spmd_out_desc desc = {1, {4}, SPMD_DTYPE_F32};
    spmd_array *y = NULL;
    assert_ok(
        spmd_pmap(weighted_sum, NULL, 2, in, in_axes, 1, &desc, &none, "i", NULL, 0, NULL, &y));

    spmd_mesh *mesh = mesh_1d();
    spmd_spec *mapped = NULL, *replicated = NULL;
    assert_ok(spmd_spec_parse("'i'", &mapped));
    assert_ok(spmd_spec_parse("", &replicated));
    spmd_array *g[2] = {global_of(in[0], mesh, "'i'"), global_of(in[1], mesh, "")}, *gy = NULL;
    const spmd_spec *in_specs[2] = {mapped, replicated}, *out_specs[1] = {replicated};
    assert_ok(
        spmd_shard_map(mesh, weighted_sum, NULL, 2, g, in_specs, 1, &desc, out_specs, NULL, &gy));
    float ref[4];
    local_bytes(gy, mesh, "", ref, 4);
    same_bits(y, ref, 4);
    for (int k = 0; k < 2; k++) {
        spmd_array_destroy(g[k]);
        spmd_array_destroy(in[k]);
    }
    spmd_array_destroy(gy);
    spmd_array_destroy(y);
    spmd_spec_destroy(mapped);
    spmd_spec_destroy(replicated);
    spmd_mesh_destroy(mesh);
}

/* ---- 3. two axes: nested names against a 2-D mesh, psum over both ---- */

static spmd_status psum_both(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                             spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    /* pmap hands (4,), shard_map (1, 1, 4): the same elements */
    spmd_block flat = in[0];
    flat.ndim = 1;
    flat.shape[0] = spmd_block_size(&in[0]);
    return spmd_psum(ctx, &flat, &out[0], "i, j");
}

static void test_two_axes(void **state)
{
    (void)state;
    int B = L % 2 == 0 ? 2 : 1, A = L / B;
    float xs[64 * 4];
    for (int i = 0; i < L * 4; i++)
        xs[i] = 0.01f * (float)((me * L * 4 + i) * 7 % 101) - 0.3f;
    int64_t shape[3] = {A, B, 4};
    const char *names[2] = {"i", "j"};
    int local_mesh[2] = {A, B};
    spmd_array *x = local_array(xs, 3, shape, 1, 2, local_mesh, names), *y = NULL;
    spmd_out_desc desc = {1, {4}, SPMD_DTYPE_F32};
    int none = SPMD_NONE;
    assert_ok(spmd_pmap(psum_both, NULL, 1, &x, NULL, 1, &desc, &none, "i, j", NULL, 0, NULL, &y));

    int global_mesh[2] = {A * P, B};
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(2, global_mesh, names, NULL, 0, &mesh));
    spmd_spec *ij = NULL, *replicated = NULL;
    assert_ok(spmd_spec_parse("'i', 'j'", &ij));
    assert_ok(spmd_spec_parse("", &replicated));
    spmd_array *gx = global_of(x, mesh, "'i', 'j'"), *gy = NULL;
    const spmd_spec *in_specs[1] = {ij}, *out_specs[1] = {replicated};
    assert_ok(
        spmd_shard_map(mesh, psum_both, NULL, 1, &gx, in_specs, 1, &desc, out_specs, NULL, &gy));
    float ref[4];
    local_bytes(gy, mesh, "", ref, 4);
    same_bits(y, ref, 4);
    spmd_array_destroy(gx);
    spmd_array_destroy(gy);
    spmd_spec_destroy(ij);
    spmd_spec_destroy(replicated);
    spmd_mesh_destroy(mesh);
    spmd_array_destroy(y);
    spmd_array_destroy(x);
}

/* ---- 4. donation: the input's buffers become the output's, both ways ---- */

static void test_donation(void **state)
{
    (void)state;
    float xs[64 * 4];
    for (int i = 0; i < L * 4; i++)
        xs[i] = (float)(me * L * 4 + i) * 0.5f;
    int64_t shape[2] = {L, 4};
    const char *name = "i";
    int donate[1] = {SPMD_DONATE_IN_PLACE};
    spmd_out_desc desc = {1, {4}, SPMD_DTYPE_F32};
    spmd_array *x = local_array(xs, 2, shape, 1, 1, &L, &name), *y = NULL;
    spmd_array *gx = NULL, *gy = NULL;
    spmd_mesh *mesh = mesh_1d();
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'i'", &spec));
    if (P == 1) { /* one process: the global array is the input itself, donated without a copy */
        spmd_shard before;
        assert_ok(spmd_array_shard(x, 0, &before));
        spmd_pmap_options o = SPMD_PMAP_OPTIONS_INIT;
        o.donate = donate;
        assert_ok(spmd_pmap(affine, NULL, 1, &x, NULL, 1, &desc, NULL, "i", NULL, 0, &o, &y));
        spmd_shard after;
        assert_ok(spmd_array_shard(y, 0, &after));
        assert_ptr_equal(after.data, before.data);
    } else { /* the host-local input is converted without a copy; donating it deletes it and
              * hands its buffers to the output */
        spmd_shard before;
        assert_ok(spmd_array_shard(x, 0, &before));
        spmd_pmap_options o = SPMD_PMAP_OPTIONS_INIT;
        o.donate = donate;
        assert_ok(spmd_pmap(affine, NULL, 1, &x, NULL, 1, &desc, NULL, "i", NULL, 0, &o, &y));
        spmd_shard after;
        assert_ok(spmd_array_shard(y, 0, &after));
        assert_ptr_equal(after.data, before.data);
        float back[64 * 4];
        assert_status(spmd_array_to_host(x, back, sizeof back), SPMD_ERR_INVALID_ARGUMENT,
                      "deleted", "spmd_pmap");
    }
    spmd_array *x2 = local_array(xs, 2, shape, 1, 1, &L, &name);
    gx = global_of(x2, mesh, "'i'");
    spmd_array_destroy(x2);
    spmd_shard_map_options smo = SPMD_SHARD_MAP_OPTIONS_INIT;
    smo.donate = donate;
    spmd_out_desc gdesc = {2, {N, 4}, SPMD_DTYPE_F32};
    const spmd_spec *specs[1] = {spec};
    spmd_shard gbefore, gafter;
    assert_ok(spmd_array_shard(gx, 0, &gbefore));
    assert_ok(spmd_shard_map(mesh, affine, NULL, 1, &gx, specs, 1, &gdesc, specs, &smo, &gy));
    assert_ok(spmd_array_shard(gy, 0, &gafter));
    assert_ptr_equal(gafter.data, gbefore.data);
    float ref[64 * 4];
    local_bytes(gy, mesh, "'i'", ref, (size_t)(L * 4));
    same_bits(y, ref, (size_t)(L * 4));
    spmd_array_destroy(gx);
    spmd_array_destroy(gy);
    spmd_array_destroy(x);
    spmd_array_destroy(y);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
}

int main(void)
{
    spmd_test_init();
    P = spmd_process_count();
    L = spmd_local_device_count();
    me = spmd_process_index();
    N = P * L;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_map),
        cmocka_unit_test(test_unmapped_and_replicated_output),
        cmocka_unit_test(test_two_axes),
        cmocka_unit_test(test_donation),
    };
    return spmd_test_finish(cmocka_run_group_tests(tests, NULL, NULL));
}
