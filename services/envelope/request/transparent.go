package request

// The transparent rule (Framing none, docs/request.md#which-rule-applies-when)
// is responsesbody's (Start, Body.MergeVerbatim): the client's input items
// go upstream in its order and bytes, its instructions are this request's
// only, and Aptix adds only what the client asked for.

// joinInstructions puts Aptix's own instructions (tool emulation) after
// the client's, so neither is lost.
func joinInstructions(client, ours string) string {
	switch {
	case client == "":
		return ours
	case ours == "":
		return client
	}
	return client + "\n\n" + ours
}
