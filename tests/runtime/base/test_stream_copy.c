/* The copies of src/runtime/base/stream_copy.c. With non-temporal stores: every byte lands where
 * memcpy would put it, whatever the destination's alignment (an unaligned head, the 16-byte
 * stores, an unaligned tail) and length, and nothing beside it is touched. In pieces: every
 * length around a piece's edge, and buffers that overlap either way, land as memmove puts
 * them (a byte loop checks), nothing beside them touched. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "runtime/base/stream_copy.h"

enum { SPAN = 4096, GUARD = 64 };

static void test_every_alignment_and_length(void **state)
{
    (void)state;
    static unsigned char src[SPAN + 64], dst[SPAN + 64 + 2 * GUARD], want[sizeof dst];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (unsigned char)(i * 131u + 7u);
    static const size_t lengths[] = {0,  1,  2,  15,  16,  17,  31,   32,   33,
                                     63, 64, 65, 255, 256, 257, 1000, 4095, 4096};
    for (size_t d = 0; d < 16; d++)    /* the destination's offset from 16-byte alignment */
        for (size_t s = 0; s < 3; s++) /* the source's: loads are unaligned anyway */
            for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
                size_t n = lengths[k];
                memset(dst, 0xA5, sizeof dst);
                memset(want, 0xA5, sizeof want);
                unsigned char *at = dst + GUARD;
                at += (16 - ((uintptr_t)at & 15)) & 15; /* aligned, then d bytes past it */
                at += d;
                memcpy(want + (at - dst), src + s, n);
                spmd__copy_streaming(at, src + s, n);
                spmd__copy_streaming_fence();
                if (memcmp(dst, want, sizeof dst) != 0) {
                    size_t bad = 0;
                    while (dst[bad] == want[bad])
                        bad++;
                    fail_msg("destination %zu bytes past 16-byte alignment, source offset %zu, "
                             "%zu bytes: byte %td from the destination's start is 0x%02x, "
                             "expected 0x%02x",
                             d, s, n, (ptrdiff_t)bad - (at - dst), dst[bad], want[bad]);
                }
            }
}

/* Source and destination at `shift` bytes from each other in one buffer (0: apart): the result
 * against a byte-by-byte move of a pristine copy. */
static void check_cached(unsigned char *buf, unsigned char *want, size_t total, size_t from,
                         long shift, size_t n)
{
    for (size_t i = 0; i < total; i++)
        buf[i] = want[i] = (unsigned char)(i * 167u + 13u);
    size_t to = (size_t)((long)from + shift);
    unsigned char *tmp = malloc(n ? n : 1);
    assert_non_null(tmp);
    for (size_t i = 0; i < n; i++)
        tmp[i] = want[from + i];
    for (size_t i = 0; i < n; i++)
        want[to + i] = tmp[i];
    free(tmp);
    spmd__copy_cached(buf + to, buf + from, n);
    if (memcmp(buf, want, total) != 0) {
        size_t bad = 0;
        while (buf[bad] == want[bad])
            bad++;
        fail_msg("%zu bytes moved by %ld: byte %zu of the buffer is 0x%02x, expected 0x%02x", n,
                 shift, bad, buf[bad], want[bad]);
    }
}

static void test_cached_pieces_and_overlaps(void **state)
{
    (void)state;
    const size_t piece = SPMD__COPY_PIECE_BYTES;
    const size_t lengths[] = {0, 1, 4095, piece - 1, piece, piece + 1, 3 * piece + 17};
    const long shifts[] = {-(long)piece - 3, -4096, -1, 1, 4096, (long)piece + 3};
    size_t total = 2 * (3 * piece + 17) + 4 * piece;
    unsigned char *buf = malloc(total), *want = malloc(total);
    assert_non_null(buf);
    assert_non_null(want);
    size_t from = 2 * piece; /* room for every shift either way */
    for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
        check_cached(buf, want, total, from, (long)(3 * piece + 64), lengths[k]); /* apart */
        for (size_t j = 0; j < sizeof shifts / sizeof shifts[0]; j++)
            check_cached(buf, want, total, from, shifts[j], lengths[k]);
    }
    free(buf);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_alignment_and_length),
        cmocka_unit_test(test_cached_pieces_and_overlaps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
