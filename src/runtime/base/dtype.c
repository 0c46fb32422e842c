#include <string.h>

#include <spmd/dtype.h>

#include "runtime/base/dtype.h"

size_t spmd_dtype_size(spmd_dtype t)
{
    switch (t) {
#define SPMD_X_(name, value, bytes, text)                                                          \
    case SPMD_DTYPE_##name:                                                                        \
        return bytes;
        SPMD_DTYPE_LIST(SPMD_X_)
#undef SPMD_X_
    default:
        return 0;
    }
}

const char *spmd_dtype_name(spmd_dtype t)
{
    switch (t) {
#define SPMD_X_(name, value, bytes, text)                                                          \
    case SPMD_DTYPE_##name:                                                                        \
        return text;
        SPMD_DTYPE_LIST(SPMD_X_)
#undef SPMD_X_
    default:
        return "invalid";
    }
}

spmd_dtype spmd_dtype_from_name(const char *name)
{
    static const struct {
        const char *alias;
        spmd_dtype dtype;
    } short_names[] = {{"f32", SPMD_DTYPE_F32},  {"f64", SPMD_DTYPE_F64}, {"i32", SPMD_DTYPE_I32},
                       {"i64", SPMD_DTYPE_I64},  {"u8", SPMD_DTYPE_U8},   {"f16", SPMD_DTYPE_F16},
                       {"bf16", SPMD_DTYPE_BF16}};
    if (!name)
        return SPMD_DTYPE_COUNT;
    for (int t = 0; t < SPMD_DTYPE_COUNT; t++)
        if (strcmp(name, spmd_dtype_name((spmd_dtype)t)) == 0)
            return (spmd_dtype)t;
    for (size_t i = 0; i < sizeof short_names / sizeof short_names[0]; i++)
        if (strcmp(name, short_names[i].alias) == 0)
            return short_names[i].dtype;
    return SPMD_DTYPE_COUNT;
}

static uint32_t float_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static float bits_float(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* Rounds `value >> shift` to nearest, ties to even. */
static uint32_t shift_round_even(uint32_t value, int shift)
{
    uint32_t kept = value >> shift;
    uint32_t rest = value & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u)))
        kept++;
    return kept;
}

uint16_t spmd_f32_to_f16(float f)
{
    uint32_t x = float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    int exponent = (int)((x >> 23) & 0xffu);
    uint32_t mantissa = x & 0x7fffffu;
    if (exponent == 0xff) /* inf, or NaN kept quiet */
        return (uint16_t)(sign | 0x7c00u | (mantissa ? 0x200u | (mantissa >> 13) : 0u));
    int e = exponent - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half, or zero */
        if (e < -10)
            return (uint16_t)sign;
        return (uint16_t)(sign | shift_round_even(mantissa | 0x800000u, 14 - e));
    }
    /* A carry out of the mantissa correctly bumps the exponent (up to inf). */
    return (uint16_t)(sign | (shift_round_even(((uint32_t)e << 23) | mantissa, 13)));
}

float spmd_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0) {
        if (mantissa == 0)
            return bits_float(sign);
        int shift = 0; /* normalize the subnormal */
        while (!(mantissa & 0x400u)) {
            mantissa <<= 1;
            shift++;
        }
        return bits_float(sign | ((uint32_t)(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13));
    }
    if (exponent == 31)
        return bits_float(sign | 0x7f800000u | (mantissa << 13));
    return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t spmd_f32_to_bf16(float f)
{
    uint32_t x = float_bits(f);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
        return (uint16_t)((x >> 16) | 0x40u); /* NaN stays NaN (quiet) */
    return (uint16_t)shift_round_even(x, 16);
}

float spmd_bf16_to_f32(uint16_t b) { return bits_float((uint32_t)b << 16); }

int spmd__dtype_is_float(spmd_dtype t)
{
    return t == SPMD_DTYPE_F32 || t == SPMD_DTYPE_F64 || t == SPMD_DTYPE_F16 ||
           t == SPMD_DTYPE_BF16;
}

int spmd__dtype_is_number(spmd_dtype t)
{
    return spmd__dtype_is_float(t) || t == SPMD_DTYPE_I32 || t == SPMD_DTYPE_I64;
}
