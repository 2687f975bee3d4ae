/* hookfn.c - names and classes of hooked functions (see hookfn.h). */
#include "hookfn.h"

#include <string.h>

static const struct {
	const char *name;
	enum rhea_class cls;
	int blocking;
} fns[] = {
#define RHEA_FN_ROW(id, name, cls, blk) {name, cls, blk},
	RHEA_FN_LIST(RHEA_FN_ROW)
#undef RHEA_FN_ROW
};

static const char *const classes[RHEA_C_COUNT] = {
	"none", "alloc", "lock", "io", "net", "wait", "mmap", "time", "sampler",
};

const char *rhea_fn_name(unsigned fn)
{
	return fn < RHEA_FN_COUNT ? fns[fn].name : NULL;
}

enum rhea_class rhea_fn_class(unsigned fn)
{
	return fn < RHEA_FN_COUNT ? fns[fn].cls : RHEA_C_NONE;
}

int rhea_fn_blocking(unsigned fn)
{
	return fn < RHEA_FN_COUNT ? fns[fn].blocking : 0;
}

int rhea_fn_is_loop(unsigned fn)
{
	switch (fn) {
	case RHEA_FN_POLL:
	case RHEA_FN_PPOLL:
	case RHEA_FN_SELECT:
	case RHEA_FN_PSELECT:
	case RHEA_FN_EPOLL_WAIT:
	case RHEA_FN_EPOLL_PWAIT:
	case RHEA_FN_EPOLL_PWAIT2:
		return 1;
	}
	return 0;
}

const char *rhea_class_name(enum rhea_class c)
{
	return (unsigned)c < RHEA_C_COUNT ? classes[c] : "?";
}

int rhea_class_parse(const char *name)
{
	for (int i = 0; i < RHEA_C_COUNT; i++)
		if (strcmp(classes[i], name) == 0)
			return i;
	return -1;
}
