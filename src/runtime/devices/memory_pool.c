#include "runtime/devices/memory_pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * Freed blocks are kept, per device and exact size, up to SPMD_BUFFER_POOL_MB in all, and
 * handed to the next allocation of that size: fresh memory faults in every page again on its
 * first write, which costs more than the copy that fills it (XLA pools device memory for the
 * same reason). Small blocks come cheaply from malloc and are not kept.
 * Each local device has its own list of BLOCKS_PER_DEVICE, so that a process of many devices
 * keeps a step's blocks for all of them (one list of 64 for the process had kept a quarter of
 * them at 256 devices: a reshard to replicated at 256 devices, 512 KiB a block, faulted in
 * every page of 192 outputs every time) and a lookup reads one device's list only. Beyond the
 * limit the oldest block of any device goes first.
 */
enum { POOL_MIN_BYTES = 1 << 16, BLOCKS_PER_DEVICE = 64, EVICT_BATCH = 16 };

typedef struct pooled {
    int hw;
    const spmd__backend *backend;
    void *data;
    size_t nbytes;
    uint64_t age; /* when it was kept: the process's oldest goes first */
} pooled;

typedef struct device_pool {
    pooled blocks[BLOCKS_PER_DEVICE]; /* oldest first */
    int count;
} device_pool;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static device_pool *pools; /* one per local device, from pool_first (a global device id) */
static int pool_first, pool_devices;
static size_t pool_bytes;
static size_t pool_limit;
static uint64_t pool_age;

void spmd__memory_pool_open(size_t limit_bytes, int first_device, int num_devices)
{
    device_pool *made = num_devices > 0 ? calloc((size_t)num_devices, sizeof *made) : NULL;
    pthread_mutex_lock(&pool_lock);
    free(pools);  /* drained and closed before: empty */
    pools = made; /* without memory for the lists, nothing is kept */
    pool_first = first_device;
    pool_devices = made ? num_devices : 0;
    pool_limit = limit_bytes;
    pool_bytes = 0;
    pthread_mutex_unlock(&pool_lock);
}

/* The list of device_id, or NULL (pool closed, or not one of this process's devices). */
static device_pool *pool_of(int device_id)
{
    int k = device_id - pool_first;
    return pools && k >= 0 && k < pool_devices ? &pools[k] : NULL;
}

static pooled remove_at(device_pool *dp, int i)
{
    pooled taken = dp->blocks[i];
    for (int j = i + 1; j < dp->count; j++)
        dp->blocks[j - 1] = dp->blocks[j];
    dp->count--;
    pool_bytes -= taken.nbytes;
    return taken;
}

/* The process's oldest kept block, out of its list (pool_bytes > 0). */
static pooled remove_oldest(void)
{
    int oldest = -1;
    for (int k = 0; k < pool_devices; k++)
        if (pools[k].count > 0 &&
            (oldest < 0 || pools[k].blocks[0].age < pools[oldest].blocks[0].age))
            oldest = k;
    return remove_at(&pools[oldest], 0);
}

/* A kept block of this device and size, or NULL. */
static void *pool_take(const spmd__backend *backend, int device_id, int hw, size_t nbytes)
{
    if (nbytes < POOL_MIN_BYTES)
        return NULL;
    void *data = NULL;
    pthread_mutex_lock(&pool_lock);
    device_pool *dp = pool_of(device_id);
    for (int i = dp ? dp->count - 1 : -1; i >= 0; i--)
        if (dp->blocks[i].nbytes == nbytes && dp->blocks[i].backend == backend &&
            dp->blocks[i].hw == hw) {
            data = remove_at(dp, i).data;
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
    /* Keep it, freeing the oldest blocks beyond the limits: outside the lock (a backend's
     * free may wait for its device), a batch at a time. */
    for (int done = 0; !done;) {
        pooled evicted[EVICT_BATCH];
        int nevicted = 0, kept = 0;
        pthread_mutex_lock(&pool_lock);
        device_pool *dp = pool_of(device_id);
        if (!dp || nbytes > pool_limit) {
            done = 1;
        } else {
            if (dp->count == BLOCKS_PER_DEVICE)
                evicted[nevicted++] = remove_at(dp, 0);
            while (nevicted < EVICT_BATCH && pool_bytes > 0 && pool_bytes + nbytes > pool_limit)
                evicted[nevicted++] = remove_oldest();
            if (pool_bytes + nbytes <= pool_limit) {
                dp->blocks[dp->count++] = (pooled){hw, backend, data, nbytes, pool_age++};
                pool_bytes += nbytes;
                kept = done = 1;
            }
        }
        pthread_mutex_unlock(&pool_lock);
        for (int i = 0; i < nevicted; i++)
            evicted[i].backend->free(evicted[i].hw, evicted[i].data, evicted[i].nbytes);
        if (done && !kept)
            backend->free(hw, data, nbytes);
    }
}

void spmd__memory_pool_drain(void)
{
    pthread_mutex_lock(&pool_lock);
    device_pool *all = pools;
    int n = pool_devices;
    pools = NULL;
    pool_devices = 0;
    pool_bytes = 0;
    pthread_mutex_unlock(&pool_lock);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < all[k].count; i++)
            all[k].blocks[i].backend->free(all[k].blocks[i].hw, all[k].blocks[i].data,
                                           all[k].blocks[i].nbytes);
    free(all);
}
