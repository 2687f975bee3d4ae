/* Unit tests of agent/sys.c: the agent's own syscall(), which must keep
 * syscall(2)'s contract (the result, or -1 with errno) for calls of none
 * to six arguments. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sys.h"

Test(sys, result_of_a_call_without_arguments)
{
	cr_expect_eq(rhea_syscall(SYS_getpid), (long)getpid());
	cr_expect_eq(rhea_syscall(SYS_gettid), (long)gettid());
}

Test(sys, failure_is_minus_one_with_errno)
{
	errno = 0;
	cr_expect_eq(rhea_syscall(SYS_close, -1), -1);
	cr_expect_eq(errno, EBADF);
	errno = 0;
	cr_expect_eq(rhea_syscall(SYS_openat, AT_FDCWD, "/nonexistent/rhea", O_RDONLY), -1);
	cr_expect_eq(errno, ENOENT);
}

Test(sys, three_and_six_arguments_arrive)
{
	int p[2];
	cr_assert_eq(rhea_syscall(SYS_pipe2, p, O_CLOEXEC), 0);
	cr_expect_eq(rhea_syscall(SYS_write, p[1], "rhea", 4), 4);
	char b[8] = "";
	cr_expect_eq(rhea_syscall(SYS_read, p[0], b, sizeof(b)), 4);
	cr_expect_eq(memcmp(b, "rhea", 4), 0);
	close(p[0]);
	close(p[1]);
	/* mmap's sixth argument, the offset: a page in, of a file of two */
	char path[] = "/tmp/rhea-test-sys.XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	unlink(path);
	long pg = sysconf(_SC_PAGESIZE);
	char page[65536];
	memset(page, 'a', (size_t)pg);
	cr_assert_eq(write(fd, page, (size_t)pg), pg);
	memset(page, 'b', (size_t)pg);
	cr_assert_eq(write(fd, page, (size_t)pg), pg);
	long m = rhea_syscall(SYS_mmap, 0, pg, PROT_READ, MAP_PRIVATE, fd, pg);
	cr_assert_neq(m, -1);
	cr_expect_eq(*(const char *)m, 'b');
	munmap((void *)m, (size_t)pg);
	close(fd);
}

Test(sys, read_own_copies_mapped_memory_and_fails_on_a_hole)
{
	long page = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(m, MAP_FAILED);
	memcpy(m + page - 2, "rhea", 4);
	char b[4];
	cr_expect_eq(rhea_read_own((uint64_t)(uintptr_t)(m + page - 2), b, 4), 0);
	cr_expect_eq(memcmp(b, "rhea", 4), 0);
	/* the second page gone: a read across the hole fails, no fault */
	cr_assert_eq(munmap(m + page, (size_t)page), 0);
	cr_expect_eq(rhea_read_own((uint64_t)(uintptr_t)(m + page - 2), b, 4), -1);
	cr_expect_eq(rhea_read_own(0, b, 4), -1);
	cr_expect_eq(rhea_read_own(~(uint64_t)0 - 1, b, 4), -1);
	munmap(m, (size_t)page);
}

/* The agent's descriptors live at half the soft limit (at most 1000): the
 * low numbers a program counts on stay free, and a file the agent opens
 * never keeps one (rhea_open_high). */
Test(sys, descriptors_go_high_and_leave_the_low_numbers_free)
{
	struct rlimit rl, old;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl = (struct rlimit){64, old.rlim_max};
	int fd = rhea_open_high("/dev/null", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, old.rlim_cur / 2 < 1000 ? (int)(old.rlim_cur / 2) : 1000);
	cr_expect_eq(fcntl(fd, F_GETFD), FD_CLOEXEC);
	int low = open("/dev/null", O_RDONLY);
	cr_expect_lt(low, 10, "the number the open freed is free again: %d", low);
	close(low);
	close(fd);
	errno = 0;
	cr_expect_eq(rhea_open_high("/nonexistent/rhea", O_RDONLY), -1);
	cr_expect_eq(errno, ENOENT);
	/* under a soft limit of 64: at 32 */
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	fd = rhea_fd_high(open("/dev/null", O_RDONLY));
	cr_expect_eq(fd, 32);
	close(fd);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
}
