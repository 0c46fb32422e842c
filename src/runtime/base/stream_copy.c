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
        spmd__copy_cached(dst, src, bytes);
}

/* glibc 2.36 on AMD copies a buffer longer than its rep_movsb_stop_threshold (the L2's size:
 * 1 MiB on this machine) and shorter than its non-temporal threshold (3/4 of the L3) with a loop
 * of vector loads and stores, backward where the two buffers' page offsets alias; `rep movsb`
 * of shorter pieces went faster: one thread, 32 MiB 1.55 -> 1.24 ms; 2 x 1 with CMA, an
 * all_to_all's own half, 8 and 16 MiB 326 -> 234 and 1142 -> 735 us (medians of 6 runs
 * alternating); in one process at 2 devices, all_gather, ppermute and all_to_all of 8 MiB
 * 260-298 -> 210-232 us. Pieces of 128 KiB and 512 KiB measured alike; 256 KiB stays below the
 * cut-off on an L2 of 512 KiB too. On Intel that cut-off is the non-temporal threshold itself.
 * Beyond that threshold the pieces stay in the caches where glibc's whole copy would go around
 * them: measured faster for the copy collectives' outputs up to 256 MiB (collectives_gather.c);
 * the callers that want the stores around the caches say so (spmd__copy_either). */
void spmd__copy_cached(void *dst, const void *src, size_t bytes)
{
    char *d = dst;
    const char *s = src;
    if (d < s + bytes && s < d + bytes) { /* a psum's input may overlap its output partly */
        memmove(d, s, bytes);
        return;
    }
    for (size_t at = 0; at < bytes; at += SPMD__COPY_PIECE_BYTES)
        memcpy(d + at, s + at,
               bytes - at < SPMD__COPY_PIECE_BYTES ? bytes - at : SPMD__COPY_PIECE_BYTES);
}

void spmd__copy_streaming_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
