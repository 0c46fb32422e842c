#include "runtime/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <spmd/runtime.h>

static const char *const level_names[] = {"error", "warning", "info", "debug"};

/* The level $SPMD_LOG_LEVEL names; warning when unset; -1 when it names none. */
static int level_of_env(void)
{
    const char *env = getenv("SPMD_LOG_LEVEL");
    if (!env || !*env)
        return SPMD__LOG_WARNING;
    for (int i = 0; i < 4; i++)
        if (strcasecmp(env, level_names[i]) == 0)
            return i;
    return -1;
}

spmd_status spmd__log_level_from_env(int *level)
{
    *level = level_of_env();
    if (*level >= 0)
        return SPMD_OK;
    *level = SPMD__LOG_WARNING;
    const char *env = getenv("SPMD_LOG_LEVEL");
    return SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                      "environment variable SPMD_LOG_LEVEL=\"%s\" is not a log level; use error, "
                      "warning, info or debug (any case), or unset it",
                      env);
}

/* Read once: the variable is not expected to change while the program runs (spmd_init refuses
 * a value that is not a level). */
static int threshold(void)
{
    static atomic_int cached = -1;
    if (atomic_load_explicit(&cached, memory_order_relaxed) < 0) {
        int level = level_of_env();
        atomic_store_explicit(&cached, level < 0 ? SPMD__LOG_WARNING : level, memory_order_relaxed);
    }
    return atomic_load_explicit(&cached, memory_order_relaxed);
}

int spmd__log_enabled(spmd__log_level level) { return (int)level <= threshold(); }

void spmd__log(spmd__log_level level, const char *fmt, ...)
{
    if (!spmd__log_enabled(level))
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line, so lines from threads and processes do not interleave mid-line. */
    fprintf(stderr, "[spmd p%d] %s: %s\n", spmd_process_index(), level_names[level], line);
}
