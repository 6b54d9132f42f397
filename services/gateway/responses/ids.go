package responses

import (
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// Every id a client sends (a response id in a path, previous_response_id,
// conversation) ends up in a NATS subject or a KV key. NATS closes a
// connection that sends a protocol line longer than its limit (4 KiB by
// default), and a wildcard or a dot would change which messages a subject
// names, so such ids are refused here, before anything is looked up:
// 1 to contracts.MaxIDLen bytes of [A-Za-z0-9_-] (docs/security.md).

// CodeStringTooLong is OpenAI's code for a string over its maximum length.
const CodeStringTooLong = "string_above_max_length"

// CheckID refuses an id a client sent in the body parameter param (400,
// in OpenAI's words) unless it is a subject token; an empty id is the
// caller's to judge (an absent parameter).
func CheckID(param, id string) *Error {
	switch {
	case id == "" || contracts.IsToken(id):
		return nil
	case len(id) > contracts.MaxIDLen:
		return invalid(param, CodeStringTooLong,
			"Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.",
			param, contracts.MaxIDLen, len(id))
	}
	return invalid(param, CodeInvalidValue,
		"Invalid '%s': '%s'. Expected an ID that contains letters, numbers, underscores, or dashes, but this value contained additional characters.",
		param, Clip(id))
}

// ValidPathID reports whether id, a response id from a URL path, can name a
// response at all; one that cannot is answered 404 (it exists nowhere)
// without a lookup.
func ValidPathID(id string) bool { return contracts.IsToken(id) }

// NotFoundPath is NotFound for a path id, which the message quotes clipped.
func NotFoundPath(id string) *Error { return NotFound(Clip(id)) }

// Clip shortens an id quoted back to a client to 64 bytes and an ellipsis,
// on a rune boundary.
func Clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…(%d bytes)", len(s))
}

// UnsupportedContentType is OpenAI's answer to a body that is not sent as
// JSON (400 unsupported_content_type): the body is not read.
func UnsupportedContentType(ct string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: ptr(CodeUnsupportedContentType),
		Message: fmt.Sprintf("Unsupported content type: '%s'. This API method only accepts 'application/json' requests, but you specified the header 'Content-Type: %s'. Please try again with a supported content type.", Clip(ct), Clip(ct))}
}

// CodeUnsupportedContentType refuses a body whose Content-Type is not JSON.
const CodeUnsupportedContentType = "unsupported_content_type"
