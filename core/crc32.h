/*
 * crc32.h - CRC-32 (ISO-HDLC, zlib's crc32) for the agent.
 *
 * The CLI checks chunks with zlib's crc32.  The agent computes the same
 * CRC with this table instead: it is loaded into processes that may not
 * have zlib at all (rhea attach into a container built from a minimal
 * image: glibc and the program), and a library the agent needs that the
 * process lacks makes its dlopen fail.  Its chunks are small (a flush's
 * worth, some kilobytes), so a byte at a time is fast enough.
 * crc32_fill must run once before crc32_of (not in a signal handler);
 * crc32_of itself is a pure function, async-signal-safe.
 * tests/unit/test_rfile.c checks it against zlib's.
 */
#ifndef RHEA_CRC32_H
#define RHEA_CRC32_H

#include <stddef.h>
#include <stdint.h>

extern uint32_t rhea_crc32_table[256];

static inline void crc32_fill(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		rhea_crc32_table[i] = c;
	}
}

/* As zlib's crc32(crc, p, n): 0 starts a CRC, a CRC continues. */
static inline uint32_t crc32_of(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	crc = ~crc;
	while (n--)
		crc = rhea_crc32_table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#endif
