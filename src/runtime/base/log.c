#include "runtime/base/log.h"

#include <pthread.h>
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

/* The user's logger. The mutex serializes its calls and lets spmd_set_log_callback wait out a
 * call in progress; messages are rare, so the lock costs nothing that matters. */
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static spmd_log_fn sink_fn;
static void *sink_user;
static _Thread_local int in_sink; /* this thread is inside the user's logger */

spmd_status spmd_set_log_callback(spmd_log_fn fn, void *user)
{
    SPMD_REQUIRE(!in_sink, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_set_log_callback: called from inside the log callback; change the "
                 "callback from another place in the program");
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn;
    sink_user = fn ? user : NULL;
    pthread_mutex_unlock(&sink_lock);
    return SPMD_OK;
}

void spmd__log(spmd__log_level level, const char *fmt, ...)
{
    if (!spmd__log_enabled(level) || in_sink) /* a message about the logger would recurse */
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    int process = spmd_process_index();
    pthread_mutex_lock(&sink_lock);
    if (sink_fn) {
        in_sink = 1;
        sink_fn((spmd_log_level)level, process, line, sink_user);
        in_sink = 0;
    } else {
        /* One fprintf per line, so lines from threads and processes do not interleave. */
        fprintf(stderr, "[spmd p%d] %s: %s\n", process, level_names[level], line);
    }
    pthread_mutex_unlock(&sink_lock);
}
