package contracts

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func validRequest() AgentExecuteRequest {
	return AgentExecuteRequest{ConversationId: "conv-1", TurnId: "01JTURN", Instruction: "Create a DDR"}
}

func TestValidateFieldErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*AgentExecuteRequest)
		fields []string
	}{
		{"valid", func(*AgentExecuteRequest) {}, nil},
		{"empty instruction", func(r *AgentExecuteRequest) { r.Instruction = " \n\t" }, []string{"instruction"}},
		{"missing ids", func(r *AgentExecuteRequest) { r.ConversationId, r.TurnId = "", "" }, []string{"conversationId", "turnId"}},
		{"id with dot", func(r *AgentExecuteRequest) { r.ConversationId = "a.b" }, []string{"conversationId"}},
		{"id with wildcard", func(r *AgentExecuteRequest) { r.TurnId = "*" }, []string{"turnId"}},
		{"id too long", func(r *AgentExecuteRequest) { r.TurnId = strings.Repeat("a", 129) }, []string{"turnId"}},
		{"id at limit", func(r *AgentExecuteRequest) { r.TurnId = strings.Repeat("a", 128) }, nil},
		{"oversize instruction", func(r *AgentExecuteRequest) { r.Instruction = strings.Repeat("x", MaxInstructionBytes+1) }, []string{"instruction"}},
		{"invalid utf8", func(r *AgentExecuteRequest) { r.Instruction = "ok\xff" }, []string{"instruction"}},
		{"bad scope", func(r *AgentExecuteRequest) { r.RagScope = "galaxy" }, []string{"ragScope"}},
		{"empty tag", func(r *AgentExecuteRequest) { r.Tags = []string{"ok", ""} }, []string{"tags[1]"}},
		{"continuation with space", func(r *AgentExecuteRequest) { r.ResponseContinuationId = "resp 1" }, []string{"responseContinuationId"}},
		{"negative max tokens", func(r *AgentExecuteRequest) { r.MaxOutputTokens = -1 }, []string{"maxOutputTokens"}},
		{"bad agent context id", func(r *AgentExecuteRequest) { r.AgentContext = &AgentContext{Id: "a b"} }, []string{"agentContext.id"}},
		{"oversize system prompt", func(r *AgentExecuteRequest) {
			r.ConversationContext = &ConversationContext{SystemPrompt: strings.Repeat("s", MaxSystemPromptBytes+1)}
		}, []string{"conversationContext.systemPrompt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest()
			tc.mutate(&r)
			err := r.Validate()
			if tc.fields == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want *ValidationError, got %v", err)
			}
			var got []string
			for _, f := range ve.Fields {
				got = append(got, f.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Fatalf("fields = %v, want %v (%v)", got, tc.fields, err)
			}
		})
	}
}

func TestJSONIsCamelCase(t *testing.T) {
	b, err := json.Marshal(AgentExecuteResponse{Kind: KindOK, ResponseContinuationId: "r", ToolCalls: []AgentToolCall{{CallId: "c", Name: "n", ArgumentsJson: "{}"}}, Usage: LlmUsage{PromptTokens: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kind":"ok"`, `"responseContinuationId":"r"`, `"callId":"c"`, `"argumentsJson":"{}"`, `"promptTokens":1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s missing %s", b, want)
		}
	}
}

func TestSubjects(t *testing.T) {
	s := Subject(StageRequested, "c1", "t1")
	if s != "aptix.requested.c1.t1" {
		t.Fatal(s)
	}
	st, c, tr, ok := ParseSubject(s)
	if !ok || st != StageRequested || c != "c1" || tr != "t1" {
		t.Fatal(st, c, tr, ok)
	}
	if _, _, _, ok := ParseSubject("aptix.dead.envelope"); ok {
		t.Fatal("dead subject parsed as a stage subject")
	}
	if MsgID("c1", "t1", StageRetrieved) != "c1.t1.retrieved" || CEType(StageCompleted) != "dev.aptix.turn.completed.v1" {
		t.Fatal("msg id or ce type")
	}
	if ConversationFilter("c1") != "aptix.*.c1.>" || StageFilter("retrieved") != "aptix.retrieved.>" {
		t.Fatal("filters")
	}
}
