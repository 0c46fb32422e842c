/* Private: diagnostics on stderr, filtered by $SPMD_LOG_LEVEL (error, warning, info, debug). */
#ifndef SPMD_RUNTIME_LOG_H
#define SPMD_RUNTIME_LOG_H

#include "runtime/base/check.h"

typedef enum spmd__log_level {
    SPMD__LOG_ERROR = 0,
    SPMD__LOG_WARNING = 1,
    SPMD__LOG_INFO = 2,
    SPMD__LOG_DEBUG = 3
} spmd__log_level;

void spmd__log(spmd__log_level level, const char *fmt, ...) SPMD__PRINTF(2, 3);
int spmd__log_enabled(spmd__log_level level);
/** The level $SPMD_LOG_LEVEL names (case-insensitive; warning when unset), or an error. */
spmd_status spmd__log_level_from_env(int *level);

#define SPMD_WARN(...) spmd__log(SPMD__LOG_WARNING, __VA_ARGS__)
#define SPMD_DEBUG(...) spmd__log(SPMD__LOG_DEBUG, __VA_ARGS__)

#endif /* SPMD_RUNTIME_LOG_H */
