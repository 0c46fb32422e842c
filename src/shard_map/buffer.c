#include "shard_map/buffer.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/check.h"
#include "runtime/runtime_impl.h"

/*
 * Freed buffers are kept, per device and exact size, up to SPMD_BUFFER_POOL_MB in all, and
 * handed to the next allocation of that size: fresh memory faults in every page again on its
 * first write, which costs more than the copy that fills it (XLA pools device memory for the
 * same reason). Small buffers come cheaply from malloc and are not kept.
 */
enum { POOL_MIN_BYTES = 1 << 16, POOL_MAX_BLOCKS = 64 };

typedef struct pooled {
    int device_id;
    int hw;
    const spmd__backend *backend;
    void *data;
    size_t nbytes;
} pooled;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pooled pool[POOL_MAX_BLOCKS]; /* oldest first */
static int pool_count;
static size_t pool_bytes;
static size_t pool_limit;
static int pool_open; /* between the first buffer of a start-up and spmd_finalize */

/* A kept block of this device and size, or NULL. */
static void *pool_take(const spmd__runtime *rt, const spmd__buffer *b)
{
    if (b->nbytes < POOL_MIN_BYTES)
        return NULL;
    void *data = NULL;
    pthread_mutex_lock(&pool_lock);
    if (!pool_open) {
        pool_limit = rt->buffer_pool_bytes;
        pool_open = 1;
    }
    for (int i = pool_count - 1; i >= 0; i--)
        if (pool[i].device_id == b->device_id && pool[i].nbytes == b->nbytes &&
            pool[i].backend == b->backend && pool[i].hw == b->hw) {
            data = pool[i].data;
            pool_bytes -= b->nbytes;
            pool[i] = pool[--pool_count];
            break;
        }
    pthread_mutex_unlock(&pool_lock);
    return data;
}

/* Keeps b's memory for reuse, freeing the oldest blocks beyond the limit; 0 when not kept. */
static int pool_keep(const spmd__buffer *b)
{
    if (b->nbytes < POOL_MIN_BYTES)
        return 0;
    pooled evicted[POOL_MAX_BLOCKS];
    int nevicted = 0, kept = 0;
    pthread_mutex_lock(&pool_lock);
    if (pool_open && b->nbytes <= pool_limit) {
        while (pool_count > 0 &&
               (pool_count == POOL_MAX_BLOCKS || pool_bytes + b->nbytes > pool_limit)) {
            evicted[nevicted++] = pool[0];
            pool_bytes -= pool[0].nbytes;
            for (int i = 1; i < pool_count; i++)
                pool[i - 1] = pool[i];
            pool_count--;
        }
        pool[pool_count++] = (pooled){b->device_id, b->hw, b->backend, b->data, b->nbytes};
        pool_bytes += b->nbytes;
        kept = 1;
    }
    pthread_mutex_unlock(&pool_lock);
    for (int i = 0; i < nevicted; i++)
        evicted[i].backend->free(evicted[i].hw, evicted[i].data, evicted[i].nbytes);
    return kept;
}

void spmd__buffer_pool_drain(void)
{
    pthread_mutex_lock(&pool_lock);
    pooled all[POOL_MAX_BLOCKS];
    int n = pool_count;
    for (int i = 0; i < n; i++)
        all[i] = pool[i];
    pool_count = 0;
    pool_bytes = 0;
    pool_open = 0;
    pthread_mutex_unlock(&pool_lock);
    for (int i = 0; i < n; i++)
        all[i].backend->free(all[i].hw, all[i].data, all[i].nbytes);
}

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
    b->data = pool_take(rt, b);
    spmd_status st = b->data ? SPMD_OK : b->backend->alloc(b->hw, nbytes, &b->data);
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
        else if (!pool_keep(b))
            b->backend->free(b->hw, b->data, b->nbytes);
        free(b);
    }
}
