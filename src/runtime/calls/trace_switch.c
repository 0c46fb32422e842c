/* The trace's switches (spmd/trace.h): spmd_trace_start, spmd_trace_stop and SPMD_TRACE at
 * spmd_init, each between calls (it takes the call lock), so that the ring never changes under
 * a writer. The writer itself (trace.c) knows nothing of the call lock. */
#include <stdlib.h>

#include <spmd/runtime.h>
#include <spmd/trace.h>

#include "runtime/base/check.h"
#include "runtime/calls/calls.h"
#include "runtime/calls/trace.h"

static spmd_status spmd_trace_start_checked(const char *dir, const spmd_trace_options *options)
{
    spmd__call_entry lock;
    SPMD_CHECK(spmd__calls_enter_unnumbered("spmd_trace_start", &lock));
    spmd_status st = spmd__trace_start_locked(dir, options);
    spmd__calls_exit(&lock, st);
    return st;
}

static spmd_status spmd_trace_stop_checked(void)
{
    spmd__call_entry lock;
    SPMD_CHECK(spmd__calls_enter_unnumbered("spmd_trace_stop", &lock));
    if (spmd__tracing())
        spmd__trace_close(SPMD_TRACE_STOPPED);
    spmd__calls_exit(&lock, SPMD_OK);
    return SPMD_OK;
}

spmd_status spmd__trace_start_from_env(void)
{
    const char *dir = getenv("SPMD_TRACE");
    if (!dir || !dir[0])
        return SPMD_OK;
    spmd__call_entry lock;
    SPMD_CHECK(spmd__calls_enter_unnumbered("spmd_init", &lock));
    spmd_status st = spmd__tracing() ? SPMD_OK : spmd__trace_start_locked(dir, NULL);
    spmd__calls_exit(&lock, st);
    if (st != SPMD_OK) {
        char detail[SPMD__MESSAGE_CAPACITY];
        spmd__copy_text(detail, sizeof detail, spmd_last_error());
        return SPMD_ERROR(st, "SPMD_TRACE=%s: %s", dir, detail);
    }
    return SPMD_OK;
}

/* Public entry points: a failure in a callee is reported under the name the caller used. */

spmd_status spmd_trace_start(const char *dir, const spmd_trace_options *options)
{
    return spmd__error_in(spmd_trace_start_checked(dir, options), "spmd_trace_start");
}

spmd_status spmd_trace_stop(void)
{
    return spmd__error_in(spmd_trace_stop_checked(), "spmd_trace_stop");
}
