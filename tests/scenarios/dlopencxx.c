/*
 * dlopencxx.c - a C program that loads a C++ library late (issue: a JVM
 * died under rhea, its launcher being C and libjvm C++).
 *
 *   dlopencxx LIB [global|local] [N]
 *
 * dlopens LIB (tests/scenarios/cxxnew.cc, built by run.sh) with
 * RTLD_GLOBAL or RTLD_LOCAL (default), then calls cxx_make(N) (default
 * 3000): exactly N x 40 B by operator new, N x 40 B by operator new[] and
 * N x 24 B by the nothrow operator new[], all made in cxx_make.  The
 * program's own allocations (stdio's buffer) are its business.  Prints
 * "dlopencxx done".
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: dlopencxx LIB [global|local] [N]\n");
		return 2;
	}
	int mode = RTLD_NOW | (argc > 2 && strcmp(argv[2], "global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL);
	int n = argc > 3 ? atoi(argv[3]) : 3000;
	void *h = dlopen(argv[1], mode);
	if (!h) {
		fprintf(stderr, "dlopencxx: %s\n", dlerror());
		return 1;
	}
	long (*make)(int) = (long (*)(int))dlsym(h, "cxx_make");
	if (!make) {
		fprintf(stderr, "dlopencxx: no cxx_make in %s\n", argv[1]);
		return 1;
	}
	make(n);
	printf("dlopencxx done\n");
	return 0;
}
