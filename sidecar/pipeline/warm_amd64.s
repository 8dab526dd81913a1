#include "textflag.h"

// func warmPages(p *byte, n uintptr)
//
// PREFETCHT0 of the first line of every 4 KiB from p up to p+n (n > 0).
// A prefetch never faults, and every address is inside [p, p+n).
TEXT ·warmPages(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ADDQ SI, CX
loop:
	PREFETCHT0 (SI)
	ADDQ $4096, SI
	CMPQ SI, CX
	JB   loop
	RET
