/* Shared by the libFuzzer harnesses of tests/fuzz: checks that abort (libFuzzer reports an
 * abort as a crash and saves the input), and a reader that hands out the input's bytes. */
#ifndef SPMD_FUZZ_COMMON_H
#define SPMD_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The entry points libFuzzer calls; declared for -Wmissing-prototypes. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts with "fuzz check failed: <cond> (<file>:<line>): <message>" when cond is false. */
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz check failed: %s (%s:%d): ", #cond, __FILE__, __LINE__);         \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The input, consumed from the front; past its end every byte reads as 0. */
typedef struct fuzz_reader {
    const uint8_t *data;
    size_t size;
    size_t pos;
} fuzz_reader;

static inline uint8_t fuzz_byte(fuzz_reader *r) { return r->pos < r->size ? r->data[r->pos++] : 0; }

/* An integer in [lo, hi] from one byte. */
static inline int fuzz_range(fuzz_reader *r, int lo, int hi)
{
    return lo + (int)(fuzz_byte(r) % (unsigned)(hi - lo + 1));
}

/* Copies a length-prefixed string (at most cap - 1 bytes, NUL-terminated) into buf. */
static inline void fuzz_string(fuzz_reader *r, char *buf, size_t cap)
{
    size_t n = fuzz_byte(r) % cap;
    size_t i = 0;
    for (; i < n && r->pos < r->size; i++)
        buf[i] = (char)r->data[r->pos++];
    buf[i] = '\0';
}

/* The rest of the input as a new NUL-terminated string (free it). */
static inline char *fuzz_rest(fuzz_reader *r)
{
    size_t n = r->size - r->pos;
    char *text = malloc(n + 1);
    if (text == NULL)
        abort();
    if (n > 0)
        memcpy(text, r->data + r->pos, n);
    text[n] = '\0';
    r->pos = r->size;
    return text;
}

#endif /* SPMD_FUZZ_COMMON_H */
