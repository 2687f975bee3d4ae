/* fixture_nodes.h - the call-stack table the model and stall unit tests
 * share: 1=A(0x100) 2=B(0x200, parent A) 3=C(0x300, parent B)
 * 4=E(0x400, parent A); unresolved names are "?+0x<addr>". */
#ifndef RHEA_FIXTURE_NODES_H
#define RHEA_FIXTURE_NODES_H

#include <stdlib.h>

#include "recording.h"

static inline void fixture_nodes(struct recording *rec)
{
	rec->nnodes = 8;
	rec->nodes = calloc(8, sizeof(struct rhea_node));
	rec->nodes_known = calloc(8, 1);
	static const uint64_t addr[] = {0, 0x100, 0x200, 0x300, 0x400};
	static const uint32_t parent[] = {0, 0, 1, 2, 1};
	for (int i = 1; i <= 4; i++) {
		rec->nodes[i].addr = addr[i];
		rec->nodes[i].parent = parent[i];
		rec->nodes_known[i] = 1;
	}
}

#endif
