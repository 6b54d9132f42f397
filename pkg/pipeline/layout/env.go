package layout

import (
	"os"
	"strconv"
)

// Env names of the stream limits every Aptix process reads
// (docs/operations.md#streams-and-limits).
const (
	EnvReplicas        = "APTIX_STREAM_REPLICAS"
	EnvQueueMaxBytes   = "APTIX_QUEUE_MAX_BYTES"
	EnvWorkMaxBytes    = "APTIX_WORK_MAX_BYTES"
	EnvHistoryMaxBytes = "APTIX_HISTORY_MAX_BYTES"
	EnvHistoryMaxAge   = "APTIX_HISTORY_MAX_AGE"
	EnvCompletionGrace = "APTIX_COMPLETION_GRACE"
	EnvAdmitTimeout    = "APTIX_ADMIT_TIMEOUT"
	// EnvDedupWindow is the streams' Nats-Msg-Id de-duplication window
	// (StreamConfig.Duplicates; default 10m).
	EnvDedupWindow = "APTIX_DEDUP_WINDOW"
	// EnvMaxEventBytes caps one stored event, claimed or not (default
	// pipeline.DefaultMaxEventBytes).
	EnvMaxEventBytes = "APTIX_MAX_EVENT_BYTES"
)

// ReplicasFromEnv is APTIX_STREAM_REPLICAS (0 when unset): what a stage
// binary creates or updates its buckets with, as the streams are, so a
// bucket provisioned with three replicas is never scaled down to one.
func ReplicasFromEnv() int { return IntFromEnv(EnvReplicas) }

// IntFromEnv is an integer setting, 0 when unset or not a number: every
// Aptix setting treats 0 as "the default".
func IntFromEnv(key string) int {
	n, _ := strconv.Atoi(os.Getenv(key))
	return n
}
