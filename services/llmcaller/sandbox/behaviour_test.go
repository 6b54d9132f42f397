package sandbox_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aptix-dev/aptix/services/llmcaller/sandbox"
)

// post sends a raw body to POST /v1/responses with an optional fault header.
func post(t *testing.T, url, body, fault string) (*http.Response, []byte, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/responses", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if fault != "" {
		req.Header.Set(sandbox.HeaderFault, fault)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// postPath sends a raw JSON body to any sandbox URL.
func postPath(t *testing.T, url, body string) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func start(t *testing.T, o sandbox.Options) (*httptest.Server, *sandbox.Server) {
	t.Helper()
	o.Logger = slog.New(slog.DiscardHandler)
	srv := sandbox.New(o)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, srv
}

type errBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func TestRejectsBadBodies(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	tools := `"tools":[{"type":"function","name":"a","parameters":{"type":"object"}}]`
	tests := []struct{ name, body, wantParam, wantIn string }{
		{"bad JSON", `{"model":`, "", "could not parse the JSON body"},
		{"input missing", `{"model":"m"}`, "input", "Missing required parameter"},
		{"input number", `{"model":"m","input":3}`, "input", "expected a string or an array"},
		{"input item not object", `{"model":"m","input":["x"]}`, "input[0]", "expected an object"},
		{"tool_choice unknown tool", `{"model":"m","input":"hi",` + tools + `,"tool_choice":{"type":"function","name":"b"}}`, "tool_choice", "Tool choice 'b' not found"},
		{"required without tools", `{"model":"m","input":"hi","tool_choice":"required"}`, "tool_choice", "'required'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b, err := post(t, ts.URL, tt.body, "")
			if err != nil {
				t.Fatal(err)
			}
			var e errBody
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Type != "invalid_request_error" {
				t.Fatalf("status %d body %s", resp.StatusCode, b)
			}
			if !strings.Contains(e.Error.Message, tt.wantIn) || (tt.wantParam == "") != (e.Error.Param == nil) || (e.Error.Param != nil && *e.Error.Param != tt.wantParam) {
				t.Fatalf("error %s", b)
			}
		})
	}
}

func TestToolsAreNotRetained(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	first := `{"model":"m","input":"hi","tools":[{"type":"function","name":"ddr_document","parameters":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}}],"tool_choice":{"type":"function","name":"ddr_document"}}`
	resp, b, err := post(t, ts.URL, first, "")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("turn 1: %v %s", err, b)
	}
	var r struct {
		ID     string `json:"id"`
		Output []struct {
			Type      string `json:"type"`
			Arguments string `json:"arguments"`
		} `json:"output"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Output[0].Type != "function_call" || r.Output[0].Arguments != `{"x":"sandbox"}` {
		t.Fatalf("turn 1 output %s", b)
	}
	second := `{"model":"m","input":"again","previous_response_id":"` + r.ID + `","tool_choice":{"type":"function","name":"ddr_document"}}`
	resp, b, err = post(t, ts.URL, second, "")
	if err != nil || resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "Tool choice 'ddr_document' not found in 'tools' parameter.") {
		t.Fatalf("turn 2 without tools should fail like OpenAI: %d %s", resp.StatusCode, b)
	}
}

func TestForcedCallConformsToSchemas(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	schemas := []map[string]any{
		{"type": "object", "properties": map[string]any{"n": map[string]any{"type": []any{"number", "null"}, "exclusiveMinimum": 5.0}}, "required": []any{"n"}},
		{"type": "object", "properties": map[string]any{"v": map[string]any{"anyOf": []any{map[string]any{"type": "null"}, map[string]any{"type": "boolean"}}}}, "required": []any{"v"}},
		{"type": "object", "properties": map[string]any{"d": map[string]any{"type": "string", "default": "dflt"}, "c": map[string]any{"const": 7}}, "required": []any{"d", "c"}},
		{"type": "object", "properties": map[string]any{"rows": map[string]any{"type": "array", "minItems": 3, "items": map[string]any{
			"type": "object", "properties": map[string]any{"id": map[string]any{"type": "integer", "maximum": 0}, "at": map[string]any{"type": "string", "format": "date-time"}},
			"required": []any{"id", "at"}, "additionalProperties": false}}}, "required": []any{"rows"}, "additionalProperties": false},
		{"type": "object", "properties": map[string]any{"s": map[string]any{"type": "string", "maxLength": 2}}, "required": []any{"s"}},
	}
	for i, schema := range schemas {
		params, _ := json.Marshal(schema)
		body := `{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":` + string(params) + `}],"tool_choice":"required"}`
		resp, b, err := post(t, ts.URL, body, "")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("schema %d: %v %s", i, err, b)
		}
		var r struct {
			Output []struct {
				Arguments string `json:"arguments"`
			} `json:"output"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		validate(t, schema, r.Output[0].Arguments)
	}
}

func TestFaults(t *testing.T) {
	ts, _ := start(t, sandbox.Options{})
	ok := `{"model":"m","input":"hi"}`
	tests := []struct {
		fault      string
		wantStatus int
		check      func(t *testing.T, h http.Header, b []byte)
	}{
		{"429", 429, func(t *testing.T, h http.Header, b []byte) {
			if h.Get("Retry-After") != "1" || !strings.Contains(string(b), `"rate_limit_exceeded"`) {
				t.Fatalf("headers %v body %s", h, b)
			}
		}},
		{"429,retry-after-ms=40", 429, func(t *testing.T, h http.Header, b []byte) {
			if h.Get("retry-after-ms") != "40" || h.Get("Retry-After") != "" {
				t.Fatalf("headers %v", h)
			}
		}},
		{"500", 500, func(t *testing.T, h http.Header, b []byte) {
			if !strings.Contains(string(b), `"server_error"`) {
				t.Fatalf("body %s", b)
			}
		}},
		{"status=401", 401, func(t *testing.T, h http.Header, b []byte) {
			if !strings.Contains(string(b), `"invalid_api_key"`) {
				t.Fatalf("body %s", b)
			}
		}},
		{"detail=422", 422, func(t *testing.T, h http.Header, b []byte) {
			if !strings.HasPrefix(string(b), `{"detail":`) {
				t.Fatalf("body %s", b)
			}
		}},
		{"malformed", 200, func(t *testing.T, h http.Header, b []byte) {
			if json.Valid(b) || len(b) == 0 {
				t.Fatalf("body should be invalid JSON: %s", b)
			}
		}},
		{"latency=60ms", 200, func(t *testing.T, h http.Header, b []byte) {
			if !json.Valid(b) {
				t.Fatalf("body %s", b)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			began := time.Now()
			resp, b, err := post(t, ts.URL, ok, tt.fault)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus || resp.Header.Get(sandbox.HeaderSandbox) != "1" {
				t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
			}
			if strings.HasPrefix(tt.fault, "latency") && time.Since(began) < 60*time.Millisecond {
				t.Fatalf("latency not applied: %s", time.Since(began))
			}
			tt.check(t, resp.Header, b)
		})
	}
	t.Run("drop", func(t *testing.T) {
		if _, _, err := post(t, ts.URL, ok, "drop"); err == nil {
			t.Fatal("want a transport error on a dropped connection")
		}
	})
	t.Run("unknown fault", func(t *testing.T) {
		resp, _, err := post(t, ts.URL, ok, "explode")
		if err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%v %v", resp, err)
		}
	})
}

func TestFailFirstScriptAndRecording(t *testing.T) {
	ts, srv := start(t, sandbox.Options{FailFirst: 2, FailStatus: 503, Script: []string{"scripted one", `{"raw":true}`}})
	for i, want := range []int{503, 503, 200, 200, 200} {
		body := `{"model":"m","input":"call ` + string(rune('a'+i)) + `"}`
		resp, b, err := post(t, ts.URL, body, "")
		if err != nil || resp.StatusCode != want {
			t.Fatalf("request %d: %v status %v", i, err, resp.StatusCode)
		}
		if want == 503 && resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("503 without Retry-After")
		}
		var r struct {
			Output []struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"output"`
		}
		if want == 200 {
			_ = json.Unmarshal(b, &r)
			got := r.Output[0].Content[0].Text
			wantText := map[int]string{2: "scripted one", 3: `{"raw":true}`, 4: "Sandbox reply (mode unspecified) to: call e. Context chunks: none."}[i]
			if got != wantText {
				t.Fatalf("request %d text %q want %q", i, got, wantText)
			}
		}
		if !bytes.Equal(srv.LastRequest(), []byte(body)) {
			t.Fatalf("LastRequest %s", srv.LastRequest())
		}
	}
	if srv.Requests() != 5 || len(srv.LastRequests()) != 5 {
		t.Fatalf("requests %d / %d", srv.Requests(), len(srv.LastRequests()))
	}
}

func TestStatsCountPerInstruction(t *testing.T) {
	srv := sandbox.New(sandbox.Options{Logger: slog.New(slog.DiscardHandler)})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	post := func(instr string) {
		body := `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"[MODE: X]\n\n[INSTRUCTION]\n` + instr + `"}]}]}`
		resp, err := http.Post(hs.URL+"/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post("turn one")
	post("turn two")
	post("turn one")
	resp, err := http.Get(hs.URL + "/v1/_sandbox/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st sandbox.Stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Requests != 3 || st.ByInstruction["turn one"] != 2 || st.ByInstruction["turn two"] != 1 || st.MaxInFlight != 1 {
		t.Fatalf("stats %+v", st)
	}
}
