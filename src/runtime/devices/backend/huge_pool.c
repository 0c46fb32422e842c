/*
 * CPU buffers from 64 KiB up to 2 MiB on huge pages. malloc puts such a buffer wherever its heap
 * has room, on small pages unless a whole 2 MiB around it asks for huge ones, which depends on
 * what was allocated before it: a peer's straight read of a 512 KiB buffer (process_vm_readv)
 * then pins 128 pages instead of one, and its copy misses the TLB on each (2 x 1, all_gather of
 * 1 MiB: 42-48 us a call on malloc's small pages, 29-31 on huge ones). A mapping of its own per
 * buffer would take a whole huge page for 64 KiB. So the pool reserves address space once (no
 * memory), turns it on 2 MiB page by page, and hands out runs of 16 KiB units inside one page,
 * first fit from the lowest page, so that blocks pack into as few pages as their sizes allow: a
 * block wastes less than a unit (under a quarter at 64 KiB, under 2 % from 1 MiB), but a page
 * holds only one block of more than 1 MiB, the rest of it idle unless smaller ones fill it. A
 * page that empties gives its memory back to the kernel, but for the lowest empty one, kept for
 * the next block (a fresh huge page's first write zeroes 2 MiB). Under AddressSanitizer each
 * block is followed by at least one poisoned unit, so that an overflow is caught there too.
 * cpu.c asks it only in a process that shares its machine with others of the run, whose reads
 * are what it serves: in a process alone, in-process collectives of 64-256 KiB waited about
 * 1 us longer a call with their buffers here than on malloc's (2 devices on the 2-core VM, with
 * small pages or huge, aligned or not, one block to a page or packed; the copies themselves
 * took no longer, the waits between the devices did; the cause was not found).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* MAP_NORESERVE, madvise (the library defines it for every file) */
#endif
#include "runtime/devices/backend/huge_pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime/devices/backend/host_poison.h"

#define PAGE_BYTES SPMD__HUGE_POOL_PAGE_BYTES
#define UNIT_BYTES ((size_t)16 << 10)
#define UNITS ((int)(PAGE_BYTES / UNIT_BYTES))
/* 16 GiB of address space, not of memory; past it, blocks come from malloc */
#define DEFAULT_PAGES 8192

typedef struct pool_page {
    uint64_t used[UNITS / 64];
    uint8_t run[UNITS]; /* at a block's first unit: its length in units */
    int free_units;
} pool_page;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *region;                   /* NULL: not reserved (yet) */
static uintptr_t region_lo, region_hi; /* read without the lock (spmd__huge_pool_holds) */
static size_t npages = DEFAULT_PAGES;
static size_t active; /* pages turned on (read-write), from the region's start */
static pool_page *pages;
static int unavailable;
static long spare = -1; /* an empty page whose memory is kept */

void spmd__huge_pool_set_pages(size_t count)
{
    pthread_mutex_lock(&lock);
    if (!region && !unavailable)
        npages = count ? count : 1;
    pthread_mutex_unlock(&lock);
}

/* Where the kernel's setting is `never`, the pages would stay small: malloc packs tighter. */
static int kernel_gives_huge_pages(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return 0;
    char line[128] = "";
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    return got && strstr(line, "[never]") == NULL;
}

/* The region, reserved on first use: 1 when there is one. */
static int reserve(void)
{
    if (region || unavailable)
        return region != NULL;
    unavailable = 1;
    size_t bytes = npages * PAGE_BYTES, len = bytes + PAGE_BYTES;
    if (!kernel_gives_huge_pages() || bytes / PAGE_BYTES != npages || len < bytes)
        return 0;
    /* no access and no commit until a page is turned on */
    char *base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return 0;
    char *lo = (char *)(((uintptr_t)base + PAGE_BYTES - 1) & ~(uintptr_t)(PAGE_BYTES - 1));
    if (lo > base)
        munmap(base, (size_t)(lo - base));
    if (base + len > lo + bytes)
        munmap(lo + bytes, (size_t)(base + len - (lo + bytes)));
    pages = calloc(npages, sizeof *pages);
    if (!pages) {
        munmap(lo, bytes);
        return 0;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(lo, bytes, MADV_HUGEPAGE); /* advice only: kept by the pages turned on */
#endif
    region = lo;
    __atomic_store_n(&region_hi, (uintptr_t)lo + bytes, __ATOMIC_RELEASE);
    __atomic_store_n(&region_lo, (uintptr_t)lo, __ATOMIC_RELEASE);
    unavailable = 0;
    return 1;
}

/* The next page made readable and writable: 0 where the kernel refuses (strict commit). */
static int turn_on_next(void)
{
    char *at = region + active * PAGE_BYTES;
    if (active == npages || mprotect(at, PAGE_BYTES, PROT_READ | PROT_WRITE) != 0)
        return 0;
    POISON(at, PAGE_BYTES);
    pages[active++].free_units = UNITS;
    return 1;
}

static int unit_used(const pool_page *p, int u) { return (int)(p->used[u / 64] >> (u % 64) & 1); }

static void mark_units(pool_page *p, int first, int count, int used)
{
    for (int u = first; u < first + count; u++) {
        uint64_t bit = (uint64_t)1 << (u % 64);
        p->used[u / 64] = used ? p->used[u / 64] | bit : p->used[u / 64] & ~bit;
    }
}

/* The first unit of a free run of `need` units in p, or -1. */
static int find_run(const pool_page *p, int need)
{
    for (int u = 0; u + need <= UNITS;) {
        int end = u;
        while (end < u + need && !unit_used(p, end))
            end++;
        if (end == u + need)
            return u;
        u = end + 1;
    }
    return -1;
}

void *spmd__huge_pool_alloc(size_t bytes)
{
    if (bytes < SPMD__HUGE_POOL_MIN_BYTES || bytes > PAGE_BYTES)
        return NULL;
    int need = (int)((bytes + UNIT_BYTES - 1) / UNIT_BYTES);
#ifdef SPMD_CPU_ASAN
    need = (int)(bytes / UNIT_BYTES) + 1; /* a poisoned unit, at least, before the next block */
    if (need > UNITS)
        return NULL;
#endif
    char *block = NULL;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; !block && reserve() && (i < active || turn_on_next()); i++) {
        pool_page *p = &pages[i];
        int at = p->free_units >= need ? find_run(p, need) : -1;
        if (at < 0)
            continue;
        mark_units(p, at, need, 1);
        p->run[at] = (uint8_t)need;
        p->free_units -= need;
        if (spare == (long)i)
            spare = -1;
        block = region + i * PAGE_BYTES + (size_t)at * UNIT_BYTES;
    }
    pthread_mutex_unlock(&lock);
    if (block)
        UNPOISON(block, bytes);
    return block;
}

int spmd__huge_pool_holds(const void *block)
{
    uintptr_t at = (uintptr_t)block, lo = __atomic_load_n(&region_lo, __ATOMIC_ACQUIRE);
    return lo && at >= lo && at < __atomic_load_n(&region_hi, __ATOMIC_ACQUIRE);
}

void spmd__huge_pool_free(void *block)
{
    size_t offset = (size_t)((uintptr_t)block - __atomic_load_n(&region_lo, __ATOMIC_ACQUIRE));
    size_t i = offset / PAGE_BYTES;
    int at = (int)(offset % PAGE_BYTES / UNIT_BYTES);
    pthread_mutex_lock(&lock);
    pool_page *p = &pages[i];
    int count = p->run[at];
    if (count && offset % UNIT_BYTES == 0) { /* else not a block's start: nothing to give back */
        POISON(block, (size_t)count * UNIT_BYTES);
        mark_units(p, at, count, 0);
        p->run[at] = 0;
        p->free_units += count;
        if (p->free_units == UNITS) {
            /* the lowest empty page is kept (first fit takes it next); another gives its
             * memory back and stays usable */
            long dropped = spare < 0 ? -1 : spare < (long)i ? (long)i : spare;
            spare = spare < 0 || (long)i < spare ? (long)i : spare;
            if (dropped >= 0)
                (void)madvise(region + (size_t)dropped * PAGE_BYTES, PAGE_BYTES, MADV_DONTNEED);
        }
    }
    pthread_mutex_unlock(&lock);
}
