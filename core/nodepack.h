/*
 * nodepack.h - the call-stack table's nodes, coded small (RHEA_E_NODES2,
 * what rhea record's compaction writes; doc/format.md).
 */
#ifndef RHEA_NODEPACK_H
#define RHEA_NODEPACK_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* The most bytes an entry of count nodes can take. */
static inline size_t nodepack_bound(uint32_t count)
{
	/* a parent (5 bytes), an index (5) and perhaps a new address (10)
	 * per node, the header, padding */
	return sizeof(struct rhea_nodes2) + (size_t)count * 20 + 8;
}

/* Nodes first_id .. first_id + count - 1 (n[0..count-1]) as a
 * RHEA_E_NODES2 entry into out (cap bytes, nodepack_bound(count) is
 * always enough), in the work memory w: map_size (a power of 2) at least
 * 2 * count keys and values, count indices.  Returns the entry's size (a
 * multiple of 8), 0 when it does not fit or w is too small.  No
 * allocation, no locks: the agent's writer codes its nodes with it. */
struct nodepack_work {
	uint64_t *keys;
	uint32_t *vals;
	uint32_t *index;
	uint32_t map_size;
};
size_t nodepack_encode_in(uint32_t first_id, const struct rhea_node *n, uint32_t count, void *out, size_t cap,
			  struct nodepack_work *w);

#ifndef RHEA_AGENT
/* The same in memory of its own: 0 also when memory runs out. */
size_t nodepack_encode(uint32_t first_id, const struct rhea_node *n, uint32_t count, void *out, size_t cap);

/* Decode a RHEA_E_NODES2 entry that rfile_entry_check() accepted into
 * out[0 .. count-1] (count from its header).  0, or -1 when it is
 * malformed or memory ran out. */
int nodepack_decode(const struct rhea_entry *e, struct rhea_node *out);
#endif

#endif
