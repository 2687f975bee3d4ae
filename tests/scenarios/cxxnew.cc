/*
 * cxxnew.cc - a C++ library that a C program loads with dlopen
 * (dlopencxx.c): the program itself has no libstdc++, so libstdc++ arrives
 * only with this library, after the agent started.
 *
 * cxx_make(n) makes exactly n x new Obj (40 bytes), n x new int[10] (40
 * bytes) and n x new (std::nothrow) char[24], deleting each at once.
 */
#include <new>

struct Obj {
	long v[5];
};

static volatile long sink;
/* Each block escapes through here, so that no compiler may elide a new
 * and its delete (clang does that to unobservable pairs). */
static void *volatile escape;

extern "C" __attribute__((noinline)) long cxx_make(int n)
{
	for (int i = 0; i < n; i++) {
		Obj *o = new Obj();
		escape = o;
		o->v[0] = i;
		sink += o->v[0];
		delete o;
		int *a = new int[10];
		escape = a;
		a[3] = i;
		sink += a[3];
		delete[] a;
		char *c = new (std::nothrow) char[24];
		escape = c;
		if (c) {
			c[1] = (char)i;
			sink += c[1];
		}
		delete[] c;
	}
	return sink;
}
