package httpapi

import (
	"net/http"

	"github.com/aptix-dev/aptix/services/gateway/application"
)

// writeForwarded relays a backend's own answer (application.Forwarded),
// status and body as they are.
func writeForwarded(w http.ResponseWriter, f application.Forwarded) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_, _ = w.Write(f.Body)
}
