/* Reference-counted buffers over device memory (runtime/devices/memory_pool.c keeps freed blocks).
 */
#include "array/buffer.h"

#include <stdlib.h>

#include "runtime/base/check.h"
#include "runtime/devices/memory_pool.h"
#include "runtime/runtime_impl.h"

spmd_status spmd__buffer_create(int device_id, size_t nbytes, spmd__buffer **out)
{
    *out = NULL;
    const spmd__runtime *rt = spmd__runtime_get("spmd__buffer_create");
    if (!rt)
        return SPMD_ERR_INVALID_ARGUMENT;
    spmd__buffer *b = malloc(sizeof *b);
    SPMD_REQUIRE(b != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of host memory for a buffer descriptor");
    atomic_init(&b->refs, 1);
    b->device_id = device_id;
    b->hw = rt->devices[device_id].hardware_ordinal;
    b->backend = spmd__device_backend(rt, device_id);
    b->nbytes = nbytes;
    b->parent = NULL;
    spmd_status st = spmd__memory_alloc(b->backend, device_id, b->hw, nbytes, &b->data);
    if (st != SPMD_OK) {
        free(b);
        return st;
    }
    *out = b;
    return SPMD_OK;
}

spmd_status spmd__buffer_view(spmd__buffer *parent, size_t offset, size_t nbytes,
                              spmd__buffer **out)
{
    spmd__buffer *b = malloc(sizeof *b);
    SPMD_REQUIRE(b != NULL, SPMD_ERR_OUT_OF_MEMORY, "out of host memory for a buffer descriptor");
    *b = *parent;
    atomic_init(&b->refs, 1);
    b->data = (char *)parent->data + offset;
    b->nbytes = nbytes;
    b->parent = spmd__buffer_retain(parent);
    *out = b;
    return SPMD_OK;
}

int spmd__buffer_is_exclusive(spmd__buffer *b) { return !b->parent && atomic_load(&b->refs) == 1; }

spmd__buffer *spmd__buffer_retain(spmd__buffer *b)
{
    atomic_fetch_add(&b->refs, 1);
    return b;
}

void spmd__buffer_release(spmd__buffer *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) {
        if (b->parent)
            spmd__buffer_release(b->parent);
        else
            spmd__memory_release(b->backend, b->device_id, b->hw, b->data, b->nbytes);
        free(b);
    }
}
