/* CPU buffers of 64 KiB and more ask for transparent huge pages (SPMD_HUGE_PAGES,
 * src/runtime/devices/backend/cpu.c): an array's bytes survive at the sizes around the
 * boundaries, a large buffer starts on a huge page's boundary and its mapping carries the advice
 * (smaps' VmFlags "hg") that holds a header page and the block's pages and goes whole with the
 * buffer, one from 64 KiB to 2 MiB lies in a pool's huge page (huge_pool.c) on a 16 KiB
 * boundary where another process of the run shares the machine (run with 2 processes; alone,
 * malloc's), SPMD_HUGE_PAGES=0 gives malloc's buffers, and a bad value fails spmd_init. With
 * MPI, the test starts MPI itself, so that libspmd starts and stops several times inside it. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"
#ifdef SPMD_HAVE_MPI
#include <spmd/mpi.h>
#endif

#if SPMD_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define HUGE_PAGE ((size_t)2 << 20)
#define POOLED_MIN ((size_t)64 << 10)
#define POOL_UNIT ((size_t)16 << 10)

/* Where the caller's environment asks glibc's malloc for huge pages itself. */
static int malloc_asks_huge(void)
{
    const char *t = getenv("GLIBC_TUNABLES");
    return t && strstr(t, "glibc.malloc.hugetlb") && !strstr(t, "glibc.malloc.hugetlb=0");
}

static unsigned char pattern(size_t i, size_t bytes) { return (unsigned char)(i * 131 + bytes); }

/* An array of `bytes` on the first device: its shard's address and mapping as `huge` says, every
 * byte written through the shard read back by spmd_array_to_host; without the reuse of freed
 * buffers (`reuse` 0, SPMD_BUFFER_POOL_MB=0) a buffer of its own mapping is unmapped whole as the
 * array goes. */
static void round_trip(size_t bytes, int huge, int reuse)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *host = malloc(bytes), *back = malloc(bytes);
    assert_non_null(host);
    assert_non_null(back);
    for (size_t i = 0; i < bytes; i++)
        host[i] = pattern(i, bytes);
    int64_t shape[1] = {(int64_t)bytes};
    for (int again = 0; again < 2; again++) { /* the second one may come from the pool */
        spmd_array *a = NULL;
        assert_ok(spmd_array_create_on_device(spmd_local_device_id(0), host, 1, shape,
                                              SPMD_DTYPE_U8, &a));
        spmd_shard sh;
        assert_ok(spmd_array_shard(a, 0, &sh));
        assert_int_equal(sh.nbytes, bytes);
        uintptr_t at = (uintptr_t)sh.data;
        assert_int_equal(at % 64, 0);
        spmd_test_mapping m = {0, 0, 0};
        int known = spmd_test_mapping_of(sh.data, &m);
        int own = huge && bytes >= HUGE_PAGE;
        /* the test's processes all run on this machine */
        int in_pool = huge && bytes >= POOLED_MIN && !own && spmd_test_kernel_gives_huge_pages() &&
                      spmd_process_count() > 1;
        if (in_pool) { /* inside one huge page of the pool */
            assert_int_equal(at % POOL_UNIT, 0);
            assert_int_equal(at / HUGE_PAGE, (at + bytes - 1) / HUGE_PAGE);
            if (known)
                assert_int_equal(m.huge, 1);
#if SPMD_TEST_ASAN
            if (bytes % POOL_UNIT)
                assert_true(__asan_address_is_poisoned((char *)sh.data + bytes));
#endif
        } else if (own) {
            /* a header page, then the block's pages: nothing more */
            assert_int_equal(at % HUGE_PAGE, 0);
            if (known) {
                assert_int_equal(m.huge, 1);
                assert_int_equal(m.lo, at - page);
                size_t guard = 0;
#if SPMD_TEST_ASAN
                guard = page; /* cpu.c's poisoned page past the end */
#endif
                assert_int_equal(m.hi, at + (bytes + page - 1) / page * page + guard);
            }
        } else if (known && !malloc_asks_huge()) {
#if !SPMD_TEST_ASAN /* AddressSanitizer's own allocator may advise its large blocks */
            assert_int_equal(m.huge, 0);
#endif
        }
#if SPMD_TEST_ASAN
        if (own) { /* AddressSanitizer still sees past either end of a mapping of its own */
            assert_false(__asan_address_is_poisoned(sh.data));
            assert_false(__asan_address_is_poisoned((char *)sh.data + bytes - 1));
            assert_true(__asan_address_is_poisoned((char *)sh.data + bytes));
            assert_true(__asan_address_is_poisoned((char *)sh.data - 1));
        }
#endif
        /* the whole block is the shard's: its last byte too */
        unsigned char *data = sh.data;
        assert_int_equal(data[bytes - 1], pattern(bytes - 1, bytes));
        data[bytes - 1] ^= 0xff;
        memset(back, 0, bytes);
        assert_ok(spmd_array_to_host(a, back, bytes));
        host[bytes - 1] ^= 0xff;
        assert_memory_equal(back, host, bytes);
        host[bytes - 1] ^= 0xff;
        spmd_array_destroy(a);
        if (own && !reuse) { /* freed at once: its whole mapping is gone */
            errno = 0;
            assert_int_equal(msync((void *)(at - page), page, MS_ASYNC), -1);
            assert_int_equal(errno, ENOMEM);
            assert_int_equal(
                msync((void *)(at + bytes - 1 - (at + bytes - 1) % page), page, MS_ASYNC), -1);
        }
    }
    free(host);
    free(back);
}

static const size_t sizes[] = {1,
                               4096,
                               (64u << 10) - 1,
                               64u << 10,
                               1u << 20,
                               (1536u << 10) + 3,
                               (2u << 20) - 1,
                               2u << 20,
                               (2u << 20) + 1,
                               (3u << 20) + 5,
                               8u << 20};

/* spmd_init for these tests; 0 where the devices are not CPU devices (tests/run_cuda.sh). */
static int init_on_cpu(void)
{
    assert_ok(spmd_init(NULL));
    if (spmd_runtime_platform() == SPMD_PLATFORM_CPU)
        return 1;
    assert_ok(spmd_finalize());
    return 0;
}

static void all_sizes(int huge, int reuse)
{
    setenv("SPMD_BUFFER_POOL_MB", reuse ? "1024" : "0", 1);
    if (!init_on_cpu()) {
        unsetenv("SPMD_BUFFER_POOL_MB");
        skip();
    }
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        round_trip(sizes[k], huge, reuse);
    assert_ok(spmd_finalize());
    unsetenv("SPMD_BUFFER_POOL_MB");
}

static void test_huge_by_default(void **state)
{
    (void)state;
    all_sizes(1, 1);
    all_sizes(1, 0);
}

static void test_setting_off(void **state)
{
    (void)state;
    setenv("SPMD_HUGE_PAGES", "0", 1);
    all_sizes(0, 1);
    all_sizes(0, 0);
    unsetenv("SPMD_HUGE_PAGES");
}

static void test_bad_setting(void **state)
{
    (void)state;
    static const char *const bad[] = {"2", "-1", "yes", "1 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("SPMD_HUGE_PAGES", bad[i], 1);
        spmd_status st = spmd_init(NULL);
        /* every process refuses it; beside the first, as that process's failure */
        if (st != SPMD_ERR_INVALID_ARGUMENT)
            assert_int_equal(st, SPMD_ERR_DISTRIBUTED);
        assert_non_null(strstr(spmd_last_error(), "SPMD_HUGE_PAGES"));
        assert_false(spmd_is_initialized());
    }
    unsetenv("SPMD_HUGE_PAGES");
}

int main(int argc, char **argv)
{
    unsetenv("SPMD_HUGE_PAGES"); /* the default is what is tested first */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_by_default),
        cmocka_unit_test(test_setting_off),
        cmocka_unit_test(test_bad_setting),
    };
#ifdef SPMD_HAVE_MPI
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int failures = cmocka_run_group_tests(tests, NULL, NULL), any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
#else
    (void)argc;
    (void)argv;
    return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
