/* Private: copies whose results bypass the caches. */
#ifndef SPMD_RUNTIME_STREAM_COPY_H
#define SPMD_RUNTIME_STREAM_COPY_H

#include <stddef.h>

/**
 * memcpy with non-temporal stores: for results too large to stay in the caches, it skips the
 * read-for-ownership of every written line. The stores are weakly ordered: call
 * spmd__copy_streaming_fence before another thread may read them.
 */
void spmd__copy_streaming(void *dst, const void *src, size_t bytes);
void spmd__copy_streaming_fence(void);
/** spmd__copy_streaming where `streaming` and the copy spans whole lines enough to gain (from
 * SPMD__STREAMING_LEAST_BYTES; a few bytes' run would mix partial lines of both kinds), else
 * memcpy. */
#define SPMD__STREAMING_LEAST_BYTES 256
void spmd__copy_either(void *dst, const void *src, size_t bytes, int streaming);

#endif /* SPMD_RUNTIME_STREAM_COPY_H */
