//go:build !purego

#include "textflag.h"

// func dot8Blocks(a, b *int8, n int) int32
TEXT ·dot8Blocks(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	PXOR X0, X0

loop:
	CMPQ CX, $16
	JLT  done
	MOVOU (SI), X1
	MOVOU (DI), X2

	// Each byte to a 16-bit word with its sign: interleaved with itself,
	// then shifted right arithmetically by 8.
	MOVOU     X1, X3
	PUNPCKLBW X1, X3
	PSRAW     $8, X3
	PUNPCKHBW X1, X1
	PSRAW     $8, X1
	MOVOU     X2, X4
	PUNPCKLBW X2, X4
	PSRAW     $8, X4
	PUNPCKHBW X2, X2
	PSRAW     $8, X2

	PMADDWL X4, X3
	PMADDWL X2, X1
	PADDL   X3, X0
	PADDL   X1, X0

	ADDQ $16, SI
	ADDQ $16, DI
	SUBQ $16, CX
	JMP  loop

done:
	PSHUFD $0x4e, X0, X1
	PADDL  X1, X0
	PSHUFD $0xb1, X0, X1
	PADDL  X1, X0
	MOVQ   X0, AX
	MOVL   AX, ret+24(FP)
	RET
