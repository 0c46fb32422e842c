/* Private: copies of large buffers: through the caches in pieces, or around them. */
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
 * spmd__copy_cached. */
#define SPMD__STREAMING_LEAST_BYTES 256
void spmd__copy_either(void *dst, const void *src, size_t bytes, int streaming);
/**
 * memcpy through the caches, in pieces of at most SPMD__COPY_PIECE_BYTES: glibc copies a piece
 * with `rep movsb`, where a whole buffer beyond its cut-off (the L2's size on AMD, 1 MiB here)
 * goes to a loop of vector stores that measured slower (stream_copy.c). Buffers that overlap
 * go whole, as memmove.
 */
#define SPMD__COPY_PIECE_BYTES ((size_t)256 << 10)
void spmd__copy_cached(void *dst, const void *src, size_t bytes);

#endif /* SPMD_RUNTIME_STREAM_COPY_H */
