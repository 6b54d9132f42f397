package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// envCPUProfile names the file `aptix up` writes a CPU profile of its whole
// run to (stopped at shutdown): the way to see where a running stack's CPU
// goes under an external load (aptix-load), which `aptix bench
// --cpuprofile` cannot show because it runs its own client in-process.
const envCPUProfile = "APTIX_CPUPROFILE"

// startCPUProfile starts the profile APTIX_CPUPROFILE asks for; the returned
// func stops it and closes the file. Without the variable it does nothing.
func startCPUProfile() (stop func(), err error) {
	path := os.Getenv(envCPUProfile)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envCPUProfile, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", envCPUProfile, err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}
