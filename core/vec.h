/*
 * vec.h - growing arrays, and sorting them, for the CLI side only (the
 * agent never calls malloc where a thread may be interrupted).
 */
#ifndef RHEA_VEC_H
#define RHEA_VEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Make *p (of *cap elements of elem bytes) hold at least need: doubles
 * from 16.  0, or -1 when realloc fails (*p and *cap are then as they
 * were). */
static inline int vec_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap * 2 : 16;
	while (n < need)
		n *= 2;
	void *q = realloc(*p, n * elem);
	if (!q)
		return -1;
	*p = q;
	*cap = n;
	return 0;
}

/* qsort, but for none or one element: base may then be NULL (an array
 * vec_grow never grew), which qsort must not be given. */
static inline void vec_sort(void *base, size_t n, size_t elem, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, elem, cmp);
}

/* qsort's comparator for an array of uint64_t, ascending. */
static inline int vec_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

#endif
