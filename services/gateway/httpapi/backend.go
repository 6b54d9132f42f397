package httpapi

import (
	"context"
	"net/http"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// HeaderBackend names the backend profile that served a turn's model
// call: another than the one asked for when it failed and a fallback
// answered (docs/backends.md#fallbacks). A streamed answer sends its
// headers before the model is called, so only a whole answer carries it;
// the completed turn's AgentExecuteResponse.backend says it for both.
const HeaderBackend = "X-Aptix-Backend"

type backendHeaderKey struct{}

// withBackendHeader makes outcome name the serving backend in w's
// headers, which a whole answer then sends: outcome reads the completed
// turn, its callers write the answer.
func withBackendHeader(ctx context.Context, w http.ResponseWriter) context.Context {
	return context.WithValue(ctx, backendHeaderKey{}, w)
}

// noteBackend sets HeaderBackend from the completed turn t on the writer
// ctx carries, if any.
func noteBackend(ctx context.Context, t *contracts.Turn) {
	w, _ := ctx.Value(backendHeaderKey{}).(http.ResponseWriter)
	if w == nil {
		return
	}
	setBackend(w, t)
}

func setBackend(w http.ResponseWriter, t *contracts.Turn) {
	switch {
	case t == nil:
	case t.Response != nil && t.Response.Backend != "":
		w.Header().Set(HeaderBackend, t.Response.Backend)
	case t.LLM != nil && t.LLM.Backend != "":
		w.Header().Set(HeaderBackend, t.LLM.Backend)
	}
}
