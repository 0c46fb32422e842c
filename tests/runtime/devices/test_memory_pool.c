/* The pool of freed device buffers (src/runtime/devices/memory_pool.c), built into the test with
 * a backend that counts what it allocates and frees: a freed block comes back to the next
 * allocation of its device and size only; 256 devices keep two blocks each (a list per device);
 * a device keeps at most 64 and gives up its oldest; beyond the byte limit the process's oldest
 * block of any device goes first; small blocks, other processes' devices and a closed pool free
 * at once; drain frees every kept block once; threads on their own devices agree with the
 * counts. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/devices/memory_pool.h"
#include "testutil.h"

#define KIB ((size_t)1 << 10)
#define BIG (512 * KIB)

static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;
static long allocs, frees;

static spmd_status fake_alloc(int hw, size_t bytes, void **ptr)
{
    (void)hw;
    *ptr = malloc(bytes);
    if (!*ptr)
        return SPMD_ERR_OUT_OF_MEMORY;
    memset(*ptr, 0, 64); /* touched: a use after a free shows under AddressSanitizer */
    pthread_mutex_lock(&count_lock);
    allocs++;
    pthread_mutex_unlock(&count_lock);
    return SPMD_OK;
}

static void fake_free(int hw, void *ptr, size_t bytes)
{
    (void)hw;
    (void)bytes;
    free(ptr);
    pthread_mutex_lock(&count_lock);
    frees++;
    pthread_mutex_unlock(&count_lock);
}

static const spmd__backend fake = {.name = "fake", .alloc = fake_alloc, .free = fake_free};
static const spmd__backend other = {.name = "other", .alloc = fake_alloc, .free = fake_free};

static void *take(int device, size_t bytes)
{
    void *p = NULL;
    assert_int_equal(spmd__memory_alloc(&fake, device, 0, bytes, &p), SPMD_OK);
    assert_non_null(p);
    return p;
}

static void give(int device, void *p, size_t bytes)
{
    spmd__memory_release(&fake, device, 0, p, bytes);
}

static void reset(void) { allocs = frees = 0; }

/* Same device and size: the same block back; another size, device, hardware or backend: fresh. */
static void test_block_comes_back_by_device_and_size(void **state)
{
    (void)state;
    spmd__memory_pool_open(1 << 30, 10, 4);
    reset();
    void *a = take(11, BIG);
    give(11, a, BIG);
    assert_ptr_equal(take(11, BIG), a);
    give(11, a, BIG);
    void *b = take(12, BIG); /* another device */
    void *c = take(11, BIG + 4096);
    void *d = NULL;
    assert_int_equal(spmd__memory_alloc(&fake, 11, 1, BIG, &d), SPMD_OK); /* another hw */
    void *e = NULL;
    assert_int_equal(spmd__memory_alloc(&other, 11, 0, BIG, &e), SPMD_OK); /* another backend */
    assert_true(b != a && c != a && d != a && e != a);
    assert_ptr_equal(take(11, BIG), a);
    assert_int_equal(allocs, 5);
    give(11, a, BIG);
    give(12, b, BIG);
    give(11, c, BIG + 4096);
    spmd__memory_release(&fake, 11, 1, d, BIG);
    spmd__memory_release(&other, 11, 0, e, BIG);
    assert_int_equal(frees, 0);
    spmd__memory_pool_drain();
    assert_int_equal(frees, 5);
}

/* 256 devices, two blocks each, released and taken again for 5 steps: nothing allocated after
 * the first step, nothing freed until drain (one list for the process kept 64 blocks). */
static void test_many_devices_keep_their_blocks(void **state)
{
    (void)state;
    enum { DEVICES = 256, STEPS = 5 };
    const size_t bytes = 64 * KIB; /* the smallest kept */
    spmd__memory_pool_open((size_t)1 << 30, 0, DEVICES);
    reset();
    static void *held[DEVICES][2];
    for (int step = 0; step < STEPS; step++) {
        for (int d = 0; d < DEVICES; d++)
            for (int k = 0; k < 2; k++)
                held[d][k] = take(d, bytes);
        for (int d = 0; d < DEVICES; d++)
            for (int k = 0; k < 2; k++)
                give(d, held[d][k], bytes);
        assert_int_equal(allocs, 2 * DEVICES);
        assert_int_equal(frees, 0);
    }
    spmd__memory_pool_drain();
    assert_int_equal(frees, 2 * DEVICES);
}

/* A device keeps its 64 newest blocks: the 65th release frees its oldest, not another device's. */
static void test_device_keeps_at_most_64(void **state)
{
    (void)state;
    spmd__memory_pool_open((size_t)1 << 30, 0, 2);
    reset();
    void *blocks[65], *elsewhere = take(1, BIG);
    for (int i = 0; i < 65; i++)
        blocks[i] = take(0, BIG + (size_t)i * 4096); /* sizes apart: each found by its own */
    give(1, elsewhere, BIG);
    for (int i = 0; i < 65; i++)
        give(0, blocks[i], BIG + (size_t)i * 4096);
    assert_int_equal(frees, 1); /* the oldest of device 0 */
    assert_ptr_equal(take(1, BIG), elsewhere);
    for (int i = 64; i >= 1; i--)
        assert_ptr_equal(take(0, BIG + (size_t)i * 4096), blocks[i]);
    assert_int_equal(allocs, 66);
    void *fresh = take(0, BIG); /* the first one was freed */
    assert_int_equal(allocs, 67);
    give(0, fresh, BIG);
    for (int i = 1; i < 65; i++)
        give(0, blocks[i], BIG + (size_t)i * 4096);
    give(1, elsewhere, BIG);
    spmd__memory_pool_drain();
    assert_int_equal(frees, 67);
}

/* Beyond the limit the oldest blocks of any device go; a block larger than the limit is not kept,
 * and a limit of 0 keeps nothing. */
static void test_limit_frees_oldest_first(void **state)
{
    (void)state;
    spmd__memory_pool_open(3 * BIG, 0, 3);
    reset();
    void *a = take(0, BIG), *b = take(1, BIG), *c = take(2, BIG), *d = take(2, BIG);
    give(0, a, BIG);
    give(1, b, BIG);
    give(2, c, BIG);
    assert_int_equal(frees, 0);
    give(2, d, BIG); /* over the limit: a (device 0, the oldest) goes */
    assert_int_equal(frees, 1);
    assert_int_equal(allocs, 4);
    assert_ptr_equal(take(1, BIG), b);
    void *again = take(0, BIG);
    assert_int_equal(allocs, 5);
    void *huge = take(0, 4 * BIG);
    give(0, huge, 4 * BIG); /* larger than the limit: freed */
    assert_int_equal(frees, 2);
    void *big = take(0, 3 * BIG);
    give(0, again, BIG);   /* fits: c, d and again kept */
    give(0, big, 3 * BIG); /* evicts c, d and again: only big fits */
    give(1, b, BIG);       /* evicts big */
    assert_int_equal(frees, 6);
    spmd__memory_pool_drain();
    assert_int_equal(frees, 7);
    assert_int_equal(allocs, 7);

    spmd__memory_pool_open(0, 0, 1);
    reset();
    void *x = take(0, BIG);
    give(0, x, BIG);
    assert_int_equal(frees, 1);
    spmd__memory_pool_drain();
}

/* Small blocks, devices of other processes and a drained pool: freed at once. */
static void test_not_kept(void **state)
{
    (void)state;
    spmd__memory_pool_open((size_t)1 << 30, 8, 8);
    reset();
    void *small = take(8, 60 * KIB), *below = take(7, BIG), *above = take(16, BIG);
    give(8, small, 60 * KIB);
    give(7, below, BIG);
    give(16, above, BIG);
    assert_int_equal(frees, 3);
    void *kept = take(15, BIG);
    give(15, kept, BIG);
    assert_int_equal(frees, 3);
    spmd__memory_pool_drain();
    assert_int_equal(frees, 4);
    void *late = take(15, BIG);
    assert_int_equal(allocs, 5);
    give(15, late, BIG); /* after drain: freed */
    assert_int_equal(frees, 5);
}

/* Threads, each on devices of its own and one shared, take and give back: every block freed once,
 * none handed to two at a time (each writes its mark, then checks it). */
enum { THREADS = 4, ROUNDS = 400 };

static void *churn(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int r = 0; r < ROUNDS; r++) {
        int device = r % 2 ? t : THREADS;
        size_t bytes = BIG + (size_t)(r % 3) * 4096;
        void *p = NULL;
        if (spmd__memory_alloc(&fake, device, 0, bytes, &p) != SPMD_OK)
            return (void *)1;
        memset(p, t + 1, 4096);
        for (int i = 0; i < 4096; i++)
            if (((unsigned char *)p)[i] != t + 1)
                return (void *)1;
        spmd__memory_release(&fake, device, 0, p, bytes);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    spmd__memory_pool_open(6 * BIG, 0, THREADS + 1);
    reset();
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, churn, (void *)(intptr_t)t), 0);
    for (int t = 0; t < THREADS; t++) {
        void *bad = NULL;
        pthread_join(th[t], &bad);
        assert_null(bad);
    }
    spmd__memory_pool_drain();
    assert_int_equal(allocs, frees);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_comes_back_by_device_and_size),
        cmocka_unit_test(test_many_devices_keep_their_blocks),
        cmocka_unit_test(test_device_keeps_at_most_64),
        cmocka_unit_test(test_limit_frees_oldest_first),
        cmocka_unit_test(test_not_kept),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
