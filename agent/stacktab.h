/*
 * stacktab.h - the agent's call-stack table: (parent, address) nodes
 * interned once, a stack is the id of its leaf node.  Lock-free, usable from
 * hooks and signal handlers on any thread.
 */
#ifndef RHEA_STACKTAB_H
#define RHEA_STACKTAB_H

#include <stdint.h>

struct stacktab_node {
	uint64_t addr;
	uint32_t parent;
	uint32_t ready; /* set (release) once addr/parent are written */
};

struct stacktab {
	struct stacktab_node *nodes; /* nodes[0] unused: id 0 = no stack */
	uint32_t *slots;             /* open addressing: node ids, 0 = empty */
	uint32_t *hv;                /* per node: what its children hash from */
	uint64_t *touched;           /* atomic bits: pages of slots written to */
	uint32_t max_nodes;          /* capacity of nodes, ids < max_nodes */
	uint32_t nslots;             /* power of two, >= 2 * max_nodes */
	uint32_t next_id;            /* atomic: next id to hand out */
	uint32_t written;            /* writer thread: ids below are in the file */
	int nodes_owned;             /* nodes is stacktab_init's mapping */
	uint64_t full;               /* atomic: interning failures (table full) */
};

/* Map memory for a table of max_nodes nodes (lazily touched). 0 or -errno. */
int stacktab_init(struct stacktab *t, uint32_t max_nodes);
/* The same with the nodes in memory the caller provides (zeroed, max_nodes
 * nodes: the salvage region, core/salvage.h). */
int stacktab_init_at(struct stacktab *t, void *nodes, uint32_t max_nodes);
void stacktab_destroy(struct stacktab *t);

/*
 * Intern a stack given root-first: addrs[0] is the outermost frame.  Starts
 * below node `parent` (0 for the root), so that a caller holding the ids of
 * a common prefix interns only the differing tail.  ids[i] receives the node
 * of addrs[i].  Returns the leaf id, or 0 when the table is full.
 */
uint32_t stacktab_intern(struct stacktab *t, uint32_t parent,
			 const uint64_t *addrs, int n, uint32_t *ids);

/* Lookup only: the id of (parent, addr) or 0. */
uint32_t stacktab_find(const struct stacktab *t, uint32_t parent, uint64_t addr);

/*
 * For the writer: the number of ids handed out whose nodes are all ready,
 * counting from `from` (stops at the first node still being written).
 */
uint32_t stacktab_ready_upto(const struct stacktab *t, uint32_t from);

/* After fork: nodes left half-written by threads that no longer exist are
 * made ready (they were never published, so nothing refers to them). */
void stacktab_after_fork(struct stacktab *t);

#endif
