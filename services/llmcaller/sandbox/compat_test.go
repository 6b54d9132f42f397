package sandbox_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// newSDK starts a sandbox and returns openai-go's own client pointed at it.
func newSDK(t *testing.T, o sandbox.Options) (openai.Client, *sandbox.Server) {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	srv := sandbox.New(o)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return openai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("sandbox-key"), option.WithMaxRetries(0)), srv
}

const userText = "[MODE: DDR_CREATION]\n\n[INSTRUCTION]\nWrite the invoice DDR\nwith details"
const contextText = "[CONTEXT]\n\n=== CHUNK 1 ===\nId: ctx_1\nPath: a.go\nLines: 1-2\nLanguage: go\n```go\nId: not_a_chunk\n```\n\n=== CHUNK 2 ===\nId: ctx_2\nPath: b.go\nLines: 3-4\nLanguage: go\n```go\nx\n```"

func userMessage(texts ...string) responses.ResponseInputItemUnionParam {
	var parts responses.ResponseInputMessageContentListParam
	for _, s := range texts {
		parts = append(parts, responses.ResponseInputContentParamOfInputText(s))
	}
	return responses.ResponseInputItemParamOfMessage(parts, responses.EasyInputMessageRoleUser)
}

func params(items ...responses.ResponseInputItemUnionParam) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "sandbox-1", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}}
}

var ddrSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"title":    map[string]any{"type": "string", "minLength": 3},
		"priority": map[string]any{"type": "string", "enum": []any{"high", "low"}},
		"count":    map[string]any{"type": "integer", "minimum": 2},
		"tags":     map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 2},
		"owner":    map[string]any{"type": "object", "properties": map[string]any{"email": map[string]any{"type": "string", "format": "email"}}, "required": []any{"email"}, "additionalProperties": false},
		"optional": map[string]any{"type": "string"},
	},
	"required":             []any{"title", "priority", "count", "tags", "owner"},
	"additionalProperties": false,
}

func TestSDKDecodesNonStreaming(t *testing.T) {
	client, _ := newSDK(t, sandbox.Options{})
	ctx := context.Background()
	tests := []struct {
		name  string
		p     responses.ResponseNewParams
		check func(t *testing.T, r *responses.Response)
	}{
		{"text", params(userMessage(userText, contextText)), func(t *testing.T, r *responses.Response) {
			want := "Sandbox reply (mode DDR_CREATION) to: Write the invoice DDR. Context chunks: ctx_1, ctx_2."
			if r.OutputText() != want || r.Status != responses.ResponseStatusCompleted {
				t.Fatalf("got %q status %s, want %q completed", r.OutputText(), r.Status, want)
			}
			if !strings.HasPrefix(r.ID, "resp_") || !strings.HasPrefix(r.Output[0].ID, "msg_") {
				t.Fatalf("ids %q / %q", r.ID, r.Output[0].ID)
			}
			if r.Usage.InputTokens < 1 || r.Usage.OutputTokens != int64(len(want)+3)/4 || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
				t.Fatalf("usage %+v", r.Usage)
			}
		}},
		{"forced function call", func() responses.ResponseNewParams {
			p := params(userMessage(userText))
			p.Tools = []responses.ToolUnionParam{responses.ToolParamOfFunction("ddr_document", ddrSchema, true)}
			p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "ddr_document"}}
			return p
		}(), func(t *testing.T, r *responses.Response) {
			fc := r.Output[0].AsFunctionCall()
			if r.Output[0].Type != "function_call" || fc.Name != "ddr_document" || !strings.HasPrefix(fc.ID, "fc_") || !strings.HasPrefix(fc.CallID, "call_") {
				t.Fatalf("function call %+v", fc)
			}
			validate(t, ddrSchema, fc.Arguments)
		}},
		{"required tool choice", func() responses.ResponseNewParams {
			p := params(userMessage(userText))
			p.Tools = []responses.ToolUnionParam{responses.ToolParamOfFunction("ddr_document", ddrSchema, true)}
			p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}
			return p
		}(), func(t *testing.T, r *responses.Response) {
			if r.Output[0].AsFunctionCall().Name != "ddr_document" {
				t.Fatalf("output %+v", r.Output)
			}
		}},
		{"incomplete on max_output_tokens", func() responses.ResponseNewParams {
			p := params(userMessage(userText))
			p.MaxOutputTokens = openai.Int(5)
			return p
		}(), func(t *testing.T, r *responses.Response) {
			if r.Status != responses.ResponseStatusIncomplete || r.IncompleteDetails.Reason != "max_output_tokens" {
				t.Fatalf("status %s details %+v", r.Status, r.IncompleteDetails)
			}
			if len(r.OutputText()) != 20 || r.Usage.OutputTokens != 5 {
				t.Fatalf("text %q usage %+v", r.OutputText(), r.Usage)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := client.Responses.New(ctx, tt.p)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, r)
			got, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
			if err != nil || got.ID != r.ID || got.OutputText() != r.OutputText() {
				t.Fatalf("Get(%s) = %v, %v", r.ID, got, err)
			}
		})
	}
}

func TestSDKContinuationAndUnknownPrevious(t *testing.T) {
	client, _ := newSDK(t, sandbox.Options{})
	ctx := context.Background()
	first, err := client.Responses.New(ctx, params(userMessage(userText)))
	if err != nil {
		t.Fatal(err)
	}
	p := params(userMessage("[MODE: REVIEW]\n\n[INSTRUCTION]\nNow review it"))
	p.PreviousResponseID = openai.String(first.ID)
	second, err := client.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Sandbox reply (mode REVIEW) to: Now review it. Context chunks: none. Continuing from " + first.ID + "."; second.OutputText() != want {
		t.Fatalf("got %q want %q", second.OutputText(), want)
	}
	if second.PreviousResponseID != first.ID {
		t.Fatalf("previous_response_id echo %q", second.PreviousResponseID)
	}

	p.PreviousResponseID = openai.String("resp_unknown")
	_, err = client.Responses.New(ctx, p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want *openai.Error, got %v", err)
	}
	if apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "previous_response_not_found" || apiErr.Param != "previous_response_id" ||
		apiErr.Type != "invalid_request_error" || apiErr.Message != "Previous response with id 'resp_unknown' not found." {
		t.Fatalf("error %+v", apiErr)
	}
	if _, err := client.Responses.Get(ctx, "resp_nope", responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("Get unknown: %v", err)
	}
}

func TestSDKDecodesStreaming(t *testing.T) {
	client, _ := newSDK(t, sandbox.Options{})
	ctx := context.Background()
	tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("ddr_document", ddrSchema, true)}
	tests := []struct {
		name       string
		p          responses.ResponseNewParams
		wantEvents []string
		wantFinal  string
	}{
		{"text", params(userMessage(userText, contextText)), []string{
			"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"},
			"response.completed"},
		{"function call", func() responses.ResponseNewParams {
			p := params(userMessage(userText))
			p.Tools = tools
			p.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}
			return p
		}(), []string{"response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done", "response.completed"}, "response.completed"},
		{"incomplete", func() responses.ResponseNewParams {
			p := params(userMessage(userText))
			p.MaxOutputTokens = openai.Int(3)
			return p
		}(), nil, "response.incomplete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := client.Responses.NewStreaming(ctx, tt.p)
			defer stream.Close()
			var seen []string
			var text, args strings.Builder
			var final responses.Response
			lastSeq := int64(-1)
			for stream.Next() {
				ev := stream.Current()
				if ev.SequenceNumber <= lastSeq {
					t.Fatalf("sequence_number %d after %d", ev.SequenceNumber, lastSeq)
				}
				lastSeq = ev.SequenceNumber
				if len(seen) == 0 || seen[len(seen)-1] != ev.Type {
					seen = append(seen, ev.Type)
				}
				switch e := ev.AsAny().(type) {
				case responses.ResponseTextDeltaEvent:
					text.WriteString(e.Delta)
				case responses.ResponseFunctionCallArgumentsDeltaEvent:
					args.WriteString(e.Delta)
				case responses.ResponseFunctionCallArgumentsDoneEvent:
					if e.Arguments != args.String() {
						t.Fatalf("arguments done %q != deltas %q", e.Arguments, args.String())
					}
				case responses.ResponseCompletedEvent:
					final = e.Response
				case responses.ResponseIncompleteEvent:
					final = e.Response
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if tt.wantEvents != nil && strings.Join(seen, ",") != strings.Join(tt.wantEvents, ",") {
				t.Fatalf("events\n got %v\nwant %v", seen, tt.wantEvents)
			}
			if seen[len(seen)-1] != tt.wantFinal {
				t.Fatalf("final event %s, want %s", seen[len(seen)-1], tt.wantFinal)
			}
			if final.OutputText() != text.String() {
				t.Fatalf("final text %q != deltas %q", final.OutputText(), text.String())
			}
			if args.Len() > 0 {
				validate(t, ddrSchema, args.String())
				if final.Output[0].AsFunctionCall().Arguments != args.String() {
					t.Fatalf("final arguments differ from deltas")
				}
			}
			if tt.wantFinal == "response.incomplete" && final.IncompleteDetails.Reason != "max_output_tokens" {
				t.Fatalf("incomplete details %+v", final.IncompleteDetails)
			}
		})
	}
}

func TestSDKStreamErrorEvent(t *testing.T) {
	client, _ := newSDK(t, sandbox.Options{Faults: "stream-error"})
	stream := client.Responses.NewStreaming(context.Background(), params(userMessage(userText)))
	defer stream.Close()
	var got *responses.ResponseErrorEvent
	for stream.Next() {
		if e, ok := stream.Current().AsAny().(responses.ResponseErrorEvent); ok {
			got = &e
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// OpenAI's error event is an ordinary event (code/message at the top
	// level), which is why docs/request.md#the-wire-format says to check type == "error".
	if got == nil || got.Code != "server_error" || !strings.Contains(got.Message, "stream-error") {
		t.Fatalf("error event %+v", got)
	}
}
