/*
 * dllib.h - a library taken with dlopen when first needed, its functions
 * in a typed table.
 *
 *   #define ZS_FUNCS(X) X(ZSTD_compressCCtx) X(ZSTD_isError)
 *   DL_LIBRARY(zs, "libzstd.so.1", ZS_FUNCS)
 *
 * defines the table zs (zs.p_ZSTD_isError, ... typed as the functions the
 * library's header declares) and zs_load(): 1 once every one is at hand,
 * 0 if the library or one of them is missing.  Tried once; a forked child
 * inherits the answer (no dlopen after a fork).  Callers are serialized.
 * The agent's optional libraries: libdw (agent/cfi.c), libzstd
 * (core/rfile.c).
 */
#ifndef RHEA_DLLIB_H
#define RHEA_DLLIB_H

#include <dlfcn.h>

#define DL_MEMBER_(f) __typeof__(f) *p_##f;
#define DL_TAKE_(f)                                                           \
	if (ok && (t_->p_##f = (__typeof__(f) *)dlsym(h_, #f)) == NULL) \
		ok = 0;
#define DL_LIBRARY(name, soname, FUNCS)                                   \
	static struct {                                                   \
		FUNCS(DL_MEMBER_)                                         \
		int state; /* 0 not tried yet, 1 loaded, -1 cannot be */  \
	} name;                                                           \
	static int name##_load(void)                                      \
	{                                                                 \
		if (name.state == 0) {                                    \
			void *h_ = dlopen(soname, RTLD_NOW | RTLD_LOCAL); \
			__typeof__(name) *t_ = &name;                     \
			int ok = h_ != NULL;                              \
			FUNCS(DL_TAKE_)                                   \
			name.state = ok ? 1 : -1;                         \
		}                                                         \
		return name.state > 0;                                    \
	}

#endif
