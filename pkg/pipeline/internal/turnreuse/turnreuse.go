// Package turnreuse finds the request a turn id was first accepted with, for
// the client and the retriever's stage to tell a retry from a turn id reused
// with another request.
package turnreuse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/claim"
	"github.com/aptix-dev/aptix/pkg/pipeline/internal/turncodec"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
)

// RecordedRequest returns the request a turn id was first accepted with:
// the request section of the event it entered APTIX with, its retrieved
// event or, for a turn that skipped the envelope too, its enveloped one
// (layout.Entries); nil when there is none, or it was trimmed from history.
func RecordedRequest(ctx context.Context, js jetstream.JetStream, conv, turnID string) (*contracts.AgentExecuteRequest, error) {
	s, err := js.Stream(ctx, contracts.StreamName)
	if err != nil {
		return nil, err
	}
	return RecordedRequestIn(ctx, js, s, conv, turnID)
}

// RecordedRequestIn is RecordedRequest on a stream handle the caller keeps:
// the retriever looks every turn up, and fetching the handle each time cost
// a STREAM.INFO round trip (and the server's JSON for it) per turn.
func RecordedRequestIn(ctx context.Context, js jetstream.JetStream, s jetstream.Stream, conv, turnID string) (*contracts.AgentExecuteRequest, error) {
	var m *jetstream.RawStreamMsg
	for _, entry := range layout.Entries()[1:] {
		var err error
		m, err = s.GetLastMsgForSubject(ctx, contracts.Subject(entry, conv, turnID))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("look up turn %s: %w", turnID, err)
		}
		break
	}
	if m == nil {
		return nil, nil
	}
	data, err := claim.EventData(ctx, js, m.Header, m.Data)
	if err != nil {
		return nil, err
	}
	var t contracts.Turn
	if err := turncodec.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("decode turn %s: %w", turnID, err)
	}
	return &t.Request, nil
}

// SameRequest compares two requests as they encode.
func SameRequest(a, b contracts.AgentExecuteRequest) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
