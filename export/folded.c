/*
 * folded.c - `rhea convert -f folded`: one "frame;frame;frame value" line
 * per call path (root first), the input of flamegraph.pl, inferno and
 * speedscope.
 *
 * The value (--weight) is the path's self wall time (ns, the default), self
 * CPU time (ns), allocations or allocated bytes, from the same per-stack
 * values as the pprof output (convert_trie_build): the lines add up to the
 * same totals.  Threads are merged (a thread's stacks start at its own
 * root, start_thread or main, anyway); --thread keeps some of them.
 * A ';' inside a function name would split the frame and becomes ':'.
 * Several recordings (a program and its children): every line starts with
 * the program's name as a frame of its own, so that the processes of one
 * program (the four cc1 of a build) merge and different programs stand
 * apart.
 */
#include "convert.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int folded_write(struct convert_ctx *c, FILE *out)
{
	struct convert_part one = {0, 1, 0, 0, NULL, NULL};
	return folded_write_part(c, out, &one);
}

/* The program's name as a frame: ';' and ' ' would split it. */
static void program_frame(const struct recording *r, char *buf, size_t len)
{
	recording_program(r, buf, len);
	for (char *c = buf; *c; c++)
		if (*c == ';' || *c == ' ')
			*c = ':';
}

int folded_write_part(struct convert_ctx *c, FILE *out, struct convert_part *part)
{
	char prog[256] = "";
	if (part->count > 1)
		program_frame(c->r, prog, sizeof(prog));
	part->index++;
	struct convert_trie tr;
	convert_trie_build(c, &tr, 0);
	uint32_t *path = malloc(4096 * sizeof(uint32_t));
	if (!path) {
		convert_trie_free(&tr);
		return -1;
	}
	int weight = c->o->weight;
	for (uint32_t id = 1; id < tr.n; id++) {
		uint64_t v = tr.val[id][weight];
		if (!v)
			continue;
		int n = 0;
		for (uint32_t k = id; k && n < 4096; k = tr.parent[k])
			path[n++] = tr.func[k];
		if (prog[0])
			fprintf(out, "%s;", prog);
		for (int i = n - 1; i >= 0; i--) {
			const char *name = convert_func_name(c, path[i]);
			for (const char *s = name; *s; s++)
				putc(*s == ';' ? ':' : *s, out);
			if (i)
				putc(';', out);
		}
		fprintf(out, " %" PRIu64 "\n", v);
	}
	free(path);
	convert_trie_free(&tr);
	return ferror(out) ? -1 : 0;
}
