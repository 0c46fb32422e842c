/* Processes and devices: the libspmd equivalent of jax.distributed.initialize() and jax.devices().
 */
#ifndef SPMD_RUNTIME_H
#define SPMD_RUNTIME_H

#include "spmd/export.h"
#include "spmd/status.h"

SPMD_BEGIN_DECLS

/** Most CPU devices one process may start (options.num_cpu_devices, SPMD_NUM_CPU_DEVICES). */
#define SPMD_MAX_CPU_DEVICES 4096

/** Value of an integer option meaning "decide from the environment". */
#define SPMD_AUTO (-1)

typedef enum spmd_platform { SPMD_PLATFORM_CPU = 0, SPMD_PLATFORM_CUDA = 1 } spmd_platform;

typedef struct spmd_init_options {
    unsigned int version; /**< SPMD_INIT_OPTIONS_VERSION */
    int num_cpu_devices;  /**< CPU devices per process, 1..SPMD_MAX_CPU_DEVICES; 0:
                               $SPMD_NUM_CPU_DEVICES, default 1 */
    int platform;         /**< spmd_platform or SPMD_AUTO: $SPMD_PLATFORM, else cuda when a
                               GPU is usable, else cpu */
    int use_mpi;          /**< 1: require MPI; 0: single process even under a launcher;
                               SPMD_AUTO: MPI when started by mpirun/srun or when the caller
                               already initialized MPI */
} spmd_init_options;

#define SPMD_INIT_OPTIONS_VERSION 1
#define SPMD_INIT_OPTIONS_INIT                                                                     \
    {                                                                                              \
        SPMD_INIT_OPTIONS_VERSION, 0, SPMD_AUTO, SPMD_AUTO                                         \
    }

/** Fills `opts` with the defaults of `version`. */
SPMD_API SPMD_NODISCARD spmd_status spmd_init_options_init(spmd_init_options *opts,
                                                           unsigned int version);

/**
 * Starts libspmd: detects the launcher, initializes MPI with thread support (or adopts the
 * MPI the caller already initialized), enumerates this process's devices and exchanges them so
 * that every process sees the same global device list (ids are process-major).
 *
 * Collective over: every process of MPI_COMM_WORLD when MPI is used. Once MPI is up, the
 * processes meet with a deadline of SPMD_INIT_TIMEOUT seconds (default 300; the collective
 * timeout does not apply here): a process that does not call spmd_init in time is named
 * (SPMD_ERR_TIMEOUT), not waited for; MPI is then left initialized
 * (MPI_Finalize would wait for that process) and the process should end. A process late for
 * MPI_Init_thread itself (when spmd_init initializes MPI) keeps the others in Open MPI's own
 * wait, which has no timeout (mpirun --timeout bounds the whole job).
 * Reference-counted: nested calls only count (their options are ignored); each successful
 * spmd_init needs one spmd_finalize. Safe to call from several threads.
 * @param opts NULL for defaults.
 * @return SPMD_OK, SPMD_ERR_INVALID_ARGUMENT (bad option or environment variable, named in the
 *         message), SPMD_ERR_UNSUPPORTED (MPI or CUDA asked for but not built in; MPI the
 *         program initialized below MPI_THREAD_SERIALIZED), SPMD_ERR_BACKEND (no usable GPU
 *         for SPMD_PLATFORM=cuda), SPMD_ERR_DISTRIBUTED (MPI failed, or another process failed
 *         to start; the message names it), SPMD_ERR_TIMEOUT (a process did not arrive).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_init(const spmd_init_options *opts);

/**
 * Drops one reference; the last one joins the device workers, frees the devices and finalizes
 * MPI if spmd_init initialized it (an MPI the caller initialized is left running).
 * Collective over: every process, when the last reference goes. Refused from inside fn (or any
 * task running on a device), where it would join the thread that calls it.
 * @return SPMD_OK, SPMD_ERR_INVALID_ARGUMENT when libspmd is not initialized, or when called
 *         from inside fn.
 */
SPMD_API spmd_status spmd_finalize(void);

/** 1 when spmd_init has succeeded more often than spmd_finalize has run, else 0. */
SPMD_API int spmd_is_initialized(void);

/** This process's index in [0, spmd_process_count()); -1 when not initialized. */
SPMD_API int spmd_process_index(void);
/** Number of processes; 0 when not initialized. */
SPMD_API int spmd_process_count(void);
/** Number of devices over all processes; 0 when not initialized. */
SPMD_API int spmd_device_count(void);
/** Number of this process's devices; 0 when not initialized. */
SPMD_API int spmd_local_device_count(void);
/** Global id of this process's `ordinal`-th device; -1 when out of range or not initialized. */
SPMD_API int spmd_local_device_id(int ordinal);
/** Platform of this process's devices (all devices of one run share a platform). */
SPMD_API spmd_platform spmd_runtime_platform(void);

typedef struct spmd_device_info {
    int id;            /**< global id: process-major, dense in [0, spmd_device_count()) */
    int process_index; /**< owning process */
    int local_ordinal; /**< position among the owning process's devices */
    spmd_platform platform;
    int hardware_ordinal; /**< CUDA: the GPU it runs on; CPU: equal to local_ordinal */
} spmd_device_info;

/** Describes global device `id`. Not collective. */
SPMD_API SPMD_NODISCARD spmd_status spmd_device_get_info(int id, spmd_device_info *info);

/** "cpu" or "cuda"; "invalid" otherwise. */
SPMD_API const char *spmd_platform_name(spmd_platform p);

#define SPMD_FEATURE_MPI 0x1u
#define SPMD_FEATURE_CUDA 0x2u
#define SPMD_FEATURE_NCCL 0x4u

/** Bitmask of SPMD_FEATURE_* compiled into the loaded library. Needs no initialization. */
SPMD_API unsigned int spmd_build_features(void);

/** Severity of a libspmd message; $SPMD_LOG_LEVEL (default warning) drops the less severe. */
typedef enum spmd_log_level {
    SPMD_LOG_ERROR = 0,
    SPMD_LOG_WARNING = 1,
    SPMD_LOG_INFO = 2,
    SPMD_LOG_DEBUG = 3
} spmd_log_level;

/**
 * Receives one libspmd message: its level, the index of the process that wrote it (-1 before
 * spmd_init), and the text (one line, no newline; valid only during the call).
 * Calls are serialized (never two at once in one process) but come from any libspmd thread,
 * device workers included; fn must not call libspmd, and should return quickly.
 */
typedef void (*spmd_log_fn)(spmd_log_level level, int process, const char *message, void *user);

/**
 * Routes libspmd's messages to fn(…, user) instead of stderr; fn NULL restores the default
 * logger, which writes "[spmd pP] level: message" lines to stderr. Thread-safe, and usable
 * before spmd_init: once it returns, no call of the previous fn is running or will start, so
 * its `user` may be freed. Not collective (each process routes its own messages).
 * @return SPMD_OK, or SPMD_ERR_INVALID_ARGUMENT when called from inside a log callback (it
 *         would wait for itself).
 */
SPMD_API spmd_status spmd_set_log_callback(spmd_log_fn fn, void *user);

/*
 * Calls from several threads. Every call that reaches the devices or other processes
 * (spmd_shard_map, spmd_plan_execute, spmd_pmap, spmd_reshard, spmd_device_put, the multihost
 * functions, spmd_finalize ...) runs alone in its process: a call from another thread waits
 * for it to end, first come first served, and each gets the process's next call number.
 * Processes pair the calls they share by their order (on each mesh, each set of processes), as
 * MPI pairs collectives: every process must issue them in the same order. A call from a
 * thread that fn starts waits for the enclosing call to end (fn must not wait for that thread).
 *
 * When processes issue calls in different orders, the calls fail on every process that takes
 * part, with SPMD_ERR_COLLECTIVE_MISMATCH naming both calls (their call numbers and threads),
 * never with data of another call: calls that differ (in kind, mesh, devices, fn, specs,
 * shapes, dtypes, thread name) are told apart by their fingerprints; a call that waits for a
 * process which is inside another call needing this one ends once the processes compare notes
 * (after a fraction of SPMD_COLLECTIVE_TIMEOUT: a fiftieth, within 20..200 ms), not at the
 * timeout. Two calls alike in all of these, issued by two threads, are paired in whatever
 * order the threads came: name the threads (spmd_thread_set_name) to have them told apart.
 */

/**
 * Names the calling thread for libspmd: the name is part of the fingerprint of every call the
 * thread makes (a call from thread 'a' on one process never pairs with one from thread 'b' on
 * another) and appears in messages. NULL or "" removes the name. Not collective; name the
 * corresponding threads of every process alike.
 * @return SPMD_OK, or SPMD_ERR_INVALID_ARGUMENT for a name over 31 characters or with
 *         characters other than printable ASCII (quotes excluded).
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_thread_set_name(const char *name);

/**
 * JAX's thread_guard: enable = 1 makes the calling thread the only one allowed to make calls
 * that reach the devices or other processes; such a call from another thread then fails at
 * once with SPMD_ERR_INVALID_ARGUMENT naming both threads (nothing is sent). enable = 0
 * releases the guard. A debugging aid for programs meant to call from one thread.
 * @return SPMD_OK, or SPMD_ERR_INVALID_ARGUMENT when another thread holds the guard.
 */
SPMD_API SPMD_NODISCARD spmd_status spmd_thread_guard(int enable);

SPMD_END_DECLS

#endif /* SPMD_RUNTIME_H */
