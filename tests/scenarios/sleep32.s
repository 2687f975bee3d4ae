# sleep32 - a 32-bit x86 program (no libc) that sleeps 3 s in 100 ms steps
# and exits 0: rhea attach must refuse it, and leave it alone (tests/e2e,
# attach-32bit).  Built by the test: as --32, ld -m elf_i386.
	.globl _start
	.text
_start:
	mov $30, %esi          # 30 x 100 ms
1:	mov $162, %eax         # nanosleep(&ts, NULL)
	lea ts, %ebx
	xor %ecx, %ecx
	int $0x80
	dec %esi
	jnz 1b
	mov $1, %eax           # exit(0)
	xor %ebx, %ebx
	int $0x80
	.data
ts:	.long 0, 100000000
