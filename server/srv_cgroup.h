/*
 * srv_cgroup.h: the CPU quota that a process's cgroups set.
 *
 * A quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us over cpu.cfs_period_us:
 * a container's CPU limit, systemd's CPUQuota=) caps the CPU time all the
 * group's threads spend per period, at whatever priority they run.  Once
 * it is spent the whole group waits for the next period.  So CPU time that
 * is idle on the machine is not free for such a process: serve does not
 * keep the CPUs awake under a quota smaller than its CPUs (srv_awake.h),
 * since the idle-priority spinning would spend the quota that its requests
 * need.
 */
#ifndef SRV_CGROUP_H
#define SRV_CGROUP_H

/* The tightest CPU quota, in CPUs (quota over period), set on the cgroup
 * that /proc/self/cgroup names for the cpu controller or on any of its
 * ancestors up to the root of the mount that /proc/self/mountinfo lists
 * for it, under cgroup v2 or v1.  0 when no quota is set, and when the
 * files cannot be read or make no sense (no cgroup file system, another
 * layout): the caller then acts as without a quota.  mountinfo and
 * cgroup are the paths of those two files; tests pass others. */
double srv_cgroup_cpu_quota(const char *mountinfo, const char *cgroup);

#endif
