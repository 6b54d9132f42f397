package loadgen

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on every
// Linux architecture Go runs on (sysconf would need cgo). The 10 ms
// resolution is why a run should take seconds of server CPU, not
// milliseconds.
const clockTick = 10 * time.Millisecond

// ProcessCPU is the CPU time pid has used so far, user plus system, over
// all its threads (the children it waited for not included).
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu of pid %d: %w", pid, err)
	}
	return parseStat(string(b))
}

// SelfCPU is this process's CPU time so far: the client's own cost.
func SelfCPU() (time.Duration, error) { return ProcessCPU(os.Getpid()) }

// parseStat reads utime and stime (fields 14 and 15) from a stat line. The
// command name, field 2, is in parentheses and may hold spaces and
// parentheses itself, so the fields are counted after its last ')'.
func parseStat(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat line %.40q: no command name", line)
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("stat line %.40q: %d fields after the name", line, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat line: cpu field %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}
