package request

// CodeInvalidRequest is the error code a turn the builder cannot build
// carries to the client (AgentExecuteResponse.ErrorCode); the tool errors'
// codes are tooldef's.
const CodeInvalidRequest = "invalid_request"

// InvalidRequestError: a field the builder needs is missing or unusable.
type InvalidRequestError struct {
	Field  string
	Reason string
}

func (e *InvalidRequestError) Error() string { return e.Field + " " + e.Reason }

// Code is the error code for the client.
func (e *InvalidRequestError) Code() string { return CodeInvalidRequest }
