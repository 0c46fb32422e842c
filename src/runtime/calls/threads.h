/* Private: who is calling. A number, a name and a tag for each thread that calls libspmd, and
 * the array op it runs; the call lock (calls.h) and the trace (trace.h) read them. */
#ifndef SPMD_RUNTIME_THREADS_H
#define SPMD_RUNTIME_THREADS_H

#include <stddef.h>
#include <stdint.h>

/** This thread's number in the process: 1, 2, ... in the order of their first call. */
int spmd__thread_number(void);
/** "thread 2", or "thread 2 'loader'" when named (spmd_thread_set_name). */
void spmd__thread_text(char *text, size_t size);
/** A hash of this thread's name (0 when unnamed): part of every call's fingerprint. */
uint64_t spmd__thread_tag(void);

/**
 * The array op (spmd/array_ops.h) whose calls this thread is making: its text for messages and
 * a hash of what must match between processes (the op, its operands' types, its parameters),
 * part of each call's fingerprint so that two ops that run the same fn on the same shapes never
 * pair. Set around the op's calls; NULL and 0 outside one.
 */
void spmd__calls_set_op(const char *text, uint64_t tag);
uint64_t spmd__calls_op_tag(void);
const char *spmd__calls_op_text(void);

/** Grows by one at each spmd_thread_set_name: a text made before it may be stale. */
unsigned spmd__thread_names_version(void);

#endif /* SPMD_RUNTIME_THREADS_H */
