/* Host blocks from 64 KiB up to a huge page, carved from 2 MiB pages that ask for transparent
 * huge pages (cpu.c's buffers of that size). */
#ifndef SPMD_RUNTIME_DEVICES_BACKEND_HUGE_POOL_H
#define SPMD_RUNTIME_DEVICES_BACKEND_HUGE_POOL_H

#include <stddef.h>

#define SPMD__HUGE_POOL_MIN_BYTES ((size_t)64 << 10)
#define SPMD__HUGE_POOL_PAGE_BYTES ((size_t)2 << 20)

/** A block of `bytes` (SPMD__HUGE_POOL_MIN_BYTES up to a page), inside one page and aligned to
 * 16 KiB; NULL where the size is out of range, the pool is full, or the kernel gives no huge
 * pages (its setting `never`): malloc's then. Thread-safe. */
void *spmd__huge_pool_alloc(size_t bytes);
/** 1 when block came from spmd__huge_pool_alloc (an address check: no lock, nothing read). */
int spmd__huge_pool_holds(const void *block);
/** Gives a block of the pool back. */
void spmd__huge_pool_free(void *block);
/** The pool's size in pages (its address space, reserved at its first block); takes effect only
 * before that (tests). */
void spmd__huge_pool_set_pages(size_t pages);

#endif
