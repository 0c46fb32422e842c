/* Private: error recording and the check macros every libspmd source uses. */
#ifndef SPMD_RUNTIME_CHECK_H
#define SPMD_RUNTIME_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <spmd/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SPMD__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
/* A rarely taken path, kept out of the loop that calls it. */
#define SPMD__COLD __attribute__((noinline, cold))
#else
#define SPMD__PRINTF(fmt, args)
#define SPMD__COLD
#endif

/** Records `code` and the formatted message as this thread's last error, and file:line apart
 * (spmd_last_error_location): the message users read names no source location. */
spmd_status spmd__error(spmd_status code, const char *file, int line, const char *fmt, ...)
    SPMD__PRINTF(4, 5);
/** Records a message produced elsewhere (another thread's error) verbatim, with no location. */
void spmd__error_set_raw(const char *msg);
/**
 * For a public function that failed in a function it called: this thread's last error is
 * prefixed with "fn: " unless it already names fn (or fn without "spmd_", as the collectives
 * name themselves). Returns st.
 */
spmd_status spmd__error_in(spmd_status st, const char *fn);

/** Capacity of an error message, including the longest formatted sharding. */
#define SPMD__MESSAGE_CAPACITY 4096

#define SPMD_ERROR(code, ...) spmd__error((code), __FILE__, __LINE__, __VA_ARGS__)

/* Argument checks stay on in release builds: the first function to detect a problem writes
 * the message (UCX's rule), callers only forward the status. */
#define SPMD_REQUIRE(cond, code, ...)                                                              \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return SPMD_ERROR((code), __VA_ARGS__);                                                \
    } while (0)

#define SPMD_REQUIRE_NOT_NULL(ptr, fn)                                                             \
    SPMD_REQUIRE((ptr) != NULL, SPMD_ERR_INVALID_ARGUMENT, "%s: argument '%s' is NULL", (fn), #ptr)

#define SPMD_CHECK(expr)                                                                           \
    do {                                                                                           \
        spmd_status st_ = (expr);                                                                  \
        if (st_ != SPMD_OK)                                                                        \
            return st_;                                                                            \
    } while (0)

#define SPMD_CHECK_GOTO(expr, st, label)                                                           \
    do {                                                                                           \
        (st) = (expr);                                                                             \
        if ((st) != SPMD_OK)                                                                       \
            goto label;                                                                            \
    } while (0)

/** Copies NUL-terminated text into dst (size bytes), truncating quietly. */
static inline void spmd__copy_text(char *dst, size_t size, const char *src)
{
    size_t n = 0;
    while (n + 1 < size && src[n])
        n++;
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
    if (size)
        dst[n] = '\0';
}

/** Marks a status as deliberately unused (formatting text for a message already failing). */
static inline void spmd__ignore(spmd_status st) { (void)st; }

/** a*b into *out; nonzero on size_t overflow. */
static inline int spmd__mul_overflows(size_t a, size_t b, size_t *out)
{
    size_t product; /* the compiler's check: a multiplication, where a test by division cost
                       tens of cycles on every block's size */
    if (__builtin_mul_overflow(a, b, &product))
        return 1;
    *out = product;
    return 0;
}

/* Room for the longest legal formatted mesh (8 axes of 63-character names), spec (16 entries
 * naming up to 8 such axes) and sharding, so that formatting for messages never truncates. */
#define SPMD__MESH_TEXT 1024
#define SPMD__SPEC_TEXT 1024
#define SPMD__SHARDING_TEXT (SPMD__MESH_TEXT + SPMD__SPEC_TEXT + 64)

/* Magic first field of every handle, checked on entry to catch wrong or freed handles. */
#define SPMD__MAGIC_MESH 0x4d455348u     /* "MESH" */
#define SPMD__MAGIC_SPEC 0x53504543u     /* "SPEC" */
#define SPMD__MAGIC_SHARDING 0x53484152u /* "SHAR" */
#define SPMD__MAGIC_ARRAY 0x41525259u    /* "ARRY" */
#define SPMD__MAGIC_DEAD 0xdeadbeefu

/* Bounded string building for messages and formatted output. */
typedef struct spmd__strbuf {
    char *buf;
    size_t size;
    size_t len; /* characters wanted so far (may exceed size - 1 when truncated) */
} spmd__strbuf;

void spmd__strbuf_init(spmd__strbuf *sb, char *buf, size_t size);
void spmd__strbuf_printf(spmd__strbuf *sb, const char *fmt, ...) SPMD__PRINTF(2, 3);
/** 1 when everything appended fit. */
int spmd__strbuf_fits(const spmd__strbuf *sb);
/**
 * Starts formatting into a caller's buffer for public function `fn`:
 * SPMD_ERR_INVALID_ARGUMENT when buf is NULL or size is 0.
 */
spmd_status spmd__strbuf_start(spmd__strbuf *sb, char *buf, size_t size, const char *fn);
/** SPMD_ERR_INVALID_ARGUMENT, saying how many bytes are needed, when the text did not fit. */
spmd_status spmd__strbuf_finish(const spmd__strbuf *sb, const char *fn);
/** Appends "[a, b, c]" for a list of ints, eliding the middle of long lists. */
void spmd__strbuf_int_list(spmd__strbuf *sb, const int *v, int n);
/** Appends "(a, b, c)" for a shape. */
void spmd__strbuf_shape(spmd__strbuf *sb, const int64_t *shape, int ndim);

#ifdef __cplusplus
}
#endif

/** FNV-1a of `n` bytes, continuing from `h` (start from SPMD__FNV1A_SEED): fingerprints. */
#define SPMD__FNV1A_SEED 0xcbf29ce484222325ull
static inline uint64_t spmd__fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = (const unsigned char *)data; /* C++ too: the .cu files include this */
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

#endif /* SPMD_RUNTIME_CHECK_H */
