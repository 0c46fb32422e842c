/* Private: one persistent worker thread per local device, and fork-join over them. */
#ifndef SPMD_RUNTIME_WORKER_H
#define SPMD_RUNTIME_WORKER_H

#include <spmd/status.h>

#include "runtime/backend/backend.h"

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
 * Called from a worker thread (a task that itself needs devices), it runs the tasks inline.
 */
spmd_status spmd__run_on_devices(int count, const int *ordinals, spmd__device_task task, void *arg);

/**
 * As spmd__run_on_devices, running beside(beside_arg) on the calling thread while the devices
 * work (after them when nested), so that host-side work such as communication overlaps theirs.
 * Returns the devices' error first, else beside's status.
 */
spmd_status spmd__run_on_devices_beside(int count, const int *ordinals, spmd__device_task task,
                                        void *arg, spmd_status (*beside)(void *), void *beside_arg);

/** Local ordinal of the device whose worker is the calling thread; -1 for other threads. */
int spmd__worker_current(void);

#endif /* SPMD_RUNTIME_WORKER_H */
