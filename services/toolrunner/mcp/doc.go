// Package mcp connects Aptix to the MCP servers a deployment configures
// (the mcpServers JSON format), discovers their tools and calls them.
package mcp
