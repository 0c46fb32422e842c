/* The published start-up and the public queries of processes and devices. */
#include "runtime/base/session.h"

#include <stdatomic.h>
#include <string.h>

#include "runtime/base/check.h"

static spmd__runtime current; /* written only while `ready` is 0 */
static atomic_int ready;

void spmd__runtime_publish(const spmd__runtime *rt)
{
    current = *rt;
    atomic_store_explicit(&ready, 1, memory_order_release);
}

void spmd__runtime_retract(void) { atomic_store(&ready, 0); }

void spmd__runtime_clear(void) { memset(&current, 0, sizeof current); }

int spmd_is_initialized(void) { return atomic_load(&ready); }

const spmd__runtime *spmd__runtime_get(const char *fn)
{
    if (!atomic_load_explicit(&ready, memory_order_acquire)) {
        SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                   "%s: libspmd is not initialized; call spmd_init first", fn);
        return NULL;
    }
    return &current;
}

const spmd__runtime *spmd__runtime_get_session(const char *fn, unsigned session)
{
    const spmd__runtime *r = spmd__runtime_get(fn);
    if (r && r->session != session) {
        SPMD_ERROR(SPMD_ERR_INVALID_ARGUMENT,
                   "%s: the object was built before the last spmd_finalize; objects do not "
                   "outlive the runtime that made them, so build it again",
                   fn);
        return NULL;
    }
    return r;
}

int spmd_process_index(void) { return atomic_load(&ready) ? current.process_index : -1; }
int spmd_process_count(void) { return atomic_load(&ready) ? current.process_count : 0; }
int spmd_device_count(void) { return atomic_load(&ready) ? current.num_devices : 0; }
int spmd_local_device_count(void) { return atomic_load(&ready) ? current.num_local : 0; }
spmd_platform spmd_runtime_platform(void) { return current.platform; }

int spmd_local_device_id(int ordinal)
{
    if (!atomic_load(&ready) || ordinal < 0 || ordinal >= current.num_local)
        return -1;
    return current.first_local + ordinal;
}

spmd_status spmd_device_get_info(int id, spmd_device_info *info)
{
    const spmd__runtime *r = spmd__runtime_get("spmd_device_get_info");
    if (!r)
        return SPMD_ERR_INVALID_ARGUMENT;
    SPMD_REQUIRE_NOT_NULL(info, "spmd_device_get_info");
    SPMD_REQUIRE(id >= 0 && id < r->num_devices, SPMD_ERR_INVALID_ARGUMENT,
                 "spmd_device_get_info: device id %d is out of range; this run has devices "
                 "0..%d",
                 id, r->num_devices - 1);
    *info = r->devices[id];
    return SPMD_OK;
}
