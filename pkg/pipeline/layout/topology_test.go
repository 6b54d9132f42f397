package layout

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// natsUser is one user of deploy/nats/auth.conf.
type natsUser struct {
	publishAllow, publishDeny, subscribeAllow []string
}

func authUsers(t *testing.T) map[string]natsUser {
	t.Helper()
	doc, err := conf.ParseFile(filepath.Join("..", "..", "..", "deploy", "nats", "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	authz, _ := doc["authorization"].(map[string]any)
	raw, _ := authz["users"].([]any)
	users := map[string]natsUser{}
	for _, r := range raw {
		m, _ := r.(map[string]any)
		name, _ := m["user"].(string)
		perms, _ := m["permissions"].(map[string]any)
		pub, _ := perms["publish"].(map[string]any)
		sub, _ := perms["subscribe"].(map[string]any)
		users[name] = natsUser{publishAllow: strs(pub["allow"]), publishDeny: strs(pub["deny"]), subscribeAllow: strs(sub["allow"])}
	}
	return users
}

func strs(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// jetStreamClient is what every JetStream client publishes besides its own
// subjects: API requests, flow control and replies.
var jetStreamClient = []string{"$JS.API.>", "$JS.FC.>", "_INBOX.>"}

// TestAuthConfMatchesTopology: each stage's NATS user may publish exactly
// what the topology says the stage emits and writes, and the ack subject of
// its consumer; only the stage that trims may purge APTIX. A stage, a route
// or a store added to Stages without its permission (or a permission left
// behind) fails here rather than in a secured deployment.
func TestAuthConfMatchesTopology(t *testing.T) {
	users := authUsers(t)
	for _, st := range Stages {
		u, ok := users[st.Name]
		if !ok {
			t.Errorf("auth.conf has no user for the %s stage", st.Name)
			continue
		}
		var have []string
		for _, s := range u.publishAllow {
			if !slices.Contains(jetStreamClient, s) {
				have = append(have, s)
			}
		}
		want := st.PublishSubjects()
		for _, s := range want {
			if !slices.Contains(have, s) {
				t.Errorf("%s: auth.conf does not allow publishing %s (the topology says it does)", st.Name, s)
			}
		}
		for _, s := range have {
			if !slices.Contains(want, s) {
				t.Errorf("%s: auth.conf allows publishing %s, which the topology does not declare", st.Name, s)
			}
		}
		if !slices.Contains(u.subscribeAllow, "aptix.svc."+st.Name+".>") {
			t.Errorf("%s: may not subscribe to its micro service's subjects aptix.svc.%s.>", st.Name, st.Name)
		}
		if purge := mayPurge(u, contracts.StreamName); purge != st.Trim {
			t.Errorf("%s: may purge %s: %v, trims: %v", st.Name, contracts.StreamName, purge, st.Trim)
		}
	}
	// Every other user with a stage's shape (its own micro service) is a
	// stage the topology does not know.
	for name, u := range users {
		if _, ok := StageByName(name); !ok && slices.Contains(u.subscribeAllow, "aptix.svc."+name+".>") {
			t.Errorf("auth.conf user %s is a stage (aptix.svc.%s.>) missing from Stages", name, name)
		}
	}
}

// TestAuthConfEntries: the gateway may publish a turn at every entry point
// the topology declares (a skipped stage's Out included); a bus client
// (user client) only at the first, where the first stage validates it.
func TestAuthConfEntries(t *testing.T) {
	users := authUsers(t)
	entries := Entries()
	for _, e := range entries {
		if !slices.Contains(users["gateway"].publishAllow, contracts.StageFilter(e)) {
			t.Errorf("auth.conf: the gateway may not publish at the entry point %s", contracts.StageFilter(e))
		}
	}
	for _, e := range entries[1:] {
		if slices.Contains(users["client"].publishAllow, contracts.StageFilter(e)) {
			t.Errorf("auth.conf: a bus client may publish at %s, past the stage that validates it", contracts.StageFilter(e))
		}
	}
}

// TestEntries: the retriever and the envelope are the stages a turn may
// skip, so a turn enters at requested (skipping nothing), retrieved
// (skipping the retriever) or enveloped (skipping both); any other stage is
// no entry point.
func TestEntries(t *testing.T) {
	if got, want := Entries(), []string{contracts.StageRequested, contracts.StageRetrieved, contracts.StageEnveloped}; !slices.Equal(got, want) {
		t.Fatalf("Entries() = %v, want %v", got, want)
	}
	for _, c := range []struct {
		entry string
		want  []string
		ok    bool
	}{
		{contracts.StageRequested, nil, true},
		{contracts.StageRetrieved, []string{"retriever"}, true},
		{contracts.StageEnveloped, []string{"retriever", "envelope"}, true},
		{contracts.StageResponded, nil, false},
		{contracts.StageToolRound, nil, false},
		{contracts.StageCompleted, nil, false},
		{"nonsense", nil, false},
	} {
		got, ok := SkippedAt(c.entry)
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("SkippedAt(%s) = %v, %v; want %v, %v", c.entry, got, ok, c.want, c.ok)
		}
	}
	for _, s := range Stages[1:] {
		if s.Skippable && !slices.Contains(Entries(), s.Out) {
			t.Errorf("%s is Skippable but no entry point reaches past it (only a leading stage may be skipped)", s.Name)
		}
	}
}

// mayPurge says whether a user's publish permissions let it purge stream.
func mayPurge(u natsUser, stream string) bool {
	subj := "$JS.API.STREAM.PURGE." + stream
	allowed := false
	for _, a := range u.publishAllow {
		if subjectMatches(a, subj) {
			allowed = true
		}
	}
	for _, d := range u.publishDeny {
		if subjectMatches(d, subj) {
			return false
		}
	}
	return allowed
}

// subjectMatches says whether a NATS subject pattern covers a literal subject.
func subjectMatches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(p) == len(s)
}

// TestTopologyClosed: every event stage a stage may emit is consumed by a
// declared stage, except the completion where turns end, and one stage
// trims.
func TestTopologyClosed(t *testing.T) {
	consumed := map[string]string{}
	trims := 0
	for _, st := range Stages {
		if prev, ok := consumed[st.In]; ok {
			t.Errorf("%s and %s both consume %s", prev, st.Name, st.In)
		}
		consumed[st.In] = st.Name
		if st.Trim {
			trims++
		}
	}
	for _, st := range Stages {
		for _, e := range st.Emits() {
			if _, ok := consumed[e]; !ok && e != contracts.StageCompleted {
				t.Errorf("%s emits %s, which no stage consumes", st.Name, e)
			}
		}
	}
	if trims != 1 {
		t.Errorf("%d stages trim, want 1", trims)
	}
	if !Trims("mapper") || Trims("envelope") || Trims("no-such-stage") {
		t.Error("Trims does not follow the table")
	}
}
