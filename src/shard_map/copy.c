#include "shard_map/copy.h"

#include <string.h>

#include <spmd/spec.h>

int64_t spmd__shape_elements(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

void spmd__copy_region(size_t elem_size, int ndim, const int64_t *extent, void *dst,
                       const int64_t *dst_shape, const int64_t *dst_start, const void *src,
                       const int64_t *src_shape, const int64_t *src_start)
{
    if (ndim == 0) {
        memcpy(dst, src, elem_size);
        return;
    }
    int64_t dst_stride[SPMD_MAX_RANK], src_stride[SPMD_MAX_RANK];
    int64_t ds = 1, ss = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        dst_stride[d] = ds;
        src_stride[d] = ss;
        ds *= dst_shape[d];
        ss *= src_shape[d];
    }
    /* Dimensions inner..ndim-1 form one contiguous run in both arrays. */
    int inner = ndim - 1;
    int64_t run = extent[inner];
    while (inner > 0 && extent[inner] == dst_shape[inner] && extent[inner] == src_shape[inner]) {
        inner--;
        run *= extent[inner];
    }
    int64_t dst_base = 0, src_base = 0;
    for (int d = 0; d < ndim; d++) {
        dst_base += dst_start[d] * dst_stride[d];
        src_base += src_start[d] * src_stride[d];
    }
    size_t run_bytes = (size_t)run * elem_size;
    int64_t idx[SPMD_MAX_RANK] = {0};
    for (;;) {
        int64_t dst_off = dst_base, src_off = src_base;
        for (int d = 0; d < inner; d++) {
            dst_off += idx[d] * dst_stride[d];
            src_off += idx[d] * src_stride[d];
        }
        memcpy((char *)dst + (size_t)dst_off * elem_size,
               (const char *)src + (size_t)src_off * elem_size, run_bytes);
        int d = inner - 1;
        while (d >= 0 && ++idx[d] == extent[d])
            idx[d--] = 0;
        if (d < 0)
            return;
    }
}
