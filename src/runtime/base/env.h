/* Private: strict parsing of SPMD_* environment variables, and what a launcher says there. */
#ifndef SPMD_RUNTIME_ENV_H
#define SPMD_RUNTIME_ENV_H

#include <spmd/status.h>

/**
 * Reads integer variable `name` into *value when it is set and non-empty (*is_set = 1);
 * leaves *value alone otherwise. SPMD_ERR_INVALID_ARGUMENT, naming the variable and the
 * accepted range, when it is not an integer in [min, max].
 */
spmd_status spmd__env_int(const char *name, long min, long max, long *value, int *is_set);

/**
 * Reads a duration in seconds (a number in (0, 1e7]) from variable `name` into *seconds when it
 * is set; leaves *seconds (the default, which the message quotes) alone otherwise.
 * SPMD_ERR_INVALID_ARGUMENT naming the variable when it is set to anything else, empty included.
 */
spmd_status spmd__env_seconds(const char *name, double *seconds);

/** Process count announced by a launcher (mpirun, srun, hydra) in the environment; 0 if none
 * (*launcher: its name, when not NULL). */
int spmd__launcher_process_count(const char **launcher);

#endif /* SPMD_RUNTIME_ENV_H */
