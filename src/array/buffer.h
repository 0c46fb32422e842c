/* Private: reference-counted device buffers, shared between arrays without copying. */
#ifndef SPMD_BUFFER_H
#define SPMD_BUFFER_H

#include <stdatomic.h>
#include <stddef.h>

#include <spmd/status.h>

#include "runtime/devices/backend/backend.h"

typedef struct spmd__buffer {
    atomic_int refs;
    int device_id; /* global id of the device holding the memory */
    int hw;        /* the backend's hardware ordinal */
    const spmd__backend *backend;
    void *data;
    size_t nbytes;
    struct spmd__buffer *parent; /* a view: data lies inside the parent, which it keeps alive */
} spmd__buffer;

/** Allocates `nbytes` on global device `device_id` (which must be local). */
spmd_status spmd__buffer_create(int device_id, size_t nbytes, spmd__buffer **out);
spmd__buffer *spmd__buffer_retain(spmd__buffer *b);
/** `nbytes` of `parent` from byte `offset` on, sharing its memory (no copy). */
spmd_status spmd__buffer_view(spmd__buffer *parent, size_t offset, size_t nbytes,
                              spmd__buffer **out);
/** 1 when no other array can see b's memory: one reference, and neither a view nor viewed. */
int spmd__buffer_is_exclusive(spmd__buffer *b);
/** Drops a reference; the last one gives the memory back (runtime/devices/memory_pool.c).
 * NULL-safe. */
void spmd__buffer_release(spmd__buffer *b);

#endif /* SPMD_BUFFER_H */
