package httpapi

import (
	"net/http"
)

// HeaderBackend names the backend profile that served a turn's model
// call: another than the one asked for when it failed and a fallback
// answered (docs/backends.md#fallbacks). A streamed answer sends its
// headers before the model is called, so only a whole answer carries it;
// the completed turn's AgentExecuteResponse.backend says it for both.
const HeaderBackend = "X-Aptix-Backend"

// setBackend names the serving backend in w's headers ("": unknown).
func setBackend(w http.ResponseWriter, backend string) {
	if backend != "" {
		w.Header().Set(HeaderBackend, backend)
	}
}
