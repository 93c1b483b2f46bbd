/*
 * no_random.c: preloaded into `dpgate serve` by test_no_random.c.  Its
 * getrandom fails with EIO while the file named by $DPGATE_TEST_NO_RANDOM
 * exists, and is the kernel's otherwise; so a test can take the server's
 * only source of randomness away and give it back without a restart.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
	const char *off = getenv("DPGATE_TEST_NO_RANDOM");

	if (off && access(off, F_OK) == 0) {
		errno = EIO;
		return -1;
	}
	return syscall(SYS_getrandom, buf, len, flags);
}
