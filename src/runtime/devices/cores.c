/* The cores this process may use (cores.h): affinity, capped by the control group's quota. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT (the library defines it for every file) */
#endif
#include "runtime/devices/cores.h"

#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first line of a file, or 0 when it cannot be read. */
static int read_line(const char *path, char *line, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(line, (int)size, f) != NULL;
    fclose(f);
    return ok;
}

/* cgroup v2: "QUOTA PERIOD" or "max PERIOD" in cpu.max. Cores, or 0 when unlimited. */
static double quota_v2(const char *path)
{
    char line[128];
    long long quota = 0, period = 0;
    if (!read_line(path, line, sizeof line) || strncmp(line, "max", 3) == 0 ||
        sscanf(line, "%lld %lld", &quota, &period) != 2 || quota <= 0 || period <= 0)
        return 0;
    return (double)quota / (double)period;
}

/* cgroup v1: cpu.cfs_quota_us (-1: unlimited) over cpu.cfs_period_us in DIR. */
static double quota_v1(const char *dir)
{
    char path[PATH_MAX], line[64];
    long long quota = 0, period = 0;
    if (snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir) >= (int)sizeof path)
        return 0;
    if (!read_line(path, line, sizeof line) || sscanf(line, "%lld", &quota) != 1 || quota <= 0)
        return 0;
    if (snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir) >= (int)sizeof path)
        return 0;
    if (!read_line(path, line, sizeof line) || sscanf(line, "%lld", &period) != 1 || period <= 0)
        return 0;
    return (double)quota / (double)period;
}

/* The quota of the group a /proc/self/cgroup line names, in cores (0: none found). Inside a
 * container the group's own directory is often the mount's root: both are looked at. */
static double quota_of_line(const char *line, const char *sys_root)
{
    char path[PATH_MAX], dir[PATH_MAX];
    const char *first = strchr(line, ':'), *second = first ? strchr(first + 1, ':') : NULL;
    if (!second)
        return 0;
    size_t n = strcspn(second + 1, "\n");
    snprintf(dir, sizeof dir, "%.*s", (int)n, second + 1);
    if (strncmp(line, "0::", 3) == 0) { /* v2: the unified hierarchy */
        double q = 0;
        if (snprintf(path, sizeof path, "%s/sys/fs/cgroup%s/cpu.max", sys_root, dir) <
            (int)sizeof path)
            q = quota_v2(path);
        if (q <= 0) {
            snprintf(path, sizeof path, "%s/sys/fs/cgroup/cpu.max", sys_root);
            q = quota_v2(path);
        }
        return q;
    }
    /* v1: the line of the cpu controller ("3:cpu,cpuacct:/path") */
    size_t controllers = (size_t)(second - first - 1);
    char list[256];
    snprintf(list, sizeof list, ",%.*s,", (int)controllers, first + 1);
    if (!strstr(list, ",cpu,"))
        return 0;
    char mount[PATH_MAX];
    snprintf(mount, sizeof mount, "%s/sys/fs/cgroup/%.*s", sys_root, (int)controllers, first + 1);
    double q = 0;
    if (snprintf(path, sizeof path, "%s%s", mount, dir) < (int)sizeof path)
        q = quota_v1(path);
    if (q <= 0) {
        snprintf(path, sizeof path, "%s/sys/fs/cgroup/cpu", sys_root);
        q = quota_v1(path);
    }
    return q;
}

int spmd__usable_cores_from(const char *cgroup_list, const char *sys_root, int affinity)
{
    int cores = affinity > 0 ? affinity : 1;
    double quota = 0; /* the tightest group's */
    for (const char *line = cgroup_list; line && *line;) {
        double q = quota_of_line(line, sys_root);
        if (q > 0 && (quota <= 0 || q < quota))
            quota = q;
        const char *end = strchr(line, '\n');
        line = end ? end + 1 : NULL;
    }
    if (quota > 0 && ceil(quota) < cores)
        cores = (int)ceil(quota);
    return cores;
}

static int online_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The cores under a quota: the tightest of the groups /proc/self/cgroup names. */
static int under_quota(int cores)
{
    char list[4096] = "";
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) {
        size_t got = fread(list, 1, sizeof list - 1, f);
        list[got] = '\0';
        fclose(f);
    }
    return spmd__usable_cores_from(list, "", cores);
}

void spmd__core_mask(unsigned char *mask)
{
    cpu_set_t set;
    int known = sched_getaffinity(0, sizeof set, &set) == 0, online = known ? 0 : online_cores();
    memset(mask, 0, SPMD__CORE_MASK_BYTES);
    for (int i = 0; i < 8 * SPMD__CORE_MASK_BYTES; i++)
        if (known ? i < CPU_SETSIZE && CPU_ISSET(i, &set) : i < online)
            mask[i / 8] |= (unsigned char)(1u << (i % 8));
}

int spmd__mask_cores(const unsigned char *mask)
{
    int count = 0;
    for (int i = 0; i < SPMD__CORE_MASK_BYTES; i++)
        count += __builtin_popcount(mask[i]);
    return under_quota(count > 0 ? count : 1);
}

int spmd__usable_cores(void)
{
    unsigned char mask[SPMD__CORE_MASK_BYTES];
    spmd__core_mask(mask);
    return spmd__mask_cores(mask);
}
