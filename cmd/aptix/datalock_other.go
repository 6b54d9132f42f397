//go:build !unix

package main

import "errors"

var errDataDirInUse = errors.New("data dir in use")

// lockDataDir is a no-op where flock is not available: a second `aptix up`
// on the same --data dir is then not detected.
func lockDataDir(dir, what string) (func(), error) { return func() {}, nil }
