/* The huge-page pool of CPU buffers from 64 KiB to 2 MiB (src/runtime/devices/backend/
 * huge_pool.c), built into the test with a pool of a few pages: blocks lie inside one 2 MiB page
 * on 16 KiB boundaries, pack first fit, never overlap (each holds its own pattern), come back
 * when freed, run out into NULL (malloc's then), give an emptied page's memory back but for the
 * lowest, ask for huge pages, and hold up under threads; under AddressSanitizer a poisoned unit
 * follows every block and a freed block is unaddressable. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime/devices/backend/huge_pool.h"
#include "testutil.h"

#if SPMD_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define PAGE SPMD__HUGE_POOL_PAGE_BYTES
#define UNIT ((size_t)16 << 10)
#define POOL_PAGES 6
/* The largest block, and a block's units (huge_pool.c: one more under AddressSanitizer). */
#if SPMD_TEST_ASAN
#define LARGEST (PAGE - 1)
static int units_of(size_t bytes) { return (int)(bytes / UNIT) + 1; }
#else
#define LARGEST PAGE
static int units_of(size_t bytes) { return (int)((bytes + UNIT - 1) / UNIT); }
#endif
#define MIN SPMD__HUGE_POOL_MIN_BYTES

static uintptr_t page_of(const void *p) { return (uintptr_t)p & ~(uintptr_t)(PAGE - 1); }

static unsigned char tag(size_t i, unsigned seed)
{
    return (unsigned char)(i * 131 + seed * 7 + 1);
}

static void fill(unsigned char *p, size_t bytes, unsigned seed)
{
    for (size_t i = 0; i < bytes; i++)
        p[i] = tag(i, seed);
}

static int intact(const unsigned char *p, size_t bytes, unsigned seed)
{
    for (size_t i = 0; i < bytes; i++)
        if (p[i] != tag(i, seed))
            return 0;
    return 1;
}

/* Every 64th byte and the last: blocks start 16 KiB apart, so two that overlap write the same
 * bytes (and the check costs ThreadSanitizer a 64th). */
#define SPARSE 64
static void mark(unsigned char *p, size_t bytes, unsigned seed)
{
    for (size_t i = 0; i < bytes; i += SPARSE)
        p[i] = tag(i, seed);
    p[bytes - 1] = tag(bytes - 1, seed);
}

static int marked(const unsigned char *p, size_t bytes, unsigned seed)
{
    for (size_t i = 0; i < bytes; i += SPARSE)
        if (p[i] != tag(i, seed))
            return 0;
    return p[bytes - 1] == tag(bytes - 1, seed);
}

static void test_sizes_out_of_range(void **state)
{
    (void)state;
    assert_null(spmd__huge_pool_alloc(0));
    assert_null(spmd__huge_pool_alloc(MIN - 1));
    assert_null(spmd__huge_pool_alloc(PAGE + 1));
    assert_null(spmd__huge_pool_alloc(LARGEST + 1));
    char *block = spmd__huge_pool_alloc(MIN); /* the pool is there: still not these */
    assert_non_null(block);
    int on_stack = 0;
    void *heap = malloc(PAGE / 2);
    assert_non_null(heap);
    assert_true(spmd__huge_pool_holds(block));
    assert_false(spmd__huge_pool_holds(NULL));
    assert_false(spmd__huge_pool_holds(&on_stack));
    assert_false(spmd__huge_pool_holds(heap));
    assert_false(spmd__huge_pool_holds(block - 1));
    free(heap);
    spmd__huge_pool_free(block);
}

static const size_t sizes[] = {MIN, MIN + 1, 100000, (size_t)1 << 20, LARGEST - 1, LARGEST};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* Every size at once: inside one page each, aligned, apart (patterns intact), then freed. */
static void test_blocks_apart(void **state)
{
    (void)state;
    unsigned char *b[NSIZES];
    for (size_t k = 0; k < NSIZES; k++) {
        b[k] = spmd__huge_pool_alloc(sizes[k]);
        assert_non_null(b[k]);
        assert_true(spmd__huge_pool_holds(b[k]));
        assert_true(spmd__huge_pool_holds(b[k] + sizes[k] - 1));
        assert_int_equal((uintptr_t)b[k] % UNIT, 0);
        assert_int_equal(page_of(b[k]), page_of(b[k] + sizes[k] - 1));
        fill(b[k], sizes[k], (unsigned)k);
#if SPMD_TEST_ASAN
        assert_false(__asan_address_is_poisoned(b[k]));
        assert_false(__asan_address_is_poisoned(b[k] + sizes[k] - 1));
        assert_true(__asan_address_is_poisoned(b[k] + sizes[k])); /* its guard unit */
#endif
    }
    for (size_t k = 0; k < NSIZES; k++)
        assert_true(intact(b[k], sizes[k], (unsigned)k));
    for (size_t k = 0; k < NSIZES; k++) {
        spmd__huge_pool_free(b[k]);
#if SPMD_TEST_ASAN
        assert_true(__asan_address_is_poisoned(b[k]));
#endif
    }
}

/* First fit from the lowest page: two blocks of half a page share one, as many of 64 KiB as fit
 * fill one and the next goes on; a freed run is found again. */
static void test_packing(void **state)
{
    (void)state;
    char *a = spmd__huge_pool_alloc(LARGEST / 2), *b = spmd__huge_pool_alloc(LARGEST / 2);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(page_of(a), page_of(b));
    assert_int_equal(labs((long)(a - b)), PAGE / 2);
    spmd__huge_pool_free(a);
    spmd__huge_pool_free(b);
    int per_page = (int)(PAGE / UNIT) / units_of(MIN);
    char *small[64];
    for (int k = 0; k <= per_page; k++) {
        small[k] = spmd__huge_pool_alloc(MIN);
        assert_non_null(small[k]);
    }
    for (int k = 1; k < per_page; k++)
        assert_int_equal(page_of(small[k]), page_of(small[0]));
    assert_int_not_equal(page_of(small[per_page]), page_of(small[0]));
    spmd__huge_pool_free(small[5]);
    spmd__huge_pool_free(small[6]);
    char *pair = spmd__huge_pool_alloc(2 * MIN); /* the hole it left */
    assert_ptr_equal(pair, small[5] < small[6] ? small[5] : small[6]);
    small[5] = pair;
    small[6] = NULL;
    for (int k = 0; k <= per_page; k++)
        if (small[k])
            spmd__huge_pool_free(small[k]);
}

/* Whether any of a page's 4 KiB pages is in memory. */
static int resident(uintptr_t page)
{
    size_t small = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char vec[PAGE / 4096];
    assert_int_equal(mincore((void *)page, PAGE, vec), 0);
    for (size_t i = 0; i < PAGE / small; i++)
        if (vec[i] & 1)
            return 1;
    return 0;
}

/* Whether the mapping that holds p asks for huge pages (the test runs where the kernel gives
 * them, so smaps says). */
static int advised_huge(const void *p)
{
    spmd_test_mapping m = {0, 0, 0};
    assert_true(spmd_test_mapping_of(p, &m));
    return m.huge;
}

/* POOL_PAGES whole pages, then nothing (malloc's turn); one freed comes back; emptied pages
 * give their memory back, all but the lowest (first fit's next). */
static void test_full_pool(void **state)
{
    (void)state;
    char *b[POOL_PAGES];
    for (int k = 0; k < POOL_PAGES; k++) {
        b[k] = spmd__huge_pool_alloc(LARGEST);
        assert_non_null(b[k]);
        assert_int_equal((uintptr_t)b[k] % PAGE, 0);
        memset(b[k], k + 1, LARGEST);
        assert_true(advised_huge(b[k]));
    }
    assert_null(spmd__huge_pool_alloc(LARGEST));
    assert_null(spmd__huge_pool_alloc(MIN));
    spmd__huge_pool_free(b[2]);
    char *again = spmd__huge_pool_alloc(MIN);
    assert_ptr_equal(again, b[2]);
    spmd__huge_pool_free(again); /* page 2 empty: kept */
    for (int k = 0; k < POOL_PAGES; k++)
        if (k != 2)
            assert_int_equal((unsigned char)b[k][LARGEST - 1], k + 1);
    /* pages 5, 4, 3 given back at once, 2 and 1 as a lower one empties; 0 kept */
    for (int k = POOL_PAGES - 1; k >= 0; k--)
        if (k != 2)
            spmd__huge_pool_free(b[k]);
    for (int k = 1; k < POOL_PAGES; k++)
        assert_false(resident((uintptr_t)b[k]));
}

/* Threads allocating, filling, checking and freeing at random: every block intact until freed
 * (another thread's block never lands on it), and the pool whole afterwards. */
#define THREADS 4
#define ROUNDS 1500
#define LIVE 3

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg, bad = 0;
    unsigned char *live[LIVE] = {NULL};
    size_t bytes[LIVE] = {0};
    unsigned marks[LIVE] = {0};
    for (unsigned r = 0; r < ROUNDS; r++) {
        int k = (int)(rand_r(&seed) % LIVE);
        if (live[k]) {
            bad += !marked(live[k], bytes[k], marks[k]);
            spmd__huge_pool_free(live[k]);
            live[k] = NULL;
        }
        size_t n = MIN + rand_r(&seed) % (PAGE - MIN);
        n = n > 256 * 1024 ? n / 4 : n; /* mostly small: the pool seldom runs out */
        n = n < MIN ? MIN : n;
        live[k] = spmd__huge_pool_alloc(n);
        if (live[k]) {
            bytes[k] = n;
            marks[k] = seed;
            mark(live[k], n, seed);
        }
    }
    for (int k = 0; k < LIVE; k++)
        if (live[k]) {
            bad += !marked(live[k], bytes[k], marks[k]);
            spmd__huge_pool_free(live[k]);
        }
    return (void *)(uintptr_t)bad;
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i * 7919 + 1)), 0);
    for (int i = 0; i < THREADS; i++) {
        void *bad = NULL;
        assert_int_equal(pthread_join(t[i], &bad), 0);
        assert_int_equal((uintptr_t)bad, 0);
    }
    char *b[POOL_PAGES]; /* everything came back: every page whole again */
    for (int k = 0; k < POOL_PAGES; k++)
        assert_non_null(b[k] = spmd__huge_pool_alloc(LARGEST));
    for (int k = 0; k < POOL_PAGES; k++)
        spmd__huge_pool_free(b[k]);
}

int main(void)
{
    if (!spmd_test_kernel_gives_huge_pages()) { /* the pool is off */
        printf("skipped: this kernel gives no transparent huge pages (the pool is off)\n");
        return 77;
    }
    spmd__huge_pool_set_pages(POOL_PAGES);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_out_of_range),
        cmocka_unit_test(test_blocks_apart),
        cmocka_unit_test(test_packing),
        cmocka_unit_test(test_full_pool),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
