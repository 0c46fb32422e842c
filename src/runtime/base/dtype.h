/* Private: classes of dtypes, shared by the block ops, the collectives and the array ops. */
#ifndef SPMD_RUNTIME_DTYPE_H
#define SPMD_RUNTIME_DTYPE_H

#include <spmd/dtype.h>

/** float32, float64, float16, bfloat16. */
int spmd__dtype_is_float(spmd_dtype t);
/** The floats, int32 and int64: what arithmetic and reductions take. */
int spmd__dtype_is_number(spmd_dtype t);

#endif /* SPMD_RUNTIME_DTYPE_H */
