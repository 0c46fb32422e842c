/* Private: one persistent worker thread per local device, and fork-join over them. */
#ifndef SPMD_RUNTIME_WORKER_H
#define SPMD_RUNTIME_WORKER_H

#include <spmd/status.h>

#include "runtime/devices/backend/backend.h"

/** Work for one device; `local_ordinal` says which. Errors go through SPMD_ERROR as usual. */
typedef spmd_status (*spmd__device_task)(int local_ordinal, void *arg);

/**
 * Starts one worker per local device, each bound to hardware device hw[i] of `backend`;
 * `first_id` is the global id of local device 0, used to name devices in messages.
 */
spmd_status spmd__workers_start(int count, int first_id, const spmd__backend *backend,
                                const int *hw);
/** Joins every worker. */
void spmd__workers_stop(void);

/**
 * Runs task(ordinals[i], arg) on each listed device's worker concurrently (ordinals NULL:
 * 0..count-1) and waits for all of them. Returns SPMD_OK or the error of the lowest-ordinal
 * failing device, whose message becomes this thread's last error, prefixed with the device.
 * `what` names the call (a public function) in messages. Called from a device's task, it
 * refuses at once (spmd__worker_refuse_nested).
 */
spmd_status spmd__run_on_devices(const char *what, int count, const int *ordinals,
                                 spmd__device_task task, void *arg);

/**
 * As spmd__run_on_devices, running beside(beside_arg) on the calling thread while the devices
 * work (after them when nested), so that host-side work such as communication overlaps theirs.
 * Returns the devices' error first, else beside's status.
 */
spmd_status spmd__run_on_devices_beside(const char *what, int count, const int *ordinals,
                                        spmd__device_task task, void *arg,
                                        spmd_status (*beside)(void *), void *beside_arg);

/** Local ordinal of the device whose task the calling thread runs; -1 for other threads. */
int spmd__worker_current(void);

/**
 * SPMD_OK outside the devices' tasks; from inside one (fn of a shard_map, say),
 * SPMD_ERR_INVALID_ARGUMENT naming `fn` and the call that runs the task. Every public call that
 * runs on the devices or between processes starts with it, before it touches any state.
 */
spmd_status spmd__worker_refuse_nested(const char *fn);

/**
 * Names the public call on this thread that reaches the devices through another (spmd_pmap
 * through a plan), for the message of a call nested in its fn; returns the previous name, to
 * be restored. spmd__worker_entry_or returns the name set, else `fallback`.
 */
const char *spmd__worker_entry(const char *name);
const char *spmd__worker_entry_or(const char *fallback);

/**
 * Marks `context` (NULL: none) as the running task's context, for spmd__worker_context_is_live:
 * whether a context is one a task runs with now, on any thread (fn may start threads of its
 * own). A context kept after its task returned is not.
 */
void spmd__worker_set_context(const void *context);
int spmd__worker_context_is_live(const void *context);

#endif /* SPMD_RUNTIME_WORKER_H */
