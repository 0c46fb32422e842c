/* Element types. */
#ifndef SPMD_DTYPE_H
#define SPMD_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "spmd/export.h"

SPMD_BEGIN_DECLS

/* X(NAME, stable value, bytes, numpy name). f16 and bf16 are stored as uint16_t bit patterns. */
#define SPMD_DTYPE_LIST(X)                                                                         \
    X(F32, 0, 4, "float32")                                                                        \
    X(F64, 1, 8, "float64")                                                                        \
    X(I32, 2, 4, "int32")                                                                          \
    X(I64, 3, 8, "int64")                                                                          \
    X(U8, 4, 1, "uint8")                                                                           \
    X(BOOL, 5, 1, "bool")                                                                          \
    X(F16, 6, 2, "float16")                                                                        \
    X(BF16, 7, 2, "bfloat16")

typedef enum spmd_dtype {
#define SPMD_X_(name, value, bytes, text) SPMD_DTYPE_##name = value,
    SPMD_DTYPE_LIST(SPMD_X_)
#undef SPMD_X_
        SPMD_DTYPE_COUNT /* not a dtype; keep last */
} spmd_dtype;

/** Bytes per element; 0 for a value that is not a dtype. */
SPMD_API size_t spmd_dtype_size(spmd_dtype t);
/** numpy-style name ("float32"); "invalid" for a value that is not a dtype. */
SPMD_API const char *spmd_dtype_name(spmd_dtype t);
/** Parses a numpy-style name ("float32", also "f32"); returns SPMD_DTYPE_COUNT if unknown. */
SPMD_API spmd_dtype spmd_dtype_from_name(const char *name);

/* IEEE binary16 and bfloat16 conversions, round to nearest even; NaN stays NaN. */
SPMD_API uint16_t spmd_f32_to_f16(float x);
SPMD_API float spmd_f16_to_f32(uint16_t h);
SPMD_API uint16_t spmd_f32_to_bf16(float x);
SPMD_API float spmd_bf16_to_f32(uint16_t b);

SPMD_END_DECLS

#endif /* SPMD_DTYPE_H */
