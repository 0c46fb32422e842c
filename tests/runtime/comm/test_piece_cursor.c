/*
 * The bytes of messages made of boxes, walked chunk by chunk (src/runtime/comm/piece_cursor.c,
 * the way a streamed all_to_all gathers and scatters them): random boxes of random buffers of
 * rank 0 to 4, some whole along their inner dimensions, some empty, read and written in chunks
 * of random sizes, against a reference that visits every element with nested index loops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/comm/piece_cursor.h"

enum { BOXES = 4, MAX_ELEMS = 4096 };

static unsigned long long seed = 0x9e3779b97f4a7c15ull;
static unsigned next_random(void)
{
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    return (unsigned)(seed >> 11);
}

/* The reference: box p's elements in row-major order, each through its full index. */
static size_t reference_offsets(const spmd__piece *p, size_t *offsets)
{
    int64_t index[SPMD_MAX_RANK] = {0}, total = 1;
    for (int j = 0; j < p->ndim; j++)
        total *= p->extent[j];
    for (int64_t e = 0; e < total; e++) {
        int64_t rest = e, at = 0;
        for (int j = p->ndim - 1; j >= 0; j--) {
            index[j] = rest % p->extent[j];
            rest /= p->extent[j];
        }
        for (int j = 0; j < p->ndim; j++)
            at = at * p->shape[j] + p->start[j] + index[j];
        offsets[e] = (size_t)at;
    }
    return (size_t)total;
}

static void random_box(spmd__piece *p, int ndim, const int64_t *shape, void *base, size_t elem)
{
    *p = (spmd__piece){base, elem, ndim, shape, {0}, {0}};
    for (int j = 0; j < ndim; j++) {
        int whole = next_random() % 3 == 0, empty = next_random() % 40 == 0;
        p->start[j] = whole ? 0 : (int64_t)(next_random() % (unsigned)shape[j]);
        p->extent[j] =
            whole ? shape[j] : 1 + (int64_t)(next_random() % (unsigned)(shape[j] - p->start[j]));
        if (empty)
            p->extent[j] = 0;
    }
}

/* The message's bytes read out of the boxes (read: with non-temporal stores into the message
 * at random, as a chunk of a long stream) or written into them, in chunks of 1 to `most` bytes. */
static void walk_in_chunks(const spmd__piece *boxes, int n, unsigned char *message, size_t bytes,
                           unsigned most, int read)
{
    spmd__piece_cursor c;
    spmd__piece_cursor_init(&c, boxes, n);
    for (size_t at = 0; at < bytes;) {
        size_t len = 1 + next_random() % most;
        len = len < bytes - at ? len : bytes - at;
        if (read)
            spmd__piece_cursor_read(&c, message + at, len, (int)(next_random() & 1));
        else
            spmd__piece_cursor_write(&c, message + at, len);
        at += len;
    }
}

static void walks_match_the_reference(void **unused)
{
    (void)unused;
    int failures = 0;
    static unsigned char buffers[BOXES][MAX_ELEMS * 8], written[BOXES][MAX_ELEMS * 8],
        expected[BOXES][MAX_ELEMS * 8], message[BOXES * MAX_ELEMS * 8], want[BOXES * MAX_ELEMS * 8];
    static size_t offsets[MAX_ELEMS];
    for (int trial = 0; trial < 2000; trial++) {
        int ndim = (int)(next_random() % 5);
        size_t elem = (size_t)1 << (next_random() % 4);
        int64_t shape[SPMD_MAX_RANK];
        int64_t elems = 1;
        for (int j = 0; j < ndim; j++) {
            shape[j] = 1 + (int64_t)(next_random() % 7);
            elems *= shape[j];
        }
        int n = 1 + (int)(next_random() % BOXES);
        spmd__piece boxes[BOXES];
        size_t bytes = 0;
        for (int i = 0; i < n; i++) {
            for (size_t k = 0; k < (size_t)elems * elem; k++)
                buffers[i][k] = (unsigned char)next_random();
            random_box(&boxes[i], ndim, shape, buffers[i], elem);
            size_t count = reference_offsets(&boxes[i], offsets);
            for (size_t e = 0; e < count; e++)
                memcpy(want + bytes + e * elem, buffers[i] + offsets[e] * elem, elem);
            bytes += count * elem;
        }
        if (spmd__pieces_bytes(boxes, n) != bytes) {
            print_error("trial %d: %zu bytes counted, the reference has %zu\n", trial,
                        spmd__pieces_bytes(boxes, n), bytes);
            failures++;
            continue;
        }
        /* read in random chunks: the message in order */
        walk_in_chunks(boxes, n, message, bytes, 97, 1);
        if (memcmp(message, want, bytes) != 0) {
            print_error("trial %d: the bytes read differ from the reference (rank %d, %d boxes)\n",
                        trial, ndim, n);
            failures++;
        }
        /* written back in other chunks into copies of the buffers inverted: only the boxes'
         * bytes change, each to the message's */
        for (int i = 0; i < n; i++) {
            for (size_t k = 0; k < (size_t)elems * elem; k++)
                written[i][k] = expected[i][k] = (unsigned char)~buffers[i][k];
            boxes[i].base = written[i];
        }
        for (int i = 0, at = 0; i < n; i++) {
            size_t count = reference_offsets(&boxes[i], offsets);
            for (size_t e = 0; e < count; e++)
                memcpy(expected[i] + offsets[e] * elem, want + (size_t)at + e * elem, elem);
            at += (int)(count * elem);
        }
        walk_in_chunks(boxes, n, want, bytes, 61, 0);
        for (int i = 0; i < n; i++)
            if (memcmp(written[i], expected[i], (size_t)elems * elem) != 0) {
                print_error("trial %d: box %d written differs from the reference\n", trial, i);
                failures++;
            }
    }
    assert_int_equal(failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(walks_match_the_reference)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
