// Package mcp connects Aptix to the MCP servers a deployment configures
// (the mcpServers JSON format, named by APTIX_MCP_CONFIG), discovers their
// tools and calls them, with the official Go SDK over streamable HTTP, legacy
// SSE or stdio.
//
// It has no NATS import: the toolrunner stage binds it to the bus. A Registry
// connects lazily, caches each server's tools/list (TTL, dropped on
// notifications/tools/list_changed), reports a server that is down instead
// of failing the others, and reconnects on the next use. Expose gives the
// tools the names the model sees.
package mcp
