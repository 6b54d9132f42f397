package contracts

import "strings"

// HeaderHop is sent on every call an LLM caller makes to a backend, with
// its deployment's mark (pipeline.DeploymentMark). A gateway that receives
// its own mark is being called by its own pipeline (a backend profile whose
// base URL is the gateway itself) and refuses at once with
// CodeLoopDetected, instead of every turn calling itself until a timeout
// (docs/backends.md).
const HeaderHop = "Aptix-Hop"

// CodeLoopDetected is the error code (HTTP 508) of a call refused for
// carrying the gateway's own HeaderHop mark.
const CodeLoopDetected = "loop_detected"

// HasMark reports whether a HeaderHop value (marks separated by commas, as
// more than one hop may have added theirs) holds mark.
func HasMark(header, mark string) bool {
	if mark == "" {
		return false
	}
	for v := range strings.SplitSeq(header, ",") {
		if strings.TrimSpace(v) == mark {
			return true
		}
	}
	return false
}
