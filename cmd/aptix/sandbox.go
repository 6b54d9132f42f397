package main

import llmcli "github.com/aptix-dev/aptix/services/llmcaller/cli"

// `aptix sandbox` serves the sandbox Responses API on its own, e.g. with a
// --script of raw outputs; `aptix up` serves it in-process when it is the
// default backend.
func init() { root.AddCommand(llmcli.SandboxCommand()) }
