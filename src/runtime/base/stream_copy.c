#include "runtime/base/stream_copy.h"

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

void spmd__copy_streaming(void *dst, const void *src, size_t bytes)
{
#if defined(__SSE2__)
    char *d = dst;
    const char *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    head = head < bytes ? head : bytes;
    memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    for (; bytes >= 16; bytes -= 16, d += 16, s += 16)
        _mm_stream_si128((__m128i *)(void *)d, _mm_loadu_si128((const __m128i *)(const void *)s));
    memcpy(d, s, bytes);
#else
    memcpy(dst, src, bytes);
#endif
}

void spmd__copy_either(void *dst, const void *src, size_t bytes, int streaming)
{
    if (streaming && bytes >= SPMD__STREAMING_LEAST_BYTES)
        spmd__copy_streaming(dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

void spmd__copy_streaming_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
