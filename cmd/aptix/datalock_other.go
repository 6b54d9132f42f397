//go:build !unix

package main

import (
	"errors"
	"os"
	"path/filepath"
)

var errDataDirInUse = errors.New("data dir in use")

// lockDataDir is a no-op where flock is not available: a second `aptix up`
// on the same --data dir is then not detected.
func lockDataDir(dir, what string) (func(), error) { return func() {}, nil }

// dataDirHeld cannot tell without flock: the running-URL file is trusted
// while it exists.
func dataDirHeld(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, runningFile))
	return err == nil
}
