/*
 * fail_storage.c: preloaded into `dpgate serve` by test_storage.c, to make
 * the disk fail under a running server and then come back.
 *
 *   fsync, fdatasync   fail with EIO, syncing nothing, while the file named
 *                      by $DPGATE_TEST_FAIL_SYNC exists;
 *   pwrite, pwrite64   fail with ENOSPC, writing nothing, on a file whose
 *                      name ends in "-wal" while the file named by
 *                      $DPGATE_TEST_FAIL_WAL_WRITE exists.
 *
 * Otherwise each is the system call itself.  SQLite reaches all four
 * through the dynamic linker, so preloading is enough.
 */
/* Both names are defined here, so neither may be renamed to the other. */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static bool switched_on(const char *name)
{
	const char *path = getenv(name);
	int saved = errno;
	bool on = path && access(path, F_OK) == 0;

	errno = saved;
	return on;
}

static bool is_wal(int fd)
{
	char link[64], target[4096];
	ssize_t n;
	int saved = errno;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	errno = saved;
	if (n < 4)
		return false;
	target[n] = '\0';
	return strcmp(target + n - 4, "-wal") == 0;
}

int fsync(int fd)
{
	if (switched_on("DPGATE_TEST_FAIL_SYNC")) {
		errno = EIO;
		return -1;
	}
	return (int)syscall(SYS_fsync, fd);
}

int fdatasync(int fd)
{
	if (switched_on("DPGATE_TEST_FAIL_SYNC")) {
		errno = EIO;
		return -1;
	}
	return (int)syscall(SYS_fdatasync, fd);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset)
{
	if (switched_on("DPGATE_TEST_FAIL_WAL_WRITE") && is_wal(fd)) {
		errno = ENOSPC;
		return -1;
	}
	return syscall(SYS_pwrite64, fd, buf, count, offset);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
	return pwrite64(fd, buf, count, offset);
}
