//go:build !amd64 || purego

package termindex

import "unsafe"

// dot8Blocks is dot8Go where there is no assembly for it.
func dot8Blocks(a, b *int8, n int) int32 {
	return dot8Go(unsafe.Slice(a, n), unsafe.Slice(b, n))
}
