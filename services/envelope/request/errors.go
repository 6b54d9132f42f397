package request

import (
	"fmt"
	"strings"
)

// Error codes a rejected turn carries to the client (AgentExecuteResponse.ErrorCode).
const (
	CodeInvalidTools      = "invalid_tools"
	CodeUnknownToolChoice = "unknown_tool_choice"
	CodeInvalidRequest    = "invalid_request"
)

// InvalidToolsError: ToolsJson (or the context's default tools) is not a
// JSON array of valid tool definitions.
type InvalidToolsError struct {
	Field string
	// Index of the bad tool, or -1 when the array itself is bad.
	Index int
	Err   error
}

func (e *InvalidToolsError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("%s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("%s[%d]: %v", e.Field, e.Index, e.Err)
}
func (e *InvalidToolsError) Unwrap() error { return e.Err }

// Code is the error code for the client.
func (e *InvalidToolsError) Code() string { return CodeInvalidTools }

// UnknownToolChoiceError: ToolChoiceName names no tool of the turn.
type UnknownToolChoiceError struct {
	Name  string
	Known []string
}

func (e *UnknownToolChoiceError) Error() string {
	known := "none"
	if len(e.Known) > 0 {
		known = strings.Join(e.Known, ", ")
	}
	return fmt.Sprintf("toolChoiceName %q names no function tool of this turn (tools: %s; or use auto, none, required)", e.Name, known)
}

// Code is the error code for the client.
func (e *UnknownToolChoiceError) Code() string { return CodeUnknownToolChoice }

// InvalidRequestError: a field the builder needs is missing or unusable.
type InvalidRequestError struct {
	Field  string
	Reason string
}

func (e *InvalidRequestError) Error() string { return e.Field + " " + e.Reason }

// Code is the error code for the client.
func (e *InvalidRequestError) Code() string { return CodeInvalidRequest }
