package request

import "github.com/aptix-dev/aptix/pkg/contracts/responsesbody"

// CodeInvalidRequest is the error code a turn the builder cannot build
// carries to the client (AgentExecuteResponse.ErrorCode); the tool errors'
// codes are tooldef's.
const CodeInvalidRequest = responsesbody.CodeInvalidRequest

// InvalidRequestError: a field the builder needs is missing or unusable.
type InvalidRequestError = responsesbody.InvalidRequestError
