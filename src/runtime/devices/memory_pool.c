#include "runtime/devices/memory_pool.h"

#include <pthread.h>

/*
 * Freed blocks are kept, per device and exact size, up to SPMD_BUFFER_POOL_MB in all, and
 * handed to the next allocation of that size: fresh memory faults in every page again on its
 * first write, which costs more than the copy that fills it (XLA pools device memory for the
 * same reason). Small blocks come cheaply from malloc and are not kept.
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
static int pool_open; /* between spmd_init and spmd_finalize */

void spmd__memory_pool_open(size_t limit_bytes)
{
    pthread_mutex_lock(&pool_lock);
    pool_limit = limit_bytes;
    pool_open = 1;
    pthread_mutex_unlock(&pool_lock);
}

/* A kept block of this device and size, or NULL. */
static void *pool_take(const spmd__backend *backend, int device_id, int hw, size_t nbytes)
{
    if (nbytes < POOL_MIN_BYTES)
        return NULL;
    void *data = NULL;
    pthread_mutex_lock(&pool_lock);
    for (int i = pool_count - 1; i >= 0; i--)
        if (pool[i].device_id == device_id && pool[i].nbytes == nbytes &&
            pool[i].backend == backend && pool[i].hw == hw) {
            data = pool[i].data;
            pool_bytes -= nbytes;
            pool[i] = pool[--pool_count];
            break;
        }
    pthread_mutex_unlock(&pool_lock);
    return data;
}

spmd_status spmd__memory_alloc(const spmd__backend *backend, int device_id, int hw, size_t nbytes,
                               void **data)
{
    *data = pool_take(backend, device_id, hw, nbytes);
    return *data ? SPMD_OK : backend->alloc(hw, nbytes, data);
}

void spmd__memory_release(const spmd__backend *backend, int device_id, int hw, void *data,
                          size_t nbytes)
{
    if (nbytes < POOL_MIN_BYTES) {
        backend->free(hw, data, nbytes);
        return;
    }
    /* Keep it, freeing the oldest blocks beyond the limit. */
    pooled evicted[POOL_MAX_BLOCKS];
    int nevicted = 0, kept = 0;
    pthread_mutex_lock(&pool_lock);
    if (pool_open && nbytes <= pool_limit) {
        while (pool_count > 0 &&
               (pool_count == POOL_MAX_BLOCKS || pool_bytes + nbytes > pool_limit)) {
            evicted[nevicted++] = pool[0];
            pool_bytes -= pool[0].nbytes;
            for (int i = 1; i < pool_count; i++)
                pool[i - 1] = pool[i];
            pool_count--;
        }
        pool[pool_count++] = (pooled){device_id, hw, backend, data, nbytes};
        pool_bytes += nbytes;
        kept = 1;
    }
    pthread_mutex_unlock(&pool_lock);
    for (int i = 0; i < nevicted; i++)
        evicted[i].backend->free(evicted[i].hw, evicted[i].data, evicted[i].nbytes);
    if (!kept)
        backend->free(hw, data, nbytes);
}

void spmd__memory_pool_drain(void)
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
