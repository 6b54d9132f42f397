package main

import retrievercli "github.com/aptix-dev/aptix/services/retriever/cli"

// `aptix index` and `aptix search` live with the retriever; they use the
// shared connection (a running `aptix up`, --nats, or an embedded server).
func init() {
	root.AddCommand(retrievercli.Commands(connectNATS, func() string { return dataDir })...)
}
