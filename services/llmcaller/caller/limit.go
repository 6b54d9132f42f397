package caller

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// CodeResponseTooLarge is the error type and code of a call whose backend
// answered more than its profile's MaxResponseBytes.
const CodeResponseTooLarge = "response_too_large"

// maxErrorBody bounds an error body kept from a backend: its message is all
// that is read from it, and a cap-sized error would be held like an answer.
const maxErrorBody = 1 << 20

// TooLargeError is the read error of an answer that crossed the cap.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the backend's answer is larger than the profile's maxResponseBytes (%d bytes)", e.Limit)
}

// limitTransport caps every upstream body at the point it enters the
// process, under openai-go and under the Chat Completions translation, so
// no reader above it (the JSON body, the SSE decoder, the translator) ever
// holds more than limit bytes of one answer: a 2xx body fails with a
// *TooLargeError once limit bytes are read and one more byte comes (or at
// once when its Content-Length says so); an error body is cut at
// min(limit, maxErrorBody) without an error, since only its message is read.
type limitTransport struct {
	base  http.RoundTripper
	limit int64
}

func (l limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := l.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil || resp.Body == nil || l.limit <= 0 {
		return resp, err
	}
	if resp.StatusCode >= 400 {
		resp.Body = readCloser{io.LimitReader(resp.Body, min(l.limit, maxErrorBody)), resp.Body}
		return resp, nil
	}
	if resp.ContentLength > l.limit {
		_ = resp.Body.Close()
		return nil, &TooLargeError{Limit: l.limit}
	}
	resp.Body = &cappedBody{rc: resp.Body, left: l.limit, limit: l.limit}
	return resp, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// cappedBody reads at most limit bytes, then fails with *TooLargeError if
// the body has more.
type cappedBody struct {
	rc          io.ReadCloser
	left, limit int64
	over        bool
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.over {
		return 0, &TooLargeError{Limit: b.limit}
	}
	if b.left <= 0 {
		// At the cap: one more byte tells a body that ends here from one
		// that goes on, without reading on.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			b.over = true
			return 0, &TooLargeError{Limit: b.limit}
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// tooLarge reports whether err is a read that crossed the cap, and the
// failure it is: final (the answer was paid for; a retry would pay again
// for an answer as large), with nothing of the body kept.
func tooLarge(err error) (*contracts.UpstreamError, bool) {
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		return nil, false
	}
	return &contracts.UpstreamError{Type: CodeResponseTooLarge, Code: CodeResponseTooLarge,
		Message: tl.Error() + ": the answer was cut off there and not kept; raise maxResponseBytes for this backend if such answers are expected"}, true
}
