/*
 * segv_recover - a program that handles its own SIGSEGV.
 *
 * Ground truth: main installs a SIGSEGV handler with sigaction(), then
 * ROUNDS = 5 times calls fault_once(), which writes through a NULL pointer;
 * the handler siglongjmp()s back and main prints "recovered <i>".  It then
 * sets SIGSEGV back to SIG_DFL, prints "faults handled 5" and exits 0.
 *
 * Expected: exactly the same standard output and exit status 0 with and
 * without rhea; the recording ends with "exit", status 0 (the agent must
 * neither swallow the program's handler nor treat a handled fault as a
 * crash).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 5

static sigjmp_buf env;
static volatile sig_atomic_t handled;
int *volatile null_ptr;
volatile int sink;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if (si->si_addr == NULL)
		handled++;
	siglongjmp(env, 1);
}

__attribute__((noinline)) void fault_once(void)
{
	*null_ptr = 1;
	sink++;
}

int main(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL) != 0)
		return 1;
	for (volatile int i = 1; i <= ROUNDS; i++) {
		void *volatile p = malloc(100); /* some hooked activity between faults */
		if (sigsetjmp(env, 1) == 0) {
			fault_once();
			puts("fault did not fault");
			return 1;
		}
		free(p);
		printf("recovered %d\n", i);
	}
	signal(SIGSEGV, SIG_DFL);
	printf("faults handled %d\n", (int)handled);
	return handled == ROUNDS ? 0 : 1;
}
