package responses

import "encoding/json"

// The file_search_call item of a streamed response, in OpenAI's order:
// output_item.added (in_progress), response.file_search_call.in_progress,
// response.file_search_call.searching as the response starts (retrieval
// runs before the model), then response.file_search_call.completed and
// output_item.done once the LLM caller reports the retrieval done (a
// retrieval delta, sent before the model is called), so the model's own
// items follow at output_index 1 and up, as in the final output.

// DeltaRetrieval is the delta the LLM caller publishes when a turn's
// retrieval is done: Text the query, Sources the chunks used.
const DeltaRetrieval = "retrieval"

// FileSearch opens the response's file_search_call item (a request with a
// file_search tool); nil for any other response.
func (s *Streamer) FileSearch(meta Meta) []Event {
	if !meta.FileSearch {
		return nil
	}
	s.meta = meta
	it := s.add(FileSearchID(meta.ID), "file_search_call", "", "")
	item := map[string]any{"id": it.id, "type": "file_search_call", "status": "in_progress", "queries": []string{}, "results": nil}
	return []Event{
		s.ev("response.output_item.added", map[string]any{"output_index": it.index, "item": item}),
		s.ev("response.file_search_call.in_progress", map[string]any{"output_index": it.index, "item_id": it.id}),
		s.ev("response.file_search_call.searching", map[string]any{"output_index": it.index, "item_id": it.id}),
	}
}

// retrieved closes the file_search_call item when the retrieval is done.
// A retrieval delta for a response without one (or sent again by a
// redelivered turn) changes nothing.
func (s *Streamer) retrieved(d Delta) []Event {
	it := s.byID[FileSearchID(s.meta.ID)]
	if it == nil || it.done || s.meta.ID == "" {
		return nil
	}
	return s.closeFileSearch(it, fileSearchItem(s.meta, d.Text, d.Sources, "completed"))
}

func (s *Streamer) closeFileSearch(it *liveItem, raw json.RawMessage) []Event {
	it.done = true
	return []Event{
		s.ev("response.file_search_call.completed", map[string]any{"output_index": it.index, "item_id": it.id}),
		s.ev("response.output_item.done", map[string]any{"output_index": it.index, "item": raw}),
	}
}

// finishFileSearch is the final output's file_search_call item: nothing
// when it was closed live, closed now when it was opened, and its whole
// sequence when the stream never opened it (a resumed stream).
func (s *Streamer) finishFileSearch(it *liveItem, id string, raw json.RawMessage) []Event {
	switch {
	case it != nil && it.done:
		return nil
	case it != nil:
		return s.closeFileSearch(it, raw)
	}
	it = s.add(id, "file_search_call", "", "")
	added := map[string]any{}
	_ = json.Unmarshal(raw, &added)
	added["status"], added["queries"], added["results"] = "in_progress", []string{}, nil
	return append([]Event{
		s.ev("response.output_item.added", map[string]any{"output_index": it.index, "item": added}),
		s.ev("response.file_search_call.in_progress", map[string]any{"output_index": it.index, "item_id": it.id}),
		s.ev("response.file_search_call.searching", map[string]any{"output_index": it.index, "item_id": it.id}),
	}, s.closeFileSearch(it, raw)...)
}
