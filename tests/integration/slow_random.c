/*
 * slow_random.c: preloaded into `dpgate serve` by test_slowloris.c.  Its
 * getrandom first sleeps SLOW_RANDOM_MS while the file named by
 * $DPGATE_TEST_SLOW_RANDOM exists, and is the kernel's otherwise; so a
 * test can hold an HTTP thread busy for a known time with an ordinary
 * request that draws randomness (a key's creation), whatever the speed of
 * the machine.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SLOW_RANDOM_MS 2000

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
	const char *slow = getenv("DPGATE_TEST_SLOW_RANDOM");

	if (slow && access(slow, F_OK) == 0) {
		struct timespec t = {SLOW_RANDOM_MS / 1000, (SLOW_RANDOM_MS % 1000) * 1000000L};

		while (nanosleep(&t, &t) != 0)
			;
	}
	return syscall(SYS_getrandom, buf, len, flags);
}
