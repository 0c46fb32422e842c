/* CPU devices: host memory; each device's work runs on its own worker thread. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/devices/backend/backend.h"
#include "runtime/base/check.h"
#include "runtime/devices/backend/host_poison.h"
#include "runtime/devices/backend/huge_pool.h"

/* Cache-line alignment keeps shards of different devices off each other's lines. */
#define CPU_ALIGNMENT 64

static spmd_status cpu_probe(int *count)
{
    *count = 0; /* unlimited: CPU devices are threads, their number comes from configuration */
    return SPMD_OK;
}

static spmd_status cpu_bind_thread(int hw)
{
    (void)hw;
    return SPMD_OK;
}

/* From this size a CPU buffer gets a mapping of its own, starting on a huge page's boundary and
 * advised for transparent huge pages (MADV_HUGEPAGE; the kernel's setting is `madvise` on Debian
 * and most distributions): its first write faults once per 2 MiB instead of once per 4 KiB
 * page, and a peer's straight read of it (process_vm_readv) pins a few large pages instead of
 * hundreds of small ones. On the 2-core VM a 4 KiB fault costs about 11 us (README "Stop 75").
 * A buffer takes its bytes' pages and one more (the header's): its tail past the last whole
 * huge page keeps small ones. From 64 KiB up to this size, where peers on the machine read
 * them straight, buffers share huge pages (huge_pool.c). */
#define HUGE_PAGE_BYTES ((size_t)2 << 20)
static int huge_pages = 1, pooled_pages; /* spmd__cpu_set_huge_pages */

void spmd__cpu_set_huge_pages(int large, int pooled)
{
    __atomic_store_n(&huge_pages, large, __ATOMIC_RELAXED);
    __atomic_store_n(&pooled_pages, pooled, __ATOMIC_RELAXED);
}

/* The word before a block says how it was made: what malloc returned (at least 16-aligned), or
 * the start of its own mapping with the low bit set, the mapping's length in the word before.
 * A block of the pool has none: its address says so. */
#define OWN_MAPPING 1u
#define HEADER_BYTES (sizeof(uintptr_t) + sizeof(size_t))

static void *huge_alloc(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t used = (bytes + page - 1) / page * page;
#ifdef SPMD_CPU_ASAN
    used += page; /* a poisoned page past the end, whatever the size */
#endif
    /* room to put the block on a huge page's boundary, with a page before it for the header */
    size_t len = used + HUGE_PAGE_BYTES + page;
    if (used < bytes || len < used)
        return NULL;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    uintptr_t aligned = ((uintptr_t)base + page + HUGE_PAGE_BYTES - 1) & ~(HUGE_PAGE_BYTES - 1);
    char *block = (char *)aligned, *start = block - page, *end = block + used;
    if (start > base)
        munmap(base, (size_t)(start - base));
    if (base + len > end)
        munmap(end, (size_t)(base + len - end));
    size_t mapped = (size_t)(end - start);
#ifdef MADV_HUGEPAGE
    /* Advice only: where the kernel has no huge pages to give, the pages stay small. The
     * whole mapping, one area: the kernel puts huge pages only where a whole aligned 2 MiB lies
     * inside it, so the header page and the tail past the last one keep small pages. */
    (void)madvise(start, mapped, MADV_HUGEPAGE);
#endif
    uintptr_t tagged = (uintptr_t)start | OWN_MAPPING;
    memcpy(block - sizeof tagged, &tagged, sizeof tagged);
    memcpy(block - sizeof tagged - sizeof mapped, &mapped, sizeof mapped);
    POISON(start, page); /* the header too: cpu_free unpoisons it to read it */
    POISON(block + bytes, (size_t)(end - (block + bytes)));
    return block;
}

/* Below SPMD__HUGE_POOL_MIN_BYTES, below HUGE_PAGE_BYTES without the pool (a process alone, or
 * the pool full), and every size with SPMD_HUGE_PAGES=0: malloc's own fast path
 * (posix_memalign takes its slow one, a tenth of a small call): the block starts at the first
 * aligned address past a word that holds what malloc returned. */
static spmd_status cpu_alloc(int hw, size_t bytes, void **ptr)
{
    (void)hw;
    size_t rounded = (bytes + CPU_ALIGNMENT - 1) / CPU_ALIGNMENT * CPU_ALIGNMENT;
    if (!rounded)
        rounded = CPU_ALIGNMENT;
    char *block = NULL;
    if (bytes >= HUGE_PAGE_BYTES && __atomic_load_n(&huge_pages, __ATOMIC_RELAXED)) {
        block = huge_alloc(bytes);
    } else if (bytes >= SPMD__HUGE_POOL_MIN_BYTES &&
               __atomic_load_n(&pooled_pages, __ATOMIC_RELAXED) &&
               (block = spmd__huge_pool_alloc(bytes)) != NULL) {
        /* inside one huge page (huge_pool.c): no header */
    } else {
        char *raw = rounded < bytes || rounded > SIZE_MAX - CPU_ALIGNMENT
                        ? NULL
                        : malloc(rounded + CPU_ALIGNMENT);
        /* malloc aligns to at least 16 bytes: the word before the block is always free */
        block = raw ? (char *)(((uintptr_t)raw + CPU_ALIGNMENT) & ~(uintptr_t)(CPU_ALIGNMENT - 1))
                    : NULL;
        if (block)
            memcpy(block - sizeof raw, &raw, sizeof raw);
    }
    if (!block)
        return SPMD_ERROR(SPMD_ERR_OUT_OF_MEMORY,
                          "could not allocate %zu bytes of host memory for a CPU device", bytes);
    *ptr = block;
    return SPMD_OK;
}

static void cpu_free(int hw, void *ptr, size_t bytes)
{
    (void)hw;
    (void)bytes;
    if (!ptr)
        return;
    if (spmd__huge_pool_holds(ptr)) {
        spmd__huge_pool_free(ptr);
        return;
    }
    uintptr_t word;
    if (((uintptr_t)ptr & (HUGE_PAGE_BYTES - 1)) == 0) /* maybe its own mapping's, poisoned */
        UNPOISON((char *)ptr - HEADER_BYTES, HEADER_BYTES);
    memcpy(&word, (char *)ptr - sizeof word, sizeof word);
    if (word & OWN_MAPPING) {
        size_t mapped;
        memcpy(&mapped, (char *)ptr - sizeof word - sizeof mapped, sizeof mapped);
        char *start = (char *)(word & ~(uintptr_t)OWN_MAPPING);
        UNPOISON(start, mapped); /* the addresses may come back in another mapping */
        munmap(start, mapped);
    } else {
        free((void *)word);
    }
}

static spmd_status cpu_copy(int hw, void *dst, const void *src, size_t bytes)
{
    (void)hw;
    if (bytes && dst != src)
        memcpy(dst, src, bytes);
    return SPMD_OK;
}

static spmd_status cpu_stream(int local, int hw, void **stream)
{
    (void)local;
    (void)hw;
    *stream = NULL; /* work runs on the worker thread itself */
    return SPMD_OK;
}

static spmd_status cpu_sync(int local)
{
    (void)local;
    return SPMD_OK;
}

static void cpu_shutdown(void) {}

const spmd__backend spmd__backend_cpu = {
    .name = "cpu",
    .platform = SPMD_PLATFORM_CPU,
    .host_addressable = 1,
    .probe = cpu_probe,
    .bind_thread = cpu_bind_thread,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_to_device = cpu_copy,
    .copy_to_host = cpu_copy,
    .copy_on_device = cpu_copy,
    .stream = cpu_stream,
    .sync = cpu_sync,
    .blas = cpu_stream, /* no handle: gemm calls OpenBLAS */
    .shutdown = cpu_shutdown,
};

/* Whichever BLAS is linked (weak: the others are absent). */
extern void openblas_set_num_threads(int threads) __attribute__((weak));
extern int openblas_get_num_threads(void) __attribute__((weak));
extern void bli_thread_set_num_threads(long threads) __attribute__((weak));
extern void MKL_Set_Num_Threads(int threads) __attribute__((weak));
/* OpenBLAS's pthread build starts its pool as it loads, and an idle pool thread spins on
 * sched_yield for 2^28 cycles (about 0.1 s) before it sleeps, again after each call it served:
 * it took a core from the device threads at start-up (bench/README.md, "Stalls inside a row").
 * With one thread per call the pool has no work, so it is stopped; a call that wants more
 * threads starts it again. Neither may run while another thread is inside a BLAS call. */
extern int blas_thread_shutdown_(void) __attribute__((weak));
extern int blas_thread_init(void) __attribute__((weak));

void spmd__cpu_set_blas_threads(int threads)
{
    if (openblas_set_num_threads) {
        /* a stopped pool comes back whole before it grows (0.3.21 does so itself as the count
         * is set; a count set to what it was starts nothing) */
        if (threads > 1 && blas_thread_init)
            blas_thread_init();
        if (!openblas_get_num_threads || openblas_get_num_threads() != threads)
            openblas_set_num_threads(threads);
        if (threads == 1 && blas_thread_shutdown_)
            blas_thread_shutdown_();
    }
    if (bli_thread_set_num_threads)
        bli_thread_set_num_threads(threads);
    if (MKL_Set_Num_Threads)
        MKL_Set_Num_Threads(threads);
}
