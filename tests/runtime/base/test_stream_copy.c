/* The copy with non-temporal stores (src/runtime/base/stream_copy.c): every byte lands where
 * memcpy would put it, whatever the destination's alignment (an unaligned head, the 16-byte
 * stores, an unaligned tail) and length, and nothing beside it is touched. */
#include <stdint.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_alignment_and_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
