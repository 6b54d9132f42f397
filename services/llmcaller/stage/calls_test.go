package stage_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/aptix-dev/aptix/pkg/contracts"
	"github.com/aptix-dev/aptix/pkg/pipeline/layout"
	"github.com/aptix-dev/aptix/services/llmcaller/stage"
)

// authServer runs nats-server with deploy/nats/auth.conf's users.
func authServer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	auth, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "nats", "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "server.conf")
	conf := "listen: \"127.0.0.1:-1\"\njetstream { store_dir: " + `"` + filepath.ToSlash(filepath.Join(dir, "js")) + `"` + " }\n" + string(auth)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoLog, opts.NoSigs = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

func connectAs(t *testing.T, url, user string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserInfo(user, "aptix-dev-"+user))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestEventCallsUnderAuth: the LLM caller's NATS user (deploy/nats/auth.conf)
// reads a conversation's calls from its events, a claim-checked enveloped
// event included, and each result is paired with the body of the call
// that made it: the envelope's toolround event (no result yet) and a
// toolrunner's responded event repeating the last round's result are no
// calls, another conversation's events are not read.
func TestEventCallsUnderAuth(t *testing.T) {
	url := authServer(t)
	admin := connectAs(t, url, "admin")
	ctx := context.Background()
	if _, err := layout.EnsureStream(ctx, admin, layout.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	claims, err := admin.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: contracts.ClaimBucket})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(stage, conv, turn string, tr contracts.Turn, claimed bool) {
		t.Helper()
		tr.ConversationId, tr.TurnId = conv, turn
		data, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(contracts.Subject(stage, conv, turn))
		m.Data = data
		if claimed {
			key := "claim-" + conv + "-" + turn + "-" + stage
			if _, err := claims.PutBytes(ctx, key, data); err != nil {
				t.Fatal(err)
			}
			m.Header.Set(contracts.HeaderClaim, key)
			m.Data = []byte(`{"claim":"` + key + `"}`)
		}
		if _, err := admin.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	env := func(round int, body string) contracts.Turn {
		tr := contracts.Turn{Envelope: &contracts.Envelope{Backend: "sb", Body: json.RawMessage(body)}}
		if round >= 0 {
			tr.Tools = &contracts.ToolLoop{Round: round}
		}
		return tr
	}
	result := func(round int, id string) contracts.Turn {
		tr := env(round, "")
		tr.Envelope.Body = nil
		tr.LLM = &contracts.LLMResult{Status: 200, Body: `{"id":"` + id + `","output":[]}`}
		return tr
	}
	big := `{"input":"` + strings.Repeat("x", 2<<20) + `"}`
	publish(contracts.StageEnveloped, "c1", "t1", env(-1, big), true)
	publish(contracts.StageResponded, "c1", "t1", result(-1, "resp_1"), false)
	publish(contracts.StageEnveloped, "c2", "t1", env(-1, `{"input":"other"}`), false)
	publish(contracts.StageResponded, "c2", "t1", result(-1, "resp_other"), false)
	publish(contracts.StageToolRound, "c1", "t2", env(0, `{"input":"listing"}`), false) // the envelope's: no result
	publish(contracts.StageEnveloped, "c1", "t2", env(0, `{"previous_response_id":"resp_1","input":"round 0"}`), false)
	publish(contracts.StageToolRound, "c1", "t2", result(0, "resp_2a"), false)
	publish(contracts.StageEnveloped, "c1", "t2", env(1, `{"previous_response_id":"resp_2a","input":"round 1"}`), false)
	publish(contracts.StageToolRound, "c1", "t2", result(1, "resp_2b"), false)
	publish(contracts.StageResponded, "c1", "t2", result(2, "resp_2b"), false) // the toolrunner ends the loop with it
	publish(contracts.StageEnveloped, "c1", "t3", env(-1, `{"previous_response_id":"resp_2b","input":"in flight"}`), false)

	calls, err := stage.EventCalls{JS: connectAs(t, url, "llmcaller")}.Calls(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		var b struct{ Input string }
		_ = json.Unmarshal(c.Body, &b)
		var r struct{ ID string }
		_ = json.Unmarshal([]byte(c.Result.Body), &r)
		if len(b.Input) > 20 {
			b.Input = "big"
		}
		got = append(got, r.ID+"<-"+b.Input+"@"+c.Backend)
	}
	if want := "resp_1<-big@sb resp_2a<-round 0@sb resp_2b<-round 1@sb"; strings.Join(got, " ") != want {
		t.Fatalf("calls %q, want %q", strings.Join(got, " "), want)
	}
}
