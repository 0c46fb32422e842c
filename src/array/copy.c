#include "array/copy.h"

#include <string.h>

#include <spmd/spec.h>

#include "runtime/base/stream_copy.h"

int64_t spmd__shape_elements(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

void spmd__dense_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d];
    }
}

int spmd__copy_rows_host(void *arg, void *dst, size_t dpitch, const void *src, size_t spitch,
                         size_t width, size_t height)
{
    (void)arg;
    for (size_t r = 0; r < height; r++)
        spmd__copy_cached((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return 0;
}

int spmd__copy_strided_with(spmd__copy_rows_fn rows, void *arg, size_t elem_size, int ndim,
                            const int64_t *extent, void *dst, const int64_t *dst_strides,
                            const void *src, const int64_t *src_strides)
{
    /* Drop unit dimensions, then merge dimension d into d+1 while both layouts are
     * contiguous across them. */
    int64_t ext[SPMD_MAX_RANK + 1], ds[SPMD_MAX_RANK + 1], ss[SPMD_MAX_RANK + 1];
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if (extent[d] == 0)
            return 0;
        if (extent[d] == 1)
            continue;
        ext[n] = extent[d];
        ds[n] = dst_strides[d];
        ss[n] = src_strides[d];
        n++;
    }
    int m = 0;
    for (int d = 0; d < n; d++) {
        if (m > 0 && ds[m - 1] == ds[d] * ext[d] && ss[m - 1] == ss[d] * ext[d]) {
            ext[m - 1] *= ext[d];
            ds[m - 1] = ds[d];
            ss[m - 1] = ss[d];
        } else {
            ext[m] = ext[d];
            ds[m] = ds[d];
            ss[m] = ss[d];
            m++;
        }
    }
    /* The innermost run is contiguous in both when it can; the dimension outside it gives the
     * rows of one `rows` call, and the dimensions further out are iterated here. */
    size_t run = 1;
    int outer = m;
    if (m > 0 && ds[m - 1] == 1 && ss[m - 1] == 1) {
        run = (size_t)ext[m - 1];
        outer = m - 1;
    }
    size_t height = 1, dpitch = 0, spitch = 0;
    if (outer > 0) {
        outer--;
        height = (size_t)ext[outer];
        dpitch = (size_t)ds[outer] * elem_size;
        spitch = (size_t)ss[outer] * elem_size;
    }
    size_t run_bytes = run * elem_size;
    int64_t idx[SPMD_MAX_RANK + 1] = {0};
    for (;;) {
        int64_t doff = 0, soff = 0;
        for (int d = 0; d < outer; d++) {
            doff += idx[d] * ds[d];
            soff += idx[d] * ss[d];
        }
        int rc = rows(arg, (char *)dst + (size_t)doff * elem_size, dpitch,
                      (const char *)src + (size_t)soff * elem_size, spitch, run_bytes, height);
        if (rc)
            return rc;
        int d = outer - 1;
        while (d >= 0 && ++idx[d] == ext[d])
            idx[d--] = 0;
        if (d < 0)
            return 0;
    }
}

void spmd__copy_strided(size_t elem_size, int ndim, const int64_t *extent, void *dst,
                        const int64_t *dst_strides, const void *src, const int64_t *src_strides)
{
    (void)spmd__copy_strided_with(spmd__copy_rows_host, NULL, elem_size, ndim, extent, dst,
                                  dst_strides, src, src_strides);
}

/* Whether a region of `extent` is one run of elements in a dense block of `shape`: every
 * dimension inside the outermost one longer than 1 is whole. */
static int is_one_run(int ndim, const int64_t *extent, const int64_t *shape)
{
    int d = 0;
    while (d < ndim && extent[d] == 1)
        d++;
    for (d++; d < ndim; d++)
        if (extent[d] != shape[d])
            return 0;
    return 1;
}

int spmd__copy_region_with(spmd__copy_rows_fn rows, void *arg, size_t elem_size, int ndim,
                           const int64_t *extent, void *dst, const int64_t *dst_shape,
                           const int64_t *dst_start, const void *src, const int64_t *src_shape,
                           const int64_t *src_start)
{
    int64_t ds[SPMD_MAX_RANK + 1], ss[SPMD_MAX_RANK + 1];
    spmd__dense_strides(ndim, dst_shape, ds);
    spmd__dense_strides(ndim, src_shape, ss);
    int64_t doff = 0, soff = 0;
    for (int d = 0; d < ndim; d++) {
        doff += dst_start[d] * ds[d];
        soff += src_start[d] * ss[d];
    }
    /* one run in both (a transpose-like reshard's pieces are often one element each): one row,
     * without the strided walk's set-up, which costs more than such a piece */
    if (is_one_run(ndim, extent, dst_shape) && is_one_run(ndim, extent, src_shape)) {
        size_t bytes = elem_size;
        for (int d = 0; d < ndim; d++)
            bytes *= (size_t)extent[d];
        /* the call the strided walk makes once it merged every dimension into one run */
        return bytes ? rows(arg, (char *)dst + (size_t)doff * elem_size, 0,
                            (const char *)src + (size_t)soff * elem_size, 0, bytes, 1)
                     : 0;
    }
    return spmd__copy_strided_with(rows, arg, elem_size, ndim, extent,
                                   (char *)dst + (size_t)doff * elem_size, ds,
                                   (const char *)src + (size_t)soff * elem_size, ss);
}

void spmd__copy_region(size_t elem_size, int ndim, const int64_t *extent, void *dst,
                       const int64_t *dst_shape, const int64_t *dst_start, const void *src,
                       const int64_t *src_shape, const int64_t *src_start)
{
    (void)spmd__copy_region_with(spmd__copy_rows_host, NULL, elem_size, ndim, extent, dst,
                                 dst_shape, dst_start, src, src_shape, src_start);
}
