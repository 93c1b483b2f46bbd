/*
 * srv_cgroup.c: the CPU quota that a process's cgroups set (srv_cgroup.h).
 *
 * Where the quota lives (kernel's Documentation/admin-guide/cgroup-v2.rst
 * and cgroup-v1/cgroups.rst, proc(5) for both files):
 *   - /proc/self/cgroup names the process's cgroup per hierarchy, one line
 *     "ID:CONTROLLERS:PATH"; cgroup v2's line is "0::PATH", a v1 hierarchy
 *     lists its controllers ("cpu" or "cpu,cpuacct").
 *   - /proc/self/mountinfo tells where each hierarchy is mounted: field 4
 *     is the mount's root within the hierarchy, field 5 the mount point,
 *     and after the " - " separator come the file system type (cgroup2 or
 *     cgroup) and, for v1, the super options naming the controllers.
 *   - The group's directory is the mount point plus PATH less the mount's
 *     root.  In it, v2's cpu.max holds "max PERIOD" or "QUOTA PERIOD"; v1's
 *     cpu.cfs_quota_us holds -1 or QUOTA, cpu.cfs_period_us PERIOD (µs).
 *   - A group's threads are limited by its own quota and by every
 *     ancestor's, so the tightest on the way up to the mount point counts.
 *     (A container sees its own group as the root of its mount.)
 */
#define _GNU_SOURCE
#include "srv_cgroup.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A mount of the hierarchy that has the cpu controller. */
typedef struct cg_mount {
	char root[PATH_MAX];  /* the mount's root within the hierarchy */
	char point[PATH_MAX]; /* where it is mounted */
} cg_mount;

/* Whether comma-separated `list` holds `item`. */
static bool list_has(const char *list, const char *item)
{
	size_t n = strlen(item);

	for (const char *p = list;;) {
		size_t len = strcspn(p, ",");

		if (len == n && strncmp(p, item, n) == 0)
			return true;
		if (p[len] != ',')
			return false;
		p += len + 1;
	}
}

/* Undoes mountinfo's escapes (\040 for a space, \011, \012, \134) in place. */
static void unescape_octal(char *s)
{
	char *out = s;

	for (char *in = s; *in;) {
		if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' &&
		    in[3] >= '0' && in[3] <= '7') {
			*out++ = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
			in += 4;
		} else {
			*out++ = *in++;
		}
	}
	*out = '\0';
}

/* A whole non-negative decimal of at most 18 digits (a cgroup file's
 * number), or -1. */
static long long parse_count(const char *s)
{
	long long v = 0;
	size_t n = strspn(s, "0123456789");

	if (n == 0 || n > 18 || (s[n] != '\0' && s[n] != ' ' && s[n] != '\n'))
		return -1;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	return v;
}

/* Finds the cgroup2 mount (v2) or the v1 mount with the cpu controller in
 * the mountinfo file; the first one listed wins. */
static bool find_mount(const char *mountinfo, bool v2, cg_mount *ret)
{
	FILE *f = fopen(mountinfo, "re");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;

	if (!f)
		return false;
	while (!found && getline(&line, &cap, f) > 0) {
		char *save = NULL, *field[6] = {0}, *tok, *type = NULL, *super = NULL;
		int i = 0;

		line[strcspn(line, "\n")] = '\0';
		for (tok = strtok_r(line, " ", &save); tok && i < 6; tok = strtok_r(NULL, " ", &save))
			field[i++] = tok;
		/* Optional fields until the "-" separator. */
		while (tok && strcmp(tok, "-") != 0)
			tok = strtok_r(NULL, " ", &save);
		if (i < 6 || !tok)
			continue;
		type = strtok_r(NULL, " ", &save);
		(void)strtok_r(NULL, " ", &save); /* the source */
		super = strtok_r(NULL, " ", &save);
		if (!type || (v2 ? strcmp(type, "cgroup2") != 0
				 : strcmp(type, "cgroup") != 0 || !super || !list_has(super, "cpu")))
			continue;
		unescape_octal(field[3]);
		unescape_octal(field[4]);
		found = snprintf(ret->root, sizeof(ret->root), "%s", field[3]) < (int)sizeof(ret->root) &&
			snprintf(ret->point, sizeof(ret->point), "%s", field[4]) < (int)sizeof(ret->point);
	}
	free(line);
	fclose(f);
	return found;
}

/* The process's group in the hierarchy: v2's "0::PATH" line or the v1 line
 * whose controllers include cpu. */
static bool find_group(const char *cgroup, bool v2, char *ret, size_t size)
{
	FILE *f = fopen(cgroup, "re");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;

	if (!f)
		return false;
	while (!found && getline(&line, &cap, f) > 0) {
		char *first = strchr(line, ':'), *second = first ? strchr(first + 1, ':') : NULL;

		if (!second)
			continue;
		line[strcspn(line, "\n")] = '\0';
		*first = '\0';
		*second = '\0';
		/* line is now the ID, first + 1 the controllers. */
		if (v2 ? strcmp(line, "0") == 0 && first[1] == '\0' : list_has(first + 1, "cpu"))
			found = snprintf(ret, size, "%s", second + 1) < (int)size;
	}
	free(line);
	fclose(f);
	return found;
}

/* Reads the first line of dir/name into buf; false when it cannot. */
static bool read_line(const char *dir, const char *name, char *buf, size_t size)
{
	char path[PATH_MAX];
	FILE *f;
	bool ok;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return false;
	f = fopen(path, "re");
	if (!f)
		return false;
	ok = fgets(buf, (int)size, f) != NULL;
	fclose(f);
	return ok;
}

/* The quota set on one group's directory, in CPUs; 0 for none. */
static double dir_quota(const char *dir, bool v2)
{
	char buf[128];
	long long quota, period;

	if (v2) {
		const char *space;

		if (!read_line(dir, "cpu.max", buf, sizeof(buf)) || strncmp(buf, "max", 3) == 0)
			return 0;
		space = strchr(buf, ' ');
		quota = parse_count(buf);
		period = space ? parse_count(space + 1) : -1;
	} else {
		if (!read_line(dir, "cpu.cfs_quota_us", buf, sizeof(buf)) || buf[0] == '-')
			return 0;
		quota = parse_count(buf);
		if (!read_line(dir, "cpu.cfs_period_us", buf, sizeof(buf)))
			return 0;
		period = parse_count(buf);
	}
	if (quota <= 0 || period <= 0)
		return 0;
	return (double)quota / (double)period;
}

/* The tightest quota from the process's group up to the mount point in
 * one hierarchy; 0 for none. */
static double hierarchy_quota(const char *mountinfo, const char *cgroup, bool v2)
{
	cg_mount m;
	char group[PATH_MAX], dir[PATH_MAX];
	const char *rel;
	size_t root_len, point_len;
	double tightest = 0;

	if (!find_mount(mountinfo, v2, &m) || !find_group(cgroup, v2, group, sizeof(group)))
		return 0;
	/* The group's path less the mount's root; a group outside the mounted
	 * part (another namespace's view) is read at the mount point. */
	root_len = strcmp(m.root, "/") == 0 ? 0 : strlen(m.root);
	if (strncmp(group, m.root, root_len) == 0 &&
	    (group[root_len] == '/' || group[root_len] == '\0'))
		rel = group + root_len;
	else
		rel = "";
	if (strcmp(rel, "/") == 0)
		rel = "";
	point_len = strlen(m.point);
	if (point_len > 1 && m.point[point_len - 1] == '/')
		m.point[--point_len] = '\0';
	if (snprintf(dir, sizeof(dir), "%s%s", m.point, rel) >= (int)sizeof(dir))
		return 0;
	for (;;) {
		double q = dir_quota(dir, v2);
		char *slash;

		if (q > 0 && (tightest == 0 || q < tightest))
			tightest = q;
		if (strlen(dir) <= point_len)
			break;
		slash = strrchr(dir, '/');
		if (!slash || (size_t)(slash - dir) < point_len)
			break;
		*slash = '\0';
	}
	return tightest;
}

double srv_cgroup_cpu_quota(const char *mountinfo, const char *cgroup)
{
	double v2 = hierarchy_quota(mountinfo, cgroup, true);
	double v1 = hierarchy_quota(mountinfo, cgroup, false);

	if (v2 > 0 && v1 > 0)
		return v2 < v1 ? v2 : v1;
	return v2 > 0 ? v2 : v1;
}
