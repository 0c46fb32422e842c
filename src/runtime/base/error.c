/* Status strings and the thread-local last error (libgit2's model: per thread, never NULL). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/base/check.h"

static _Thread_local char last_error[SPMD__MESSAGE_CAPACITY];
/* where the source raised it: for developers, never in the message users read */
static _Thread_local char last_location[128];

const char *spmd_status_string(spmd_status s)
{
    switch (s) {
#define SPMD_X_(name, value, text)                                                                 \
    case SPMD_##name:                                                                              \
        return text;
        SPMD_STATUS_LIST(SPMD_X_)
#undef SPMD_X_
    }
    return "unknown status";
}

const char *spmd_status_name(spmd_status s)
{
    switch (s) {
#define SPMD_X_(name, value, text)                                                                 \
    case SPMD_##name:                                                                              \
        return "SPMD_" #name;
        SPMD_STATUS_LIST(SPMD_X_)
#undef SPMD_X_
    }
    return "SPMD_UNKNOWN_STATUS";
}

const char *spmd_last_error(void) { return last_error; }

const char *spmd_last_error_location(void) { return last_location; }

void spmd_clear_error(void)
{
    last_error[0] = '\0';
    last_location[0] = '\0';
}

/* Keeps messages short: "src/sharding/mesh.c" instead of the absolute build path. */
static const char *source_path(const char *file)
{
    const char *src = strstr(file, "/src/");
    return src ? src + 1 : file;
}

spmd_status spmd__error(spmd_status code, const char *file, int line, const char *fmt, ...)
{
    char message[SPMD__MESSAGE_CAPACITY];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    /* The message may quote the previous last error, hence the separate buffer. */
    snprintf(last_error, sizeof last_error, "%s", message);
    snprintf(last_location, sizeof last_location, "%s:%d", source_path(file), line);
    return code;
}

static int is_word_char(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* 1 when `word` occurs in `text` as a whole identifier. */
static int has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word))
        if ((p == text || !is_word_char(p[-1])) && !is_word_char(p[n]))
            return 1;
    return 0;
}

spmd_status spmd__error_in(spmd_status st, const char *fn)
{
    if (st == SPMD_OK)
        return st;
    const char *short_name = strncmp(fn, "spmd_", 5) == 0 ? fn + 5 : fn;
    if (has_word(last_error, fn) || has_word(last_error, short_name))
        return st;
    char inner[SPMD__MESSAGE_CAPACITY];
    snprintf(inner, sizeof inner, "%s", last_error);
    spmd__strbuf sb; /* truncates the inner message if it must */
    spmd__strbuf_init(&sb, last_error, sizeof last_error);
    spmd__strbuf_printf(&sb, "%s: %s", fn, inner);
    return st;
}

void spmd__error_set_raw(const char *msg)
{
    if (msg != last_error) {
        snprintf(last_error, sizeof last_error, "%s", msg);
        last_location[0] = '\0'; /* another process's words, or a copy kept: no place here */
    }
}

void spmd__strbuf_init(spmd__strbuf *sb, char *buf, size_t size)
{
    sb->buf = buf;
    sb->size = size;
    sb->len = 0;
    if (size)
        buf[0] = '\0';
}

void spmd__strbuf_printf(spmd__strbuf *sb, const char *fmt, ...)
{
    size_t room = sb->len < sb->size ? sb->size - sb->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room ? sb->buf + sb->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        sb->len += (size_t)n;
}

int spmd__strbuf_fits(const spmd__strbuf *sb) { return sb->len < sb->size; }

spmd_status spmd__strbuf_start(spmd__strbuf *sb, char *buf, size_t size, const char *fn)
{
    SPMD_REQUIRE(buf != NULL && size > 0, SPMD_ERR_INVALID_ARGUMENT,
                 "%s: buf is NULL or size is 0; pass a buffer for the text", fn);
    spmd__strbuf_init(sb, buf, size);
    return SPMD_OK;
}

spmd_status spmd__strbuf_finish(const spmd__strbuf *sb, const char *fn)
{
    SPMD_REQUIRE(spmd__strbuf_fits(sb), SPMD_ERR_INVALID_ARGUMENT,
                 "%s: buffer of %zu bytes is too small; %zu are needed (the text is truncated)", fn,
                 sb->size, sb->len + 1);
    return SPMD_OK;
}

void spmd__strbuf_int_list(spmd__strbuf *sb, const int *v, int n)
{
    enum { SHOWN_EACH_END = 8 };
    spmd__strbuf_printf(sb, "[");
    for (int i = 0; i < n; i++) {
        if (n > 2 * SHOWN_EACH_END && i == SHOWN_EACH_END) {
            spmd__strbuf_printf(sb, ", ...");
            i = n - SHOWN_EACH_END;
        }
        spmd__strbuf_printf(sb, i ? ", %d" : "%d", v[i]);
    }
    spmd__strbuf_printf(sb, "]");
}

void spmd__strbuf_shape(spmd__strbuf *sb, const int64_t *shape, int ndim)
{
    spmd__strbuf_printf(sb, "(");
    for (int i = 0; i < ndim; i++)
        spmd__strbuf_printf(sb, i ? ", %lld" : "%lld", (long long)shape[i]);
    spmd__strbuf_printf(sb, ndim == 1 ? ",)" : ")");
}
