/* Status codes and the thread-local last-error message. */
#ifndef SPMD_STATUS_H
#define SPMD_STATUS_H

#include "spmd/export.h"

SPMD_BEGIN_DECLS

/*
 * Every fallible function returns an spmd_status: 0 is success, failures are negative and
 * grouped by what they leave unusable.
 *   -1 .. -19   caller error: fix the call; nothing was modified.
 *   -20 .. -39  resource error: free something and retry.
 *   -40 .. -59  backend error: the device or its stream may be unusable.
 *   -60 .. -79  distributed error: the processes disagree or one is gone; the objects
 *               involved in the failed collective are unusable, destroy them.
 * X(name, value, static description)
 */
#define SPMD_STATUS_LIST(X)                                                                        \
    X(OK, 0, "success")                                                                            \
    X(ERR_INVALID_ARGUMENT, -1, "invalid argument")                                                \
    X(ERR_SHAPE, -2, "shape mismatch")                                                             \
    X(ERR_SPEC, -3, "invalid partition spec")                                                      \
    X(ERR_INCOMPATIBLE_DEVICES, -4, "incompatible devices")                                        \
    X(ERR_NOT_ADDRESSABLE, -5, "data not addressable from this process")                           \
    X(ERR_UNSUPPORTED, -6, "unsupported by this build or platform")                                \
    X(ERR_OUT_OF_MEMORY, -20, "out of memory")                                                     \
    X(ERR_BACKEND, -40, "device backend error")                                                    \
    X(ERR_DISTRIBUTED, -60, "distributed runtime error")                                           \
    X(ERR_COLLECTIVE_MISMATCH, -61, "processes or devices issued mismatched collectives")          \
    X(ERR_TIMEOUT, -62, "timed out waiting for other participants")                                \
    X(ERR_INTERNAL, -99, "internal error in libspmd")

typedef enum spmd_status {
#define SPMD_X_(name, value, text) SPMD_##name = value,
    SPMD_STATUS_LIST(SPMD_X_)
#undef SPMD_X_
} spmd_status;

/** Static description of a status code; never NULL ("unknown status" for other values). */
SPMD_API const char *spmd_status_string(spmd_status s);

/** Name of the enum constant ("SPMD_ERR_SPEC"); never NULL. */
SPMD_API const char *spmd_status_name(spmd_status s);

/**
 * The detailed message of the last failure on the calling thread: what was wrong and what to
 * do instead. Never NULL ("" when no error was recorded). Valid until the next libspmd call on
 * this thread.
 */
SPMD_API const char *spmd_last_error(void);
/**
 * For developers and bug reports: where in libspmd's sources the last error on this thread was
 * raised ("src/shard_map/executor.c:406"); "" when none, or when the message came from another
 * thread (a device's fn) or process. Never part of spmd_last_error()'s text. Valid as
 * spmd_last_error().
 */
SPMD_API const char *spmd_last_error_location(void);

/** Forget the calling thread's last error. */
SPMD_API void spmd_clear_error(void);

SPMD_END_DECLS

#endif /* SPMD_STATUS_H */
