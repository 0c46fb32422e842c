#include "runtime/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spmd/runtime.h>

static const char *const level_names[] = {"error", "warning", "info", "debug"};

/* Read once: the variable is not expected to change while the program runs. */
static int threshold(void)
{
    static atomic_int cached = -1;
    if (atomic_load_explicit(&cached, memory_order_relaxed) < 0) {
        const char *env = getenv("SPMD_LOG_LEVEL");
        int level = SPMD__LOG_WARNING;
        for (int i = 0; env && i < 4; i++)
            if (strcmp(env, level_names[i]) == 0)
                level = i;
        atomic_store_explicit(&cached, level, memory_order_relaxed);
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
