/* The CUDA device registry on a GPU machine: enumeration, logical devices per GPU, allocation
 * and copies through arrays, and an fn with an op and a psum on the GPU. Skips (77) where no GPU is
 * usable; the no-GPU error path itself is checked by test_platform. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

/* Doubles its block on the device, then sums over 'x'; the host reads the result in fn. */
static spmd_status double_and_sum(spmd_ctx *ctx, int nin, const spmd_block *in, int nout,
                                  spmd_block *out, void *user)
{
    (void)nin, (void)nout, (void)user;
    if (!spmd_ctx_stream(ctx))
        return SPMD_ERR_INTERNAL; /* fn failed without a message: the test fails on it */
    spmd_block twice;
    spmd_status st = spmd_ctx_alloc(ctx, in[0].ndim, in[0].shape, in[0].dtype, &twice);
    if (st == SPMD_OK)
        st = spmd_op_binary_scalar(ctx, SPMD_BINARY_MUL, &in[0], 2.0, &twice);
    return st == SPMD_OK ? spmd_psum(ctx, &twice, &out[0], "x") : st;
}

static void test_devices_and_round_trip(void **state)
{
    (void)state;
    int n = spmd_local_device_count();
    assert_true(n >= 2 && n % 2 == 0);
    for (int k = 0; k < n; k++) {
        spmd_device_info info;
        assert_ok(spmd_device_get_info(spmd_local_device_id(k), &info));
        assert_int_equal(info.platform, SPMD_PLATFORM_CUDA);
        assert_int_equal(info.hardware_ordinal, k / 2); /* two logical devices per GPU */
    }
    const char *name = "x";
    int ids[64];
    for (int k = 0; k < n && k < 64; k++)
        ids[k] = spmd_local_device_id(k);
    spmd_mesh *mesh = NULL;
    spmd_sharding *sharding = NULL;
    assert_ok(spmd_mesh_create(1, &n, &name, ids, n, &mesh));
    assert_ok(spmd_sharding_create_parse(mesh, "None, 'x'", &sharding));
    enum { ROWS = 3 };
    int64_t shape[2] = {ROWS, 4 * n};
    size_t count = (size_t)(ROWS * 4 * n);
    float *host = malloc(count * sizeof *host), *back = malloc(count * sizeof *back);
    for (size_t i = 0; i < count; i++)
        host[i] = (float)i * 0.5f;
    spmd_array *a = NULL;
    assert_ok(spmd_device_put(host, 2, shape, SPMD_DTYPE_F32, sharding, &a));
    assert_ok(spmd_array_to_host(a, back, count * sizeof *back));
    assert_memory_equal(host, back, count * sizeof *host);
    float block[ROWS * 4];
    assert_ok(spmd_array_shard_to_host(a, 1, block, sizeof block));
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < 4; c++)
            assert_true(block[r * 4 + c] == host[r * 4 * n + 4 + c]);
    /* fn runs on the GPU: out = sum over devices of 2 * block, each element checked */
    spmd_spec *spec = NULL;
    assert_ok(spmd_spec_parse("None, 'x'", &spec));
    spmd_spec *replicated = NULL;
    assert_ok(spmd_spec_parse("", &replicated));
    const spmd_spec *specs[1] = {spec}, *out_specs[1] = {replicated};
    spmd_out_desc desc = {.ndim = 2, .shape = {ROWS, 4}, .dtype = SPMD_DTYPE_F32};
    spmd_array *result = NULL;
    assert_ok(spmd_shard_map(mesh, double_and_sum, NULL, 1, &a, specs, 1, &desc, out_specs, NULL,
                             &result));
    float sum[ROWS * 4];
    assert_ok(spmd_array_to_host(result, sum, sizeof sum));
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < 4; c++) {
            float want = 0;
            for (int k = 0; k < n; k++)
                want += 2 * host[r * 4 * n + 4 * k + c];
            assert_true(sum[r * 4 + c] == want);
        }
    spmd_array_destroy(result);
    spmd_spec_destroy(replicated);
    spmd_spec_destroy(spec);
    spmd_array_destroy(a);
    free(host);
    free(back);
    spmd_sharding_destroy(sharding);
    spmd_mesh_destroy(mesh);
}

int main(void)
{
    setenv("SPMD_PLATFORM", "cuda", 1);
    setenv("SPMD_CUDA_DEVICES_PER_GPU", "2", 1);
    spmd_status st = spmd_init(NULL);
    if (st != SPMD_OK) {
        printf("skipped: %s\n", spmd_last_error());
        return SPMD_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_devices_and_round_trip)};
    int failures = cmocka_run_group_tests(tests, NULL, NULL);
    return spmd_test_finish(failures);
}
