/* dtype table and the float16 / bfloat16 conversions. */
#include <math.h>

#include "testutil.h"

static void test_sizes_and_names(void **state)
{
    (void)state;
    static const struct {
        spmd_dtype t;
        size_t size;
        const char *name;
    } expected[] = {
        {SPMD_DTYPE_F32, 4, "float32"}, {SPMD_DTYPE_F64, 8, "float64"},
        {SPMD_DTYPE_I32, 4, "int32"},   {SPMD_DTYPE_I64, 8, "int64"},
        {SPMD_DTYPE_U8, 1, "uint8"},    {SPMD_DTYPE_BOOL, 1, "bool"},
        {SPMD_DTYPE_F16, 2, "float16"}, {SPMD_DTYPE_BF16, 2, "bfloat16"},
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        assert_int_equal(spmd_dtype_size(expected[i].t), expected[i].size);
        assert_string_equal(spmd_dtype_name(expected[i].t), expected[i].name);
        assert_int_equal(spmd_dtype_from_name(expected[i].name), expected[i].t);
    }
    assert_int_equal(SPMD_DTYPE_COUNT, 8);
    assert_int_equal(spmd_dtype_size(SPMD_DTYPE_COUNT), 0);
    assert_int_equal(spmd_dtype_size((spmd_dtype)-1), 0);
    assert_string_equal(spmd_dtype_name((spmd_dtype)99), "invalid");
    assert_int_equal(spmd_dtype_from_name("bf16"), SPMD_DTYPE_BF16);
    assert_int_equal(spmd_dtype_from_name("float128"), SPMD_DTYPE_COUNT);
    assert_int_equal(spmd_dtype_from_name(NULL), SPMD_DTYPE_COUNT);
}

/* Bit patterns from the IEEE 754 binary16 and bfloat16 definitions. */
static void test_known_values(void **state)
{
    (void)state;
    static const struct {
        float f;
        uint16_t half;
    } halves[] = {
        {0.0f, 0x0000},         {-0.0f, 0x8000},       {1.0f, 0x3c00},       {-2.0f, 0xc000},
        {0.5f, 0x3800},         {65504.0f, 0x7bff},    {65520.0f, 0x7c00},   {1e9f, 0x7c00},
        {0x1p-24f, 0x0001},     {0x1p-25f, 0x0000},    {0x1.8p-25f, 0x0001}, {0x1p-14f, 0x0400},
        {0x1.ffcp-15f, 0x0400}, {1.0f / 3.0f, 0x3555}, {2049.0f, 0x6800},    {2051.0f, 0x6802},
        {INFINITY, 0x7c00},     {-INFINITY, 0xfc00},
    };
    for (size_t i = 0; i < sizeof halves / sizeof halves[0]; i++) {
        uint16_t got = spmd_f32_to_f16(halves[i].f);
        if (got != halves[i].half)
            fail_msg("f32_to_f16(%a) = 0x%04x, expected 0x%04x", (double)halves[i].f, got,
                     halves[i].half);
    }
    assert_true(isnan(spmd_f16_to_f32(spmd_f32_to_f16(NAN))));
    assert_true(spmd_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(spmd_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(spmd_f16_to_f32(0xfc00) == -INFINITY);

    static const struct {
        float f;
        uint16_t b;
    } bfloats[] = {{1.0f, 0x3f80},        {-1.0f, 0xbf80},     {3.140625f, 0x4049},
                   {3.14159265f, 0x4049}, {0x1.01p0f, 0x3f80}, {0x1.03p0f, 0x3f82},
                   {0x1.018p0f, 0x3f81},  {INFINITY, 0x7f80}};
    for (size_t i = 0; i < sizeof bfloats / sizeof bfloats[0]; i++) {
        uint16_t got = spmd_f32_to_bf16(bfloats[i].f);
        if (got != bfloats[i].b)
            fail_msg("f32_to_bf16(%a) = 0x%04x, expected 0x%04x", (double)bfloats[i].f, got,
                     bfloats[i].b);
    }
    assert_true(isnan(spmd_bf16_to_f32(spmd_f32_to_bf16(NAN))));
    assert_true(spmd_bf16_to_f32(0x4049) == 3.140625f);
}

/* Every non-NaN half survives half -> float -> half; the float is the exact value. */
static void test_half_round_trip_exhaustive(void **state)
{
    (void)state;
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = spmd_f16_to_f32((uint16_t)h);
        int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
        if (exponent == 31 && mantissa) {
            assert_true(isnan(f));
            continue;
        }
        /* independent value: (-1)^s * 2^(e-15) * (1 + m/1024), or 2^-14 * m/1024 */
        double expect = exponent == 0    ? ldexp(mantissa, -24)
                        : exponent == 31 ? INFINITY
                                         : ldexp(1024 + mantissa, exponent - 25);
        if (h & 0x8000)
            expect = -expect;
        if ((double)f != expect)
            fail_msg("f16_to_f32(0x%04x) = %a, expected %a", h, (double)f, expect);
        assert_int_equal(spmd_f32_to_f16(f), h);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_and_names),
        cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_half_round_trip_exhaustive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL) ? 1 : 0;
}
