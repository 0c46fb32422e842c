/* Private: the values of spmd_op_random and spmd_array_random, in C and in CUDA alike.
 *
 * Element i (its row-major index in the global array) of seed s is Philox4x32-10 (Random123)
 * of counter (i, 0) and key s; the four words become a number through IEEE-exact operations
 * only (+, -, *, /, sqrt, conversions), with log and cos as fixed polynomials rather than a
 * libm's, so that every CPU and GPU gives the same bits. Compile without floating-point
 * contraction (-ffp-contract=off, nvcc --fmad=false): a fused multiply-add rounds once where
 * the polynomial rounds twice. */
#ifndef SPMD_RUNTIME_RANDOM_VALUES_H
#define SPMD_RUNTIME_RANDOM_VALUES_H

#include <stdint.h>
#include <string.h>

#include <Random123/philox.h>

#ifdef __CUDACC__
#define SPMD_RANDOM_FN __host__ __device__ static inline
#else
#define SPMD_RANDOM_FN static inline
#endif

SPMD_RANDOM_FN void spmd__random_words(uint64_t seed, uint64_t index, uint32_t words[4])
{
    philox4x32_ctr_t counter = {{(uint32_t)index, (uint32_t)(index >> 32), 0, 0}};
    philox4x32_key_t key = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    philox4x32_ctr_t r = philox4x32(counter, key);
    for (int k = 0; k < 4; k++)
        words[k] = r.v[k];
}

SPMD_RANDOM_FN uint64_t spmd__random_bits_of(double x)
{
#ifdef __CUDA_ARCH__
    return (uint64_t)__double_as_longlong(x);
#else
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
#endif
}

SPMD_RANDOM_FN double spmd__random_double_of(uint64_t b)
{
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)b);
#else
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
#endif
}

/* ln x for normal x in (0, 1]: x = m 2^e with m in [sqrt(1/2), sqrt(2)), and
 * ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, summed to s^23 (error < 1e-17). */
SPMD_RANDOM_FN double spmd__random_log(double x)
{
    uint64_t b = spmd__random_bits_of(x);
    int e = (int)((b >> 52) & 0x7ff) - 1023;
    double m = spmd__random_double_of((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e += 1;
    }
    double s = (m - 1.0) / (m + 1.0), s2 = s * s, p = 1.0 / 23.0;
    for (int k = 21; k >= 1; k -= 2)
        p = p * s2 + 1.0 / (double)k;
    /* ln 2 in two parts: e * hi is exact for |e| < 2^11 */
    return (double)e * 6.93147180369123816490e-01 +
           ((double)e * 1.90821492927058770002e-10 + 2.0 * s * p);
}

/* cos(2 pi u) for u in [0, 1): the quadrant from u exactly (u has at most 53 bits), then a
 * Taylor series on [0, pi/2) to the 22nd power (error < 1e-17). */
SPMD_RANDOM_FN double spmd__random_cos_2pi(double u)
{
    double v = u * 4.0;
    int q = (int)v;
    double t = (v - (double)q) * 1.57079632679489661923, t2 = t * t;
    double c = 1.0, s = 1.0;
    for (int k = 22; k >= 2; k -= 2) {
        c = 1.0 - c * t2 / (double)(k * (k - 1));
        s = 1.0 - s * t2 / (double)((k + 1) * k);
    }
    s *= t;
    return q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s;
}

/* float32 -> bfloat16 bits, rounding to nearest even (the values here are never NaN). */
SPMD_RANDOM_FN uint16_t spmd__random_bf16_of(float f)
{
    uint32_t b;
#ifdef __CUDA_ARCH__
    b = (uint32_t)__float_as_uint(f);
#else
    memcpy(&b, &f, sizeof b);
#endif
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

/* Uniform in [0, 1) with 53 (double) or 24 (float) random bits; standard normal by
 * Box-Muller, sqrt(-2 ln u1) cos(2 pi u2), u1 in (0, 1]. */
SPMD_RANDOM_FN double spmd__random_uniform53(const uint32_t w[4])
{
    return (double)((((uint64_t)w[0] << 32) | w[1]) >> 11) * 0x1p-53;
}

SPMD_RANDOM_FN float spmd__random_uniform24(const uint32_t w[4])
{
    return (float)(w[0] >> 8) * 0x1p-24f;
}

SPMD_RANDOM_FN double spmd__random_normal53(const uint32_t w[4])
{
    double u1 = ((double)((((uint64_t)w[0] << 32) | w[1]) >> 11) + 1.0) * 0x1p-53;
    double u2 = (double)((((uint64_t)w[2] << 32) | w[3]) >> 11) * 0x1p-53;
    double r = -2.0 * spmd__random_log(u1);
    return (r > 0 ? __builtin_sqrt(r) : 0.0) * spmd__random_cos_2pi(u2);
}

/* float32 and bfloat16 normals: from 32-bit uniforms, computed in double, rounded once to
 * float (then to bfloat16). */
SPMD_RANDOM_FN double spmd__random_normal32(const uint32_t w[4])
{
    double u1 = ((double)w[0] + 1.0) * 0x1p-32, u2 = (double)w[1] * 0x1p-32;
    double r = -2.0 * spmd__random_log(u1);
    return (r > 0 ? __builtin_sqrt(r) : 0.0) * spmd__random_cos_2pi(u2);
}

/* Element `index` of seed `seed` in dtype 0 (float32), 1 (float64) or 2 (bfloat16, as bits)
 * of distribution 0 (uniform) or 1 (normal), stored at dst. */
SPMD_RANDOM_FN void spmd__random_store(uint64_t seed, uint64_t index, int dtype, int normal,
                                       void *dst)
{
    uint32_t w[4];
    spmd__random_words(seed, index, w);
    if (dtype == 1) {
        double v = normal ? spmd__random_normal53(w) : spmd__random_uniform53(w);
        memcpy(dst, &v, sizeof v);
    } else {
        /* bfloat16 uniform: the top 8 bits, k / 256, exact in bfloat16 (never rounds up to 1) */
        float v = normal       ? (float)spmd__random_normal32(w)
                  : dtype == 2 ? (float)(w[0] >> 24) * 0x1p-8f
                               : spmd__random_uniform24(w);
        if (dtype == 2) {
            uint16_t h = spmd__random_bf16_of(v);
            memcpy(dst, &h, sizeof h);
        } else {
            memcpy(dst, &v, sizeof v);
        }
    }
}

#endif /* SPMD_RUNTIME_RANDOM_VALUES_H */
