//go:build !purego

package termindex

// dot8Blocks is the dot product of a[:n] and b[:n], n a multiple of 16,
// in SSE2 (every amd64 has it): bytes widened to 16 bits with their sign,
// multiplied and summed in pairs (PMADDWD) into four 32-bit sums.
//
//go:noescape
func dot8Blocks(a, b *int8, n int) int32
