/*
 * smallstack - a process that ends from a small stack.
 *
 *   smallstack handler _exit|exit
 *   smallstack thread
 *
 * handler: an 8 KB alternate signal stack (SIGSTKSZ), a SIGSEGV handler on
 * it (SA_ONSTACK) that writes "caught" and ends the process with _exit(42)
 * or exit(43); main first makes 1000 allocations of 24 bytes in
 * handler_work(), then writes through a null pointer.
 *
 * thread: a thread created with a 16 KB stack (PTHREAD_STACK_MIN) makes
 * 5000 allocations of 40 bytes in thread_work() and ends the process with
 * exit(9) while main waits in pthread_join.
 *
 * A tracer that ends its recording on the caller's stack overflows these:
 * the process dies of SIGSEGV instead (status 139).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *volatile sink;
static int use_exit;

static void on_segv(int sig)
{
	(void)sig;
	static const char m[] = "caught\n";
	if (write(1, m, sizeof(m) - 1) < 0)
		_exit(1);
	if (use_exit)
		exit(43);
	_exit(42);
}

__attribute__((noinline)) void handler_work(void)
{
	for (int i = 0; i < 1000; i++) {
		sink = malloc(24);
		free(sink);
	}
}

__attribute__((noinline)) void thread_work(void)
{
	for (int i = 0; i < 5000; i++) {
		sink = malloc(40);
		free(sink);
	}
}

static void *thread_main(void *arg)
{
	(void)arg;
	thread_work();
	exit(9);
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "handler") == 0) {
		use_exit = strcmp(argv[2], "exit") == 0;
		static char alt[8192];
		stack_t ss = {.ss_sp = alt, .ss_size = sizeof(alt)};
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_segv;
		sa.sa_flags = SA_ONSTACK;
		if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGSEGV, &sa, NULL) != 0)
			return 1;
		handler_work();
		volatile int *volatile null = NULL;
		*null = 1;
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "thread") == 0) {
		pthread_attr_t at;
		pthread_t th;
		if (pthread_attr_init(&at) != 0 || pthread_attr_setstacksize(&at, 16384) != 0 ||
		    pthread_create(&th, &at, thread_main, NULL) != 0)
			return 1;
		pthread_join(th, NULL);
		return 1; /* not reached: the thread exits */
	}
	fprintf(stderr, "usage: smallstack handler _exit|exit | thread\n");
	return 2;
}
