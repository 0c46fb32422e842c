/* The baselines' host buffers. Include after defining _GNU_SOURCE (mmap's flags). */
#ifndef SPMD_BENCH_HOST_MEMORY_H
#define SPMD_BENCH_HOST_MEMORY_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Host memory for a baseline's buffers, paged as libspmd pages a CPU device's in a process that
 * shares its machine, as the baselines' do (SPMD_HUGE_PAGES, src/runtime/devices/backend/cpu.c
 * and huge_pool.c): from 64 KiB on huge pages, so that the baseline's first writes and the
 * single-copy reads of its buffers cost what libspmd's do, and not what the place malloc found
 * happens to give (2 x 1, MPI_Allgather of 1 MiB: 34-39 us on huge pages, 50-53 on small ones,
 * from one run to the next). From 2 MiB a mapping of its own
 * whose whole huge pages ask for transparent huge pages (its tail keeps small ones), below that
 * a huge page of its own (libspmd's buffers of that size share one). bench_host_free takes the
 * same bytes. */
#define BENCH_HUGE_PAGE_BYTES ((size_t)2 << 20)
#define BENCH_HUGE_MIN_BYTES ((size_t)64 << 10)

/* SPMD_HUGE_PAGES as spmd_init reads it: set to digits that make 0 ("0", "00"), it is off. */
static inline int bench_huge_pages(size_t bytes)
{
    const char *v = getenv("SPMD_HUGE_PAGES");
    int off = v && *v && strspn(v, "0123456789") == strlen(v) && strtol(v, NULL, 10) == 0;
    return bytes >= BENCH_HUGE_MIN_BYTES && !off;
}

/* The bytes of a baseline buffer's mapping. */
static inline size_t bench_mapped_bytes(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), used = (bytes + page - 1) / page * page;
    return used < BENCH_HUGE_PAGE_BYTES ? BENCH_HUGE_PAGE_BYTES : used;
}

static inline void *bench_host_alloc(size_t bytes)
{
    if (!bench_huge_pages(bytes))
        return malloc(bytes ? bytes : 1);
    size_t used = bench_mapped_bytes(bytes), len = used + BENCH_HUGE_PAGE_BYTES;
    if (used < bytes || len < used)
        return NULL;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    char *block = (char *)(((uintptr_t)base + BENCH_HUGE_PAGE_BYTES - 1) &
                           ~(uintptr_t)(BENCH_HUGE_PAGE_BYTES - 1));
    if (block > base)
        munmap(base, (size_t)(block - base));
    if (base + len > block + used)
        munmap(block + used, (size_t)(base + len - (block + used)));
#ifdef MADV_HUGEPAGE
    (void)madvise(block, used, MADV_HUGEPAGE); /* huge pages only where a whole one fits */
#endif
    return block;
}

static inline void bench_host_free(void *p, size_t bytes)
{
    if (!p)
        return;
    if (!bench_huge_pages(bytes)) {
        free(p);
        return;
    }
    munmap(p, bench_mapped_bytes(bytes));
}

/* glibc serves a malloc above its mmap threshold (128 KiB at first) from a fresh mapping, faulted
 * in page by page, and raises the threshold (up to 32 MiB) only as such a block is freed. Open
 * MPI's collectives allocate their scratch at each call: a row larger than any block freed
 * before it faulted its scratch in at every call (2 x 1 on the 2-core VM, MPI_Reduce_scatter_block
 * of 1 MiB alone took 5 ms a call instead of 0.2), and the rows' figures depended on which rows
 * ran first. One block just under 32 MiB, freed at the start, raises it once for the whole run,
 * as the heap of a program that has run a while would. */
static inline void bench_warm_malloc(void)
{
    volatile char *block = malloc(((size_t)32 << 20) - ((size_t)64 << 10));
    if (block) {
        block[0] = 0; /* kept: a malloc freed unused may be left out */
        free((void *)block);
    }
}

#endif /* SPMD_BENCH_HOST_MEMORY_H */
