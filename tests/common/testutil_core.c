/* The helpers that need no runtime: status assertions, checks, random numbers, element access.
 * The tests linked with the sharding math alone use these only. */
#include "testutil.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

void spmd_test_check_status(spmd_status got, spmd_status expected, const char *expr,
                            const char *file, int line, ...)
{
    const char *msg = spmd_last_error();
    if (got != expected) {
        print_error("ERROR: %s returned %s, expected %s (message: %s)\n", expr,
                    spmd_status_name(got), spmd_status_name(expected), msg);
        _fail(file, line);
    }
    if (expected == SPMD_OK)
        return;
    if (msg[0] == '\0') {
        print_error("ERROR: %s failed with %s but left no message\n", expr, spmd_status_name(got));
        _fail(file, line);
    }
    va_list ap;
    va_start(ap, line);
    for (const char *want = va_arg(ap, const char *); want; want = va_arg(ap, const char *)) {
        if (!strstr(msg, want)) {
            va_end(ap);
            print_error("ERROR: %s: message lacks \"%s\": %s\n", expr, want, msg);
            _fail(file, line);
        }
    }
    va_end(ap);
}

static atomic_int failed_checks;

void spmd_test_check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[process %d] %s:%d: check failed: %s: %s\n", spmd_process_index(), file, line,
            cond, msg);
    fflush(stderr);
    atomic_fetch_add(&failed_checks, 1);
}

int spmd_test_failed_checks(void) { return atomic_load(&failed_checks); }

uint64_t spmd_test_rng_next(spmd_test_rng *rng)
{
    uint64_t x = rng->state ? rng->state : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng->state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

int spmd_test_rng_below(spmd_test_rng *rng, int n)
{
    return (int)(spmd_test_rng_next(rng) % (uint64_t)n);
}

double spmd_test_load(spmd_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        return ((const float *)p)[i];
    case SPMD_DTYPE_F64:
        return ((const double *)p)[i];
    case SPMD_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case SPMD_DTYPE_I64:
        return (double)((const int64_t *)p)[i];
    case SPMD_DTYPE_F16:
        return spmd_f16_to_f32(((const uint16_t *)p)[i]);
    case SPMD_DTYPE_BF16:
        return spmd_bf16_to_f32(((const uint16_t *)p)[i]);
    case SPMD_DTYPE_U8:
    case SPMD_DTYPE_BOOL:
        return ((const uint8_t *)p)[i];
    default:
        return NAN;
    }
}

void spmd_test_store(spmd_dtype t, void *p, int64_t i, double v)
{
    switch (t) {
    case SPMD_DTYPE_F32:
        ((float *)p)[i] = (float)v;
        break;
    case SPMD_DTYPE_F64:
        ((double *)p)[i] = v;
        break;
    case SPMD_DTYPE_I32:
        ((int32_t *)p)[i] = (int32_t)v;
        break;
    case SPMD_DTYPE_I64:
        ((int64_t *)p)[i] = (int64_t)v;
        break;
    case SPMD_DTYPE_F16:
        ((uint16_t *)p)[i] = spmd_f32_to_f16((float)v);
        break;
    case SPMD_DTYPE_BF16:
        ((uint16_t *)p)[i] = spmd_f32_to_bf16((float)v);
        break;
    case SPMD_DTYPE_U8:
        ((uint8_t *)p)[i] = (uint8_t)v;
        break;
    case SPMD_DTYPE_BOOL:
        ((uint8_t *)p)[i] = v != 0;
        break;
    default:
        break;
    }
}
