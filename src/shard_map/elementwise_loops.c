/* The float loops of spmd_op_unary / spmd_op_binary, one per op and broadcast. */
#include "shard_map/elementwise_loops.h"

#include <math.h>

/* NaN stays NaN in relu (max(x, 0) in JAX); max and min propagate NaN (lax.max, lax.min) */
#define RELU(F, x) ((x) > 0 || (x) != (x) ? (x) : (F)0)
#define MAX(F, a, b) ((a) != (a) || (b) != (b) ? (F)NAN : (a) > (b) ? (a) : (b))
#define MIN(F, a, b) ((a) != (a) || (b) != (b) ? (F)NAN : (a) < (b) ? (a) : (b))

#define DEFINE_UNARY(name, F)                                                                      \
    int name(spmd_unary_op op, const F *x, F *y, size_t n)                                         \
    {                                                                                              \
        if (op == SPMD_UNARY_NEG) {                                                                \
            for (size_t i = 0; i < n; i++)                                                         \
                y[i] = -x[i];                                                                      \
            return 1;                                                                              \
        }                                                                                          \
        if (op == SPMD_UNARY_RELU) {                                                               \
            for (size_t i = 0; i < n; i++)                                                         \
                y[i] = RELU(F, x[i]);                                                              \
            return 1;                                                                              \
        }                                                                                          \
        return 0;                                                                                  \
    }

DEFINE_UNARY(spmd__unary_loop_f32, float)
DEFINE_UNARY(spmd__unary_loop_f64, double)

/* z = a OP b with b whole, one value, or a row repeated */
#define BROADCASTS(F, EXPR)                                                                        \
    do {                                                                                           \
        if (period == n) {                                                                         \
            for (size_t i = 0; i < n; i++) {                                                       \
                F u = a[i], v = b[i];                                                              \
                z[i] = EXPR;                                                                       \
            }                                                                                      \
        } else if (period == 1) {                                                                  \
            F v = b[0];                                                                            \
            for (size_t i = 0; i < n; i++) {                                                       \
                F u = a[i];                                                                        \
                z[i] = EXPR;                                                                       \
            }                                                                                      \
        } else {                                                                                   \
            for (size_t r = 0; r < n; r += period)                                                 \
                for (size_t j = 0; j < period; j++) {                                              \
                    F u = a[r + j], v = b[j];                                                      \
                    z[r + j] = EXPR;                                                               \
                }                                                                                  \
        }                                                                                          \
    } while (0)

#define DEFINE_BINARY(name, F)                                                                     \
    int name(spmd_binary_op op, const F *a, const F *b, size_t period, F *z, size_t n)             \
    {                                                                                              \
        if (!period || n % period)                                                                 \
            return 0;                                                                              \
        switch (op) {                                                                              \
        case SPMD_BINARY_ADD:                                                                      \
            BROADCASTS(F, u + v);                                                                  \
            return 1;                                                                              \
        case SPMD_BINARY_SUB:                                                                      \
            BROADCASTS(F, u - v);                                                                  \
            return 1;                                                                              \
        case SPMD_BINARY_MUL:                                                                      \
            BROADCASTS(F, u *v);                                                                   \
            return 1;                                                                              \
        case SPMD_BINARY_DIV:                                                                      \
            BROADCASTS(F, u / v);                                                                  \
            return 1;                                                                              \
        case SPMD_BINARY_MAX:                                                                      \
            BROADCASTS(F, MAX(F, u, v));                                                           \
            return 1;                                                                              \
        case SPMD_BINARY_MIN:                                                                      \
            BROADCASTS(F, MIN(F, u, v));                                                           \
            return 1;                                                                              \
        default:                                                                                   \
            return 0;                                                                              \
        }                                                                                          \
    }

DEFINE_BINARY(spmd__binary_loop_f32, float)
DEFINE_BINARY(spmd__binary_loop_f64, double)
