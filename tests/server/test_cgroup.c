/*
 * test_cgroup.c: reading a process's CPU quota from its cgroups
 * (server/srv_cgroup.c), on file trees laid out as the kernel lays out
 * /proc/self/mountinfo, /proc/self/cgroup and the cgroup file systems
 * (proc(5); Documentation/admin-guide/cgroup-v2.rst, cgroup-v1).
 *
 * Each case writes a mountinfo, a cgroup file and the groups' quota files
 * under a temporary directory; the expected quota is the quota over the
 * period of the tightest group on the way up, written beside each case.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "srv_cgroup.h"

typedef struct tree {
	char dir[64];
	char mountinfo[128];
	char cgroup[128];
} tree;

static void tree_new(tree *t)
{
	strcpy(t->dir, "/tmp/dpgate-cgroup-XXXXXX");
	cr_assert_not_null(mkdtemp(t->dir));
	snprintf(t->mountinfo, sizeof(t->mountinfo), "%s/mountinfo", t->dir);
	snprintf(t->cgroup, sizeof(t->cgroup), "%s/cgroup", t->dir);
}

static void tree_free(tree *t)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
	cr_expect_eq(system(cmd), 0);
}

/* Writes `text` (printf format) to the file at t->dir/rel, making its
 * folders. */
static void put(const tree *t, const char *rel, const char *fmt, ...)
{
	char path[512];
	FILE *f;
	va_list ap;

	snprintf(path, sizeof(path), "%s/%s", t->dir, rel);
	for (char *p = path + strlen(t->dir) + 1; (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		cr_assert(mkdir(path, 0700) == 0 || errno == EEXIST, "mkdir %s", path);
		*p = '/';
	}
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

/* A mountinfo with the usual neighbours, then a cgroup2 mount of the
 * hierarchy's `v2_root` at the tree's `v2_point` (as mountinfo escapes it)
 * when v2_root is not NULL, then the line that `v1` continues ("ROOT
 * MOUNTPOINT OPTIONS - TYPE SOURCE SUPER") when not NULL. */
static void put_mountinfo(const tree *t, const char *v2_root, const char *v2_point, const char *v1)
{
	char lines[2048];
	int n = snprintf(lines, sizeof(lines),
			 "22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw\n"
			 "23 22 0:21 / /proc rw,nosuid - proc proc rw\n");

	if (v2_root)
		n += snprintf(lines + n, sizeof(lines) - (size_t)n,
			      "30 23 0:26 %s %s/%s rw,nosuid shared:9 - cgroup2 cgroup2 rw\n",
			      v2_root, t->dir, v2_point);
	if (v1)
		n += snprintf(lines + n, sizeof(lines) - (size_t)n, "32 31 0:29 %s\n", v1);
	put(t, "mountinfo", "%s", lines);
}

Test(cgroup, v2_a_container_sees_its_own_group_as_the_root)
{
	tree t;

	tree_new(&t);
	put_mountinfo(&t, "/", "v2", NULL);
	put(&t, "cgroup", "0::/\n");
	put(&t, "v2/cpu.max", "150000 100000\n");
	cr_expect_float_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 1.5, 1e-12);
	put(&t, "v2/cpu.max", "max 100000\n");
	cr_expect_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.0, "'max' is no quota");
	tree_free(&t);
}

/* A group's threads are held to every ancestor's quota: the tightest
 * counts, wherever it is. */
Test(cgroup, v2_the_tightest_quota_on_the_way_up_counts)
{
	tree t;

	tree_new(&t);
	put_mountinfo(&t, "/", "v2", NULL);
	put(&t, "cgroup", "0::/system.slice/dpgate.service\n");
	put(&t, "v2/system.slice/dpgate.service/cpu.max", "max 100000\n");
	put(&t, "v2/system.slice/cpu.max", "50000 100000\n");
	cr_expect_float_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.5, 1e-12,
			   "the parent's quota holds the child");
	put(&t, "v2/system.slice/dpgate.service/cpu.max", "30000 200000\n");
	cr_expect_float_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.15, 1e-12);
	put(&t, "v2/cpu.max", "10000 100000\n");
	cr_expect_float_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.1, 1e-12,
			   "the mount point itself is read too");
	tree_free(&t);
}

/* The mount's root is taken off the group's path: a group mounted from
 * inside the hierarchy (a container without its own cgroup namespace). */
Test(cgroup, v2_the_mount_root_is_taken_off_the_path)
{
	tree t;

	tree_new(&t);
	put_mountinfo(&t, "/kubepods/pod1", "v2", NULL);
	put(&t, "cgroup", "0::/kubepods/pod1/ctr\n");
	put(&t, "v2/ctr/cpu.max", "250000 100000\n");
	cr_expect_float_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 2.5, 1e-12);
	/* A group outside the mounted part is read at the mount point. */
	put(&t, "cgroup", "0::/elsewhere\n");
	put(&t, "v2/cpu.max", "75000 100000\n");
	cr_expect_float_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.75, 1e-12);
	tree_free(&t);
}

Test(cgroup, v1_the_cpu_hierarchy_with_its_period)
{
	tree t;
	char v1[512];

	tree_new(&t);
	snprintf(v1, sizeof(v1), "/ %s/cpu,cpuacct rw,nosuid shared:12 - cgroup cgroup rw,cpu,cpuacct",
		 t.dir);
	put_mountinfo(&t, NULL, NULL, v1);
	put(&t, "cgroup", "5:memory:/a\n4:cpu,cpuacct:/a/b\n1:name=systemd:/a\n");
	put(&t, "cpu,cpuacct/a/b/cpu.cfs_quota_us", "-1\n");
	put(&t, "cpu,cpuacct/a/b/cpu.cfs_period_us", "100000\n");
	put(&t, "cpu,cpuacct/a/cpu.cfs_quota_us", "60000\n");
	put(&t, "cpu,cpuacct/a/cpu.cfs_period_us", "50000\n");
	cr_expect_float_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 1.2, 1e-12);
	put(&t, "cpu,cpuacct/a/cpu.cfs_quota_us", "-1\n");
	cr_expect_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.0, "-1 is no quota");
	tree_free(&t);
}

/* This machine's kind: v1 controllers each on its own mount, a v2 mount
 * without the cpu controller beside them.  A v1 mount without cpu
 * ("cpuacct", "cpuset") is not the cpu hierarchy. */
Test(cgroup, hybrid_v1_cpu_beside_a_v2_mount_without_it)
{
	tree t;
	char v1[1024];

	tree_new(&t);
	snprintf(v1, sizeof(v1),
		 "/ %s/cpuacct rw - cgroup cgroup rw,cpuacct\n"
		 "33 31 0:30 / %s/cpuset rw - cgroup cgroup rw,cpuset\n"
		 "34 31 0:31 / %s/cpu rw - cgroup cgroup rw,cpu",
		 t.dir, t.dir, t.dir);
	put_mountinfo(&t, "/", "v2", v1);
	put(&t, "cgroup", "3:cpuset:/\n2:cpuacct:/\n1:cpu:/q\n0::/\n");
	put(&t, "v2/cgroup.procs", "1\n"); /* no cpu.max: the controller is elsewhere */
	put(&t, "cpuacct/q/cpu.cfs_quota_us", "10000\n"); /* not the cpu hierarchy */
	put(&t, "cpuacct/q/cpu.cfs_period_us", "100000\n");
	put(&t, "cpu/q/cpu.cfs_quota_us", "50000\n");
	put(&t, "cpu/q/cpu.cfs_period_us", "100000\n");
	put(&t, "cpu/cpu.cfs_quota_us", "-1\n");
	put(&t, "cpu/cpu.cfs_period_us", "100000\n");
	cr_expect_float_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.5, 1e-12);
	tree_free(&t);
}

/* mountinfo writes a space in a path as \040. */
Test(cgroup, an_escaped_mount_point)
{
	tree t;

	tree_new(&t);
	put_mountinfo(&t, "/", "with\\040space", NULL);
	put(&t, "cgroup", "0::/\n");
	put(&t, "with space/cpu.max", "20000 100000\n");
	cr_expect_float_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.2, 1e-12);
	tree_free(&t);
}

/* What cannot be read or makes no sense is no quota: the caller acts as
 * without one. */
Test(cgroup, missing_or_malformed_files_are_no_quota)
{
	static const char *const bad[] = {"", "abc 100000\n", "50000\n", "50000 0\n",
					  "0 100000\n", "-5 100000\n", "5e4 100000\n",
					  "50000 1000000000000000000000\n"};
	tree t;

	tree_new(&t);
	cr_expect_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.0, "no files");
	put_mountinfo(&t, "/", "v2", NULL);
	cr_expect_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.0, "no cgroup file");
	put(&t, "cgroup", "0::/a\n");
	cr_expect_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.0, "no cpu.max");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put(&t, "v2/a/cpu.max", "%s", bad[i]);
		cr_expect_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.0, "cpu.max '%s'",
			     bad[i]);
	}
	put(&t, "mountinfo", "garbage\n\n- - -\n1 2 3\n");
	put(&t, "v2/a/cpu.max", "50000 100000\n");
	cr_expect_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.0, "no cgroup mount");
	put_mountinfo(&t, "/", "v2", NULL);
	put(&t, "cgroup", "not a cgroup line\n");
	cr_expect_eq(srv_cgroup_cpu_quota(t.mountinfo, t.cgroup), 0.0, "no group");
	tree_free(&t);
}
