/* Private: index maps that the host loops and the CUDA kernels of the block ops both follow. */
#ifndef SPMD_BACKEND_INDEX_MAP_H
#define SPMD_BACKEND_INDEX_MAP_H

#include <stdint.h>

#include <spmd/spec.h> /* SPMD_MAX_RANK */

/** A transpose: output element i, as coordinates over `shape` (out's, row-major), reads the
 * input at the sum of coordinate j times in_stride[j] (in elements). */
typedef struct spmd__transpose_map {
    int ndim;
    int64_t shape[SPMD_MAX_RANK];
    int64_t in_stride[SPMD_MAX_RANK];
} spmd__transpose_map;

/** A box copied between two row-major buffers: element i of the box, as coordinates c over
 * `extent`, goes from src element src_at + sum c[j] src_stride[j] to dst element dst_at + sum
 * c[j] dst_stride[j]. */
typedef struct spmd__box_map {
    int ndim;
    int64_t extent[SPMD_MAX_RANK];
    int64_t src_stride[SPMD_MAX_RANK];
    int64_t dst_stride[SPMD_MAX_RANK];
    int64_t src_at, dst_at;
} spmd__box_map;

#endif /* SPMD_BACKEND_INDEX_MAP_H */
