/* CPU buffers of 2 MiB and more ask for transparent huge pages (SPMD_HUGE_PAGES,
 * src/runtime/devices/backend/cpu.c): an array's bytes survive at the sizes around the boundary,
 * a large buffer starts on a huge page's boundary and its mapping carries the advice (smaps'
 * VmFlags "hg"), SPMD_HUGE_PAGES=0 gives malloc's buffers, and a bad value fails spmd_init. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

#define HUGE_PAGE ((size_t)2 << 20)

/* 1 where the mapping that holds p is advised for huge pages, 0 where not, -1 where smaps does
 * not say (no such file, or a kernel without transparent huge pages). */
static int advised_huge(const void *p)
{
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0)
        return -1;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[1024];
    int inside = 0, found = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo = 0, hi = 0;
        char dash = 0;
        if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            found = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return found;
}

/* Where the caller's environment asks glibc's malloc for huge pages itself. */
static int malloc_asks_huge(void)
{
    const char *t = getenv("GLIBC_TUNABLES");
    return t && strstr(t, "glibc.malloc.hugetlb") && !strstr(t, "glibc.malloc.hugetlb=0");
}

static unsigned char pattern(size_t i, size_t bytes) { return (unsigned char)(i * 131 + bytes); }

/* An array of `bytes` on the first device: its shard's address and mapping as `huge` says, every
 * byte written through the shard read back by spmd_array_to_host. */
static void round_trip(size_t bytes, int huge)
{
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
        int advised = advised_huge(sh.data);
        if (huge && bytes >= HUGE_PAGE) {
            assert_int_equal(at % HUGE_PAGE, 0);
            if (advised >= 0)
                assert_int_equal(advised, 1);
        } else if (advised >= 0 && !malloc_asks_huge()) {
            assert_int_equal(advised, 0);
        }
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
    }
    free(host);
    free(back);
}

static const size_t sizes[] = {
    1, 4096, (2u << 20) - 1, 2u << 20, (2u << 20) + 1, (3u << 20) + 5, 8u << 20};

static void test_huge_by_default(void **state)
{
    (void)state;
    assert_ok(spmd_init(NULL));
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        round_trip(sizes[k], 1);
    assert_ok(spmd_finalize());
}

static void test_setting_off(void **state)
{
    (void)state;
    setenv("SPMD_HUGE_PAGES", "0", 1);
    assert_ok(spmd_init(NULL));
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        round_trip(sizes[k], 0);
    assert_ok(spmd_finalize());
    unsetenv("SPMD_HUGE_PAGES");
}

static void test_bad_setting(void **state)
{
    (void)state;
    static const char *const bad[] = {"2", "-1", "yes", "1 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("SPMD_HUGE_PAGES", bad[i], 1);
        assert_status(spmd_init(NULL), SPMD_ERR_INVALID_ARGUMENT, "SPMD_HUGE_PAGES");
        assert_false(spmd_is_initialized());
    }
    unsetenv("SPMD_HUGE_PAGES");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_by_default),
        cmocka_unit_test(test_setting_off),
        cmocka_unit_test(test_bad_setting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
