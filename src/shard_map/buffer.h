/* Private: reference-counted device buffers, shared between arrays without copying. */
#ifndef SPMD_BUFFER_H
#define SPMD_BUFFER_H

#include <stdatomic.h>
#include <stddef.h>

#include <spmd/status.h>

#include "runtime/backend/backend.h"

typedef struct spmd__buffer {
    atomic_int refs;
    int device_id; /* global id of the device holding the memory */
    int hw;        /* the backend's hardware ordinal */
    const spmd__backend *backend;
    void *data;
    size_t nbytes;
} spmd__buffer;

/** Allocates `nbytes` on global device `device_id` (which must be local). */
spmd_status spmd__buffer_create(int device_id, size_t nbytes, spmd__buffer **out);
spmd__buffer *spmd__buffer_retain(spmd__buffer *b);
/** Drops a reference; frees the memory with the last one. NULL-safe. */
void spmd__buffer_release(spmd__buffer *b);

#endif /* SPMD_BUFFER_H */
