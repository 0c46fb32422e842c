/*
 * Private: the collective trace's writer (public side and file format: spmd/trace.h).
 *
 * Records are made by the thread that holds the call lock (calls) and by its devices' workers
 * (fn, collectives), always within a call: spmd_trace_start and spmd_trace_stop take the call
 * lock, so the ring never changes under a writer. Each writer claims its own slot with one
 * atomic add; a record is begun (what, when) and ended in place (status, when, output digest).
 */
#ifndef SPMD_RUNTIME_TRACE_H
#define SPMD_RUNTIME_TRACE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <spmd/status.h>
#include <spmd/trace.h>

extern atomic_int spmd__trace_flag;

/** 1 while tracing: the one test the success path pays when it is off. */
static inline int spmd__tracing(void)
{
    return atomic_load_explicit(&spmd__trace_flag, memory_order_acquire) != 0;
}

/** 1 when the trace takes digests of blocks. */
int spmd__trace_digests(void);

/**
 * Begins a record (kind SPMD_TRACE_FN or _COLLECTIVE; calls use spmd__trace_call_enter):
 * returns its handle for spmd__trace_end, 0 when none was made.
 */
uint64_t spmd__trace_begin(int kind, unsigned long call, unsigned long mesh_call, int device,
                           unsigned seq, uint64_t fingerprint, uint64_t digest_in,
                           const char *what);
/** Ends record `handle` (0: nothing) with `st` and the output's digest. */
void spmd__trace_end(uint64_t handle, spmd_status st, uint64_t digest_out);

/** A call began (calls.c, with the call lock): `fn`, its number, inside another or not. */
void spmd__trace_call_enter(const char *fn, unsigned long number, int nested);
/** The current call (this thread's innermost) is `what`, number `mesh_call` on its mesh. */
void spmd__trace_call_describe(unsigned long mesh_call, uint64_t fingerprint, const char *what);
/** The current call ended with `st` (its message kept in the header when it failed). */
void spmd__trace_call_exit(spmd_status st);

/** A wait's turn: the process is alive (at most a store of the time). */
void spmd__trace_alive(void);

/** Starts the trace in `dir` (the caller holds the call lock; trace_switch.c). */
spmd_status spmd__trace_start_locked(const char *dir, const spmd_trace_options *options);
/** Stops it, marking the file's end with `state` (SPMD_TRACE_STOPPED...; the call lock held). */
void spmd__trace_close(int state);

/** spmd_init: starts the trace SPMD_TRACE names (SPMD_OK when unset). */
spmd_status spmd__trace_start_from_env(void);
/** spmd_finalize: stops it. */
void spmd__trace_finalize(void);

#endif /* SPMD_RUNTIME_TRACE_H */
