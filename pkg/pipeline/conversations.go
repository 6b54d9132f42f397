package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// ConversationsBucket is the KV bucket of per-conversation state.
const ConversationsBucket = "aptix_conversations"

// Conversation is what the next turn's envelope needs from the last one: the
// response id to continue from and the tools the backend was last given.
// The mapper writes it; the envelope reads it.
type Conversation struct {
	ResponseId string          `json:"responseId"`
	TurnId     string          `json:"turnId"`
	Backend    string          `json:"backend,omitempty"`
	Tools      json.RawMessage `json:"tools,omitempty"`
	// Pending are function_call_output items of server-side tool calls the
	// last turn ran in a round that also called the client's functions
	// (contracts.ToolLoop.Pending): the next turn continuing ResponseId
	// sends them with the client's own outputs.
	Pending []json.RawMessage `json:"pending,omitempty"`
	// Approvals are the server-side calls the last turn left waiting for
	// the client's approval (contracts.ToolLoop.Approvals): the next turn
	// continuing ResponseId answers them with mcp_approval_response items.
	Approvals []contracts.PendingApproval `json:"approvals,omitempty"`
	UpdatedAt time.Time                   `json:"updatedAt"`
}

// Conversations stores Conversation records in JetStream KV, so every
// replica of the envelope sees what any mapper replica recorded.
type Conversations struct{ kv jetstream.KeyValue }

// OpenConversations creates the bucket if needed.
func OpenConversations(ctx context.Context, js jetstream.JetStream, replicas int) (*Conversations, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      ConversationsBucket,
		Description: "Aptix: latest response id and tools per conversation",
		History:     1,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("kv %s: %w", ConversationsBucket, err)
	}
	return &Conversations{kv: kv}, nil
}

// Get returns the record, or nil when the conversation has none yet.
func (c *Conversations) Get(ctx context.Context, conversationID string) (*Conversation, error) {
	e, err := c.kv.Get(ctx, conversationID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read conversation %s: %w", conversationID, err)
	}
	var rec Conversation
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("decode conversation %s: %w", conversationID, err)
	}
	return &rec, nil
}

// Put records the conversation's latest turn.
func (c *Conversations) Put(ctx context.Context, conversationID string, rec Conversation) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := c.kv.Put(ctx, conversationID, data); err != nil {
		return fmt.Errorf("record conversation %s: %w", conversationID, err)
	}
	return nil
}
