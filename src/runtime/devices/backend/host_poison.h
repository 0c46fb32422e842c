/* AddressSanitizer does not see into a mapping of our own: what the host allocators hand out is
 * marked addressable there, the bytes around it unaddressable, so that an overflow past a
 * block's end, into its header or into a freed block is still caught. */
#ifndef SPMD_RUNTIME_DEVICES_BACKEND_HOST_POISON_H
#define SPMD_RUNTIME_DEVICES_BACKEND_HOST_POISON_H

#if defined(__SANITIZE_ADDRESS__)
#define SPMD_CPU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPMD_CPU_ASAN 1
#endif
#endif
#ifdef SPMD_CPU_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(at, bytes) ASAN_POISON_MEMORY_REGION(at, bytes)
#define UNPOISON(at, bytes) ASAN_UNPOISON_MEMORY_REGION(at, bytes)
#else
#define POISON(at, bytes) ((void)(at), (void)(bytes))
#define UNPOISON(at, bytes) ((void)(at), (void)(bytes))
#endif

#endif
