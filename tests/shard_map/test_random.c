/* spmd_op_random and spmd_array_random: Random123's published Philox4x32-10 vectors, each value
 * against a Philox written here from its definition, the same global array bit for bit in
 * every layout this run has (1 x 8, 2 x 4, 4 x 2 ...) and under several specs, from
 * spmd_array_random and from inside fn, and the statistics of 10^6 samples. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <Random123/philox.h>

#include "testutil.h"

#define ROWS 16
#define COLS 48
#define SEED 0x0123456789abcdefull

/* ---- an independent Philox4x32-10 (Salmon et al., SC'11): 10 rounds, Weyl key schedule */

static void ref_philox(const uint32_t ctr_in[4], const uint32_t key_in[2], uint32_t out[4])
{
    uint32_t c[4] = {ctr_in[0], ctr_in[1], ctr_in[2], ctr_in[3]}, k[2] = {key_in[0], key_in[1]};
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
        uint32_t n[4] = {(uint32_t)(p1 >> 32) ^ c[1] ^ k[0], (uint32_t)p1,
                         (uint32_t)(p0 >> 32) ^ c[3] ^ k[1], (uint32_t)p0};
        memcpy(c, n, sizeof c);
        k[0] += 0x9E3779B9u;
        k[1] += 0xBB67AE85u;
    }
    memcpy(out, c, sizeof c);
}

static void ref_words(uint64_t seed, uint64_t index, uint32_t w[4])
{
    const uint32_t ctr[4] = {(uint32_t)index, (uint32_t)(index >> 32), 0, 0};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    ref_philox(ctr, key, w);
}

/* Random123's kat_vectors for philox4x32 10: counter, key, result. */
static const uint32_t kat[3][10] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
     0xa20bc7c6, 0x6d5451fd},
    {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
     0x5001e420, 0x24126ea1}};

static void test_known_answers(void **state)
{
    (void)state;
    for (int v = 0; v < 3; v++) {
        uint32_t mine[4];
        ref_philox(kat[v], kat[v] + 4, mine);
        philox4x32_ctr_t c = {{kat[v][0], kat[v][1], kat[v][2], kat[v][3]}};
        philox4x32_key_t k = {{kat[v][4], kat[v][5]}};
        philox4x32_ctr_t theirs = philox4x32(c, k);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(mine[i], kat[v][6 + i]);
            assert_int_equal(theirs.v[i], kat[v][6 + i]);
        }
    }
    /* through the public function: element 0 of seed 0 is the first vector's words */
    int64_t one[1] = {1}, origin[1] = {0};
    float f = -1;
    double d = -1;
    uint16_t h = 0;
    spmd_block bf = {&f, SPMD_DTYPE_F32, 1, {1}}, bd = {&d, SPMD_DTYPE_F64, 1, {1}},
               bh = {&h, SPMD_DTYPE_BF16, 1, {1}};
    assert_ok(spmd_op_random(NULL, 0, SPMD_RANDOM_UNIFORM, one, origin, &bf));
    assert_ok(spmd_op_random(NULL, 0, SPMD_RANDOM_UNIFORM, one, origin, &bd));
    assert_ok(spmd_op_random(NULL, 0, SPMD_RANDOM_UNIFORM, one, origin, &bh));
    assert_true(f == (float)(0x6627e8d5u >> 8) * 0x1p-24f);
    assert_true(d == (double)(((uint64_t)0x6627e8d5u << 21) | (0xe169c58du >> 11)) * 0x1p-53);
    assert_true(spmd_bf16_to_f32(h) == 0x66 / 256.0f);
}

/* Every element of a block against the reference words: the index and seed mapping. */
static void test_values_against_reference(void **state)
{
    (void)state;
    enum { N = 4096 };
    static float f[N];
    static double d[N];
    int64_t global[1] = {1000000}, start[1] = {123457};
    spmd_block bf = {f, SPMD_DTYPE_F32, 1, {N}}, bd = {d, SPMD_DTYPE_F64, 1, {N}};
    assert_ok(spmd_op_random(NULL, SEED, SPMD_RANDOM_UNIFORM, global, start, &bf));
    assert_ok(spmd_op_random(NULL, SEED, SPMD_RANDOM_UNIFORM, global, start, &bd));
    for (int i = 0; i < N; i++) {
        uint32_t w[4];
        ref_words(SEED, (uint64_t)(start[0] + i), w);
        assert_true(f[i] == (float)(w[0] >> 8) * 0x1p-24f);
        assert_true(d[i] == (double)((((uint64_t)w[0] << 32) | w[1]) >> 11) * 0x1p-53);
    }
    /* normals against libm's Box-Muller: within a few ulps of double */
    assert_ok(spmd_op_random(NULL, SEED, SPMD_RANDOM_NORMAL, global, start, &bd));
    for (int i = 0; i < N; i++) {
        uint32_t w[4];
        ref_words(SEED, (uint64_t)(start[0] + i), w);
        double u1 = ((double)((((uint64_t)w[0] << 32) | w[1]) >> 11) + 1.0) * 0x1p-53;
        double u2 = (double)((((uint64_t)w[2] << 32) | w[3]) >> 11) * 0x1p-53;
        double want = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        if (fabs(d[i] - want) > 1e-13 * (1.0 + fabs(want)))
            fail_msg("normal %d: %.17g, libm gives %.17g", i, d[i], want);
    }
}

/* The whole global array on the host, from one call: the reference every layout must equal. */
static void *host_reference(spmd_dtype dtype, spmd_random_distribution dist)
{
    int64_t shape[2] = {ROWS, COLS}, origin[2] = {0, 0};
    void *data = malloc(ROWS * COLS * spmd_dtype_size(dtype));
    assert_non_null(data);
    spmd_block b = {data, dtype, 2, {ROWS, COLS}};
    assert_ok(spmd_op_random(NULL, SEED, dist, shape, origin, &b));
    return data;
}

/* Each of this process's shards equals the reference's box, bit for bit. */
static void check_shards(const spmd_array *a, const void *reference, const char *what)
{
    size_t elem = spmd_dtype_size(spmd_array_dtype(a));
    for (int i = 0; i < spmd_array_num_shards(a); i++) {
        spmd_shard s;
        assert_ok(spmd_array_shard(a, i, &s));
        char *got = malloc(s.nbytes ? s.nbytes : 1);
        assert_non_null(got);
        assert_ok(spmd_array_shard_to_host(a, i, got, s.nbytes));
        int64_t cols = s.index.stop[1] - s.index.start[1];
        for (int64_t r = s.index.start[0]; r < s.index.stop[0]; r++) {
            const char *want =
                (const char *)reference + ((size_t)r * COLS + (size_t)s.index.start[1]) * elem;
            const char *have = got + (size_t)(r - s.index.start[0]) * (size_t)cols * elem;
            if (memcmp(want, have, (size_t)cols * elem) != 0)
                fail_msg("%s: device %d, row %lld differs from the host reference", what,
                         s.device_id, (long long)r);
        }
        free(got);
    }
}

static const char *const specs[] = {"'a', 'b'", "None, ('a', 'b')", "('b', 'a'), None", "'b'", ""};

static spmd_mesh *grid_mesh(void)
{
    int n = spmd_device_count();
    int shape[2] = {n % 2 == 0 ? n / 2 : n, n % 2 == 0 ? 2 : 1};
    const char *names[2] = {"a", "b"};
    spmd_mesh *mesh = NULL;
    assert_ok(spmd_mesh_create(2, shape, names, NULL, 0, &mesh));
    return mesh;
}

static void test_same_array_in_every_layout_and_spec(void **state)
{
    (void)state;
    spmd_mesh *mesh = grid_mesh();
    const spmd_dtype dtypes[3] = {SPMD_DTYPE_F32, SPMD_DTYPE_F64, SPMD_DTYPE_BF16};
    const int64_t shape[2] = {ROWS, COLS};
    for (int t = 0; t < 3; t++)
        for (int dist = 0; dist < 2; dist++) {
            void *reference = host_reference(dtypes[t], (spmd_random_distribution)dist);
            for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
                spmd_sharding *sharding = NULL;
                spmd_array *a = NULL;
                assert_ok(spmd_sharding_create_parse(mesh, specs[k], &sharding));
                assert_ok(spmd_array_random(2, shape, dtypes[t], sharding, SEED, dist, &a));
                char what[96];
                snprintf(what, sizeof what, "%s %s P(%s)", spmd_dtype_name(dtypes[t]),
                         dist ? "normal" : "uniform", specs[k]);
                check_shards(a, reference, what);
                spmd_array_destroy(a);
                spmd_sharding_destroy(sharding);
            }
            free(reference);
        }
    spmd_mesh_destroy(mesh);
}

/* Inside fn: each device fills its own block of the output from its position. */
static spmd_status fill_in_fn(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                              spmd_block *out, void *user)
{
    (void)nin, (void)in, (void)nout, (void)user;
    int a = 0, b = 0;
    spmd_status st = spmd_axis_index(ctx, "a", &a);
    if (st == SPMD_OK)
        st = spmd_axis_index(ctx, "b", &b);
    int64_t global[2] = {ROWS, COLS};
    int64_t start[2] = {a * out[0].shape[0], b * out[0].shape[1]};
    return st == SPMD_OK ? spmd_op_random(ctx, SEED, SPMD_RANDOM_NORMAL, global, start, &out[0])
                         : st;
}

static void test_inside_fn(void **state)
{
    (void)state;
    spmd_mesh *mesh = grid_mesh();
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("'a', 'b'", &spec));
    const spmd_out_desc desc = {2, {ROWS, COLS}, SPMD_DTYPE_F32};
    spmd_array *a = NULL;
    assert_ok(spmd_shard_map(mesh, fill_in_fn, NULL, 0, NULL, NULL, 1, &desc,
                             (const spmd_spec *const *)&spec, NULL, &a));
    void *reference = host_reference(SPMD_DTYPE_F32, SPMD_RANDOM_NORMAL);
    check_shards(a, reference, "float32 normal from inside fn");
    free(reference);
    spmd_array_destroy(a);
    spmd_spec_destroy(spec);
    spmd_mesh_destroy(mesh);
}

/* 10^6 samples: mean and variance within 6 standard errors; the range of each distribution. */
static void test_statistics(void **state)
{
    (void)state;
    enum { N = 1000000 };
    float *f = malloc(N * sizeof *f);
    double *d = malloc(N * sizeof *d);
    uint16_t *h = malloc(N * sizeof *h);
    assert_true(f && d && h);
    int64_t global[1] = {N}, origin[1] = {0};
    spmd_block bf = {f, SPMD_DTYPE_F32, 1, {N}}, bd = {d, SPMD_DTYPE_F64, 1, {N}},
               bh = {h, SPMD_DTYPE_BF16, 1, {N}};
    for (int dist = 0; dist < 2; dist++) {
        assert_ok(spmd_op_random(NULL, 42, (spmd_random_distribution)dist, global, origin, &bf));
        assert_ok(spmd_op_random(NULL, 7, (spmd_random_distribution)dist, global, origin, &bd));
        assert_ok(spmd_op_random(NULL, 9, (spmd_random_distribution)dist, global, origin, &bh));
        double mean_want = dist ? 0.0 : 0.5, var_want = dist ? 1.0 : 1.0 / 12;
        /* standard errors: sigma / sqrt(N) for the mean; sqrt((mu4 - sigma^4) / N) for the
         * variance (mu4: 1/80 uniform, 3 normal) */
        double se_mean = sqrt(var_want / N);
        double se_var = sqrt((dist ? 3.0 - 1.0 : 1.0 / 80 - 1.0 / 144) / N);
        for (int t = 0; t < 3; t++) {
            double sum = 0, sq = 0;
            for (int i = 0; i < N; i++) {
                double v = t == 0 ? f[i] : t == 1 ? d[i] : spmd_bf16_to_f32(h[i]);
                if (!isfinite(v) || (!dist && (v < 0 || v >= 1)))
                    fail_msg("sample %d of dtype %d is %g", i, t, v);
                sum += v;
                sq += v * v;
            }
            double mean = sum / N, var = sq / N - mean * mean;
            /* bfloat16 uniforms have 8 bits: mean 255/512, variance (1 - 2^-16) / 12 */
            double mw = dist == 0 && t == 2 ? 255.0 / 512 : mean_want;
            double vw = dist == 0 && t == 2 ? (1.0 - 1.0 / 65536) / 12 : var_want;
            double var_slack = dist && t == 2 ? 0.01 : 0; /* bfloat16 rounding of normals */
            if (fabs(mean - mw) > 6 * se_mean || fabs(var - vw) > 6 * se_var + var_slack)
                fail_msg("dtype %d %s: mean %.6f (want %.6f), variance %.6f (want %.6f)", t,
                         dist ? "normal" : "uniform", mean, mw, var, vw);
        }
    }
    free(f);
    free(d);
    free(h);
}

static void test_bad_input(void **state)
{
    (void)state;
    int32_t x[4];
    float y[4];
    int64_t g[1] = {4}, s[1] = {1};
    spmd_block bi = {x, SPMD_DTYPE_I32, 1, {4}}, by = {y, SPMD_DTYPE_F32, 1, {4}};
    assert_status(spmd_op_random(NULL, 1, SPMD_RANDOM_UNIFORM, g, (int64_t[1]){0}, &bi),
                  SPMD_ERR_UNSUPPORTED, "spmd_op_random", "int32", "float32, float64 or bfloat16");
    assert_status(spmd_op_random(NULL, 1, SPMD_RANDOM_UNIFORM, g, s, &by),
                  SPMD_ERR_INVALID_ARGUMENT, "dimension 0", "starting at 1", "global extent 4");
    assert_status(spmd_op_random(NULL, 1, (spmd_random_distribution)5, g, (int64_t[1]){0}, &by),
                  SPMD_ERR_INVALID_ARGUMENT, "distribution is 5");
}

int main(void)
{
    spmd_test_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_values_against_reference),
        cmocka_unit_test(test_same_array_in_every_layout_and_spec),
        cmocka_unit_test(test_inside_fn),
        cmocka_unit_test(test_statistics),
        cmocka_unit_test(test_bad_input),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failed);
}
