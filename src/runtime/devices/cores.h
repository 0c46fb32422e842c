/* Private: the cores this process may keep busy, for the policies of its waits. */
#ifndef SPMD_RUNTIME_CORES_H
#define SPMD_RUNTIME_CORES_H

/**
 * The cores this process may use: its affinity mask (sched_getaffinity), capped by its control
 * group's CPU quota, rounded up (a container limited to 1.5 CPUs on a 64-core machine keeps 2
 * threads busy, not 64). At least 1.
 */
int spmd__usable_cores(void);

/* A set of cores as bits (core i: bit i % 8 of byte i / 8), up to 1024 cores. */
#define SPMD__CORE_MASK_BYTES 128

/** This process's affinity as a mask (every online core where it cannot be read). */
void spmd__core_mask(unsigned char *mask);

/**
 * The cores of `mask` (the union of the masks of a machine's processes: a launcher that binds
 * each to a core of its own leaves each spmd__usable_cores at 1, not the union), capped by this
 * process's control group's quota (the processes of one container share it). At least 1.
 */
int spmd__mask_cores(const unsigned char *mask);

/**
 * The same from given sources, for tests: `cgroup_list` as /proc/self/cgroup reads (NULL: none),
 * `sys_root` where /sys/fs/cgroup lies ("" for the real one), `affinity` the mask's count.
 */
int spmd__usable_cores_from(const char *cgroup_list, const char *sys_root, int affinity);

#endif /* SPMD_RUNTIME_CORES_H */
