/* Private: strided copies of boxes between dense row-major arrays. */
#ifndef SPMD_COPY_H
#define SPMD_COPY_H

#include <stddef.h>
#include <stdint.h>

/**
 * Copies a region of `extent` elements per dimension from `src` (dense, shape `src_shape`),
 * starting at `src_start`, into `dst` (dense, shape `dst_shape`) at `dst_start`. Trailing
 * dimensions covered whole in both arrays are merged into single memcpy runs.
 */
void spmd__copy_region(size_t elem_size, int ndim, const int64_t *extent, void *dst,
                       const int64_t *dst_shape, const int64_t *dst_start, const void *src,
                       const int64_t *src_shape, const int64_t *src_start);

/**
 * Copies `extent` elements per dimension between arbitrary strided layouts (strides in
 * elements). Innermost dimensions contiguous in both are merged into memcpy runs.
 */
void spmd__copy_strided(size_t elem_size, int ndim, const int64_t *extent, void *dst,
                        const int64_t *dst_strides, const void *src, const int64_t *src_strides);

/**
 * Copies `height` rows of `width` bytes whose starts lie `dpitch` / `spitch` bytes apart (the
 * shape of cudaMemcpy2D); returns 0, or nonzero to stop the copy.
 */
typedef int (*spmd__copy_rows_fn)(void *arg, void *dst, size_t dpitch, const void *src,
                                  size_t spitch, size_t width, size_t height);

/** The rows copied with memcpy (arg unused): a spmd__copy_rows_fn for host memory. */
int spmd__copy_rows_host(void *arg, void *dst, size_t dpitch, const void *src, size_t spitch,
                         size_t width, size_t height);

/** As spmd__copy_strided / spmd__copy_region, moving the bytes with `rows` (0 or its error). */
int spmd__copy_strided_with(spmd__copy_rows_fn rows, void *arg, size_t elem_size, int ndim,
                            const int64_t *extent, void *dst, const int64_t *dst_strides,
                            const void *src, const int64_t *src_strides);
int spmd__copy_region_with(spmd__copy_rows_fn rows, void *arg, size_t elem_size, int ndim,
                           const int64_t *extent, void *dst, const int64_t *dst_shape,
                           const int64_t *dst_start, const void *src, const int64_t *src_shape,
                           const int64_t *src_start);

/** Row-major strides (in elements) of a dense array of `shape`. */
void spmd__dense_strides(int ndim, const int64_t *shape, int64_t *strides);

/** Number of elements of a shape (the product of its extents; 1 for rank 0). */
int64_t spmd__shape_elements(int ndim, const int64_t *shape);

#endif /* SPMD_COPY_H */
