package main

// Default addresses of what the aptix binary serves. Each has its own port,
// so the walk-throughs can run them side by side (an `aptix idp` next to
// `aptix up`, an `aptix mcp` next to both). The sandbox's is
// profiles.DefaultSandboxURL (127.0.0.1:8089).
const (
	defaultNATSListen = "127.0.0.1:4222" // aptix up --listen (DefaultNATSURL)
	defaultHTTPListen = "127.0.0.1:8080" // aptix up --http: the gateway
	defaultUpMCP      = "127.0.0.1:8090" // aptix up --mcp: the code index over MCP
	defaultMCPHTTP    = "127.0.0.1:8091" // aptix mcp --http
	defaultIDPListen  = "127.0.0.1:8092" // aptix idp --listen
	// aptix webhook-receiver --listen
	defaultWebhookListen = "127.0.0.1:8093"
)
