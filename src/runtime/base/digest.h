/* Private: digests of data, for comparisons between devices and processes (the replication
 * check, device_put's agreement, the trace's digests): xxHash's XXH3, 64 bits. */
#ifndef SPMD_RUNTIME_DIGEST_H
#define SPMD_RUNTIME_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include <xxhash.h>

static inline uint64_t spmd__digest(const void *data, size_t n)
{
    return (uint64_t)XXH3_64bits(data, n);
}

#endif /* SPMD_RUNTIME_DIGEST_H */
