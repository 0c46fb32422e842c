/* The cores a process may use (src/runtime/devices/cores.c): its affinity, capped by its
 * control group's CPU quota, read from a planted /sys/fs/cgroup tree; and the cores of a mask,
 * the union of a machine's processes' affinities that start-up forms. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/devices/cores.h"
#include "testutil.h"

static char root[256];

/* Writes `text` to root/path, making its folders. */
static void plant(const char *path, const char *text)
{
    char full[1024];
    snprintf(full, sizeof full, "%s/%s", root, path);
    for (char *slash = strchr(full + strlen(root) + 1, '/'); slash;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(full, 0700);
        *slash = '/';
    }
    FILE *f = fopen(full, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/spmd-test-cores-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_no_group(void **state)
{
    (void)state;
    assert_int_equal(spmd__usable_cores_from(NULL, root, 8), 8);
    assert_int_equal(spmd__usable_cores_from("", root, 3), 3);
    assert_int_equal(spmd__usable_cores_from("garbage without colons\n", root, 4), 4);
    assert_int_equal(spmd__usable_cores_from(NULL, root, 0), 1); /* at least one */
}

static void test_v2_quota(void **state)
{
    (void)state;
    plant("sys/fs/cgroup/job/cpu.max", "150000 100000\n");
    assert_int_equal(spmd__usable_cores_from("0::/job\n", root, 8), 2); /* 1.5 rounds up */
    assert_int_equal(spmd__usable_cores_from("0::/job\n", root, 1), 1); /* affinity is less */
    plant("sys/fs/cgroup/open/cpu.max", "max 100000\n");
    assert_int_equal(spmd__usable_cores_from("0::/open\n", root, 8), 8);
    /* the group's folder is not there (a container's namespace): the mount's root counts */
    plant("sys/fs/cgroup/cpu.max", "300000 100000\n");
    assert_int_equal(spmd__usable_cores_from("0::/elsewhere\n", root, 16), 3);
}

static void test_v1_quota(void **state)
{
    (void)state;
    plant("sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_quota_us", "50000\n");
    plant("sys/fs/cgroup/cpu,cpuacct/a/cpu.cfs_period_us", "100000\n");
    const char *list = "4:memory:/a\n3:cpu,cpuacct:/a\n2:cpuacct:/\n";
    assert_int_equal(spmd__usable_cores_from(list, root, 8), 1);
    plant("sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_quota_us", "-1\n");
    plant("sys/fs/cgroup/cpu,cpuacct/b/cpu.cfs_period_us", "100000\n");
    assert_int_equal(spmd__usable_cores_from("3:cpu,cpuacct:/b\n", root, 8), 8);
    /* a line without the cpu controller says nothing */
    assert_int_equal(spmd__usable_cores_from("2:cpuacct:/a\n", root, 8), 8);
    /* a quota above the affinity leaves the affinity */
    plant("sys/fs/cgroup/cpu,cpuacct/c/cpu.cfs_quota_us", "400000\n");
    plant("sys/fs/cgroup/cpu,cpuacct/c/cpu.cfs_period_us", "100000\n");
    assert_int_equal(spmd__usable_cores_from("3:cpu,cpuacct:/c\n", root, 2), 2);
}

static void test_this_process(void **state)
{
    (void)state;
    int n = spmd__usable_cores();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    assert_true(n >= 1);
    assert_true(online < 1 || n <= online);
    unsigned char mask[SPMD__CORE_MASK_BYTES];
    spmd__core_mask(mask);
    assert_int_equal(spmd__mask_cores(mask), n); /* its affinity, under the same quota */
    memset(mask, 0, sizeof mask);
    assert_int_equal(spmd__mask_cores(mask), 1); /* at least 1 */
}

static int bit(const unsigned char *mask, int core) { return mask[core / 8] >> (core % 8) & 1; }

/* Two processes bound to a core each (as a launcher binds them) may use 1 each, and the two
 * cores between them: the union of their masks counts, as start-up forms it. */
static void test_bound_to_one_core(void **state)
{
    (void)state;
    cpu_set_t was, one;
    assert_int_equal(sched_getaffinity(0, sizeof was, &was), 0);
    int before = spmd__usable_cores(), first = 0, second;
    while (!CPU_ISSET(first, &was))
        first++;
    for (second = first + 1; second < CPU_SETSIZE && !CPU_ISSET(second, &was); second++)
        ;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    unsigned char mask[SPMD__CORE_MASK_BYTES];
    int usable = spmd__usable_cores();
    spmd__core_mask(mask);
    assert_int_equal(sched_setaffinity(0, sizeof was, &was), 0);
    assert_int_equal(usable, 1);
    for (int core = 0; core < 8 * SPMD__CORE_MASK_BYTES; core++)
        assert_int_equal(bit(mask, core), core == first);
    if (second == CPU_SETSIZE) /* one core to this process: no second to add */
        return;
    mask[second / 8] |= (unsigned char)(1u << (second % 8)); /* another process's */
    assert_int_equal(spmd__mask_cores(mask), before < 2 ? before : 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_group),          cmocka_unit_test(test_v2_quota),
        cmocka_unit_test(test_v1_quota),          cmocka_unit_test(test_this_process),
        cmocka_unit_test(test_bound_to_one_core),
    };
    return cmocka_run_group_tests(tests, setup, teardown) ? 1 : 0;
}
