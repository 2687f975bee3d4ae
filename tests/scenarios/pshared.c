/*
 * pshared - waits on process-shared objects, released by another process.
 *
 * Ground truth: a semaphore, a mutex and a condition variable made
 * process-shared in a MAP_SHARED page; the parent locks the mutex and
 * forks.  The child:
 *
 *   1. pthread_mutex_lock on the shared mutex: the parent unlocks it
 *      WAIT_MS (60 ms) after the fork;
 *   2. sem_wait on the shared semaphore: the parent posts it WAIT_MS
 *      later;
 *   3. pthread_cond_wait on the shared condition variable until the
 *      parent, WAIT_MS later again, sets the flag and signals;
 *   4. sem_wait on a semaphore of its own (not shared), which a second
 *      thread of the child posts WAIT_MS / 2 after it starts.
 *
 * Expected in the child's recording: the three waits on shared objects
 * (about WAIT_MS each) are marked process-shared and name no waker (the
 * releaser is another process); the fourth, on the private semaphore, is
 * not marked and names the posting thread.  Prints "child waits done" and
 * exits 0.
 */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 60

struct shared {
	sem_t sem;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	int flag;
};

static sem_t own;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static void *poster(void *arg)
{
	(void)arg;
	sleep_ms(WAIT_MS / 2);
	sem_post(&own);
	return NULL;
}

__attribute__((noinline)) static void wait_shared_mutex(struct shared *sh)
{
	pthread_mutex_lock(&sh->mutex);
	pthread_mutex_unlock(&sh->mutex);
}

__attribute__((noinline)) static void wait_shared_sem(struct shared *sh)
{
	sem_wait(&sh->sem);
}

__attribute__((noinline)) static void wait_shared_cond(struct shared *sh)
{
	pthread_mutex_lock(&sh->mutex);
	while (!sh->flag)
		pthread_cond_wait(&sh->cond, &sh->mutex);
	pthread_mutex_unlock(&sh->mutex);
}

__attribute__((noinline)) static void wait_own_sem(void)
{
	sem_wait(&own);
}

int main(void)
{
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	if (sem_init(&sh->sem, 1, 0) != 0 || pthread_mutex_init(&sh->mutex, &ma) != 0 ||
	    pthread_cond_init(&sh->cond, &ca) != 0)
		return 1;
	pthread_mutex_lock(&sh->mutex);
	pid_t pid = fork();
	if (pid == 0) {
		wait_shared_mutex(sh);
		wait_shared_sem(sh);
		wait_shared_cond(sh);
		sem_init(&own, 0, 0);
		pthread_t th;
		pthread_create(&th, NULL, poster, NULL);
		wait_own_sem();
		pthread_join(th, NULL);
		printf("child waits done\n");
		fflush(stdout);
		_exit(0);
	}
	if (pid < 0)
		return 1;
	sleep_ms(WAIT_MS);
	pthread_mutex_unlock(&sh->mutex);
	sleep_ms(WAIT_MS);
	sem_post(&sh->sem);
	sleep_ms(WAIT_MS);
	pthread_mutex_lock(&sh->mutex);
	sh->flag = 1;
	pthread_cond_signal(&sh->cond);
	pthread_mutex_unlock(&sh->mutex);
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
