/*
 * slow_listen_removal.c: preloaded into `dpgate serve` by test_keepalive's
 * shutdown test.  An epoll_ctl(EPOLL_CTL_DEL) called on the process's main
 * thread, the one that takes SIGTERM and quiesces libmicrohttpd, waits
 * 2 ms before it is made; the workers' calls are not delayed.
 *
 * A scheduler may always hold a thread that long.  Here it happens every
 * time, at the moment where libmicrohttpd 0.9.75's epoll workers race the
 * quiesce to remove the listening socket (the worker wins, the quiesce's
 * removal fails, the library aborts), so that the test catches a server
 * run in that mode every time and not now and then.  A server whose
 * workers poll makes no epoll_ctl call, and the shim changes nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	int (*real)(int, int, int, struct epoll_event *);

	*(void **)&real = dlsym(RTLD_NEXT, "epoll_ctl");
	if (op == EPOLL_CTL_DEL && gettid() == getpid()) {
		struct timespec ts = {0, 2 * 1000 * 1000};

		nanosleep(&ts, NULL);
	}
	return real(epfd, op, fd, event);
}
