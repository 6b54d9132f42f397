package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	json "github.com/go-json-experiment/json/v1"
)

// stateRecord is one stored response as a line of Options.StateFile.
type stateRecord struct {
	ID       string            `json:"id"`
	Response json.RawMessage   `json:"response"`
	Items    []json.RawMessage `json:"items"`
	OutIDs   []string          `json:"outIds,omitempty"`
}

// stateFile appends every saved response to Options.StateFile, so a sandbox
// restarted by `aptix up` still knows the responses a conversation record
// points at (previous_response_id) instead of failing every continued turn
// with previous_response_not_found.
type stateFile struct {
	f     *os.File
	path  string
	lines int // records in the file, rewritten past 2*keepResponses
}

// openState loads the responses saved in path (the last keepResponses of
// them) into s and opens path for appending. A file that cannot be read
// costs the old responses, not the sandbox: it is logged and replaced.
func (s *Server) openState(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("sandbox state dir: %w", err)
	}
	records, err := readState(path)
	if err != nil {
		s.log.Warn("sandbox state unreadable: starting empty", "path", path, "err", err)
		records = nil
	}
	if len(records) > keepResponses {
		records = records[len(records)-keepResponses:]
	}
	for _, r := range records {
		s.save(r.ID, stored{response: r.Response, items: r.Items, outIDs: r.OutIDs})
	}
	// Rewrite the file with what was kept, so it does not grow for ever.
	tmp := path + ".tmp"
	if err := writeState(tmp, records); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("sandbox state: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("sandbox state: %w", err)
	}
	s.mu.Lock()
	s.state = &stateFile{f: f, path: path, lines: len(records)}
	s.mu.Unlock()
	if len(records) > 0 {
		s.log.Info("sandbox responses restored", "path", path, "responses", len(records))
	}
	return nil
}

// persist appends one saved response to the state file, if any; s.mu is
// held by the caller (save). Once the file holds twice the responses kept in
// memory it is rewritten with those, so a long session does not grow it
// without bound.
func (s *Server) persist(id string, st stored) error {
	sf := s.state
	if sf == nil {
		return nil
	}
	line, err := json.Marshal(stateRecord{ID: id, Response: st.response, Items: st.items, OutIDs: st.outIDs})
	if err != nil {
		return err
	}
	if _, err := sf.f.Write(append(line, '\n')); err != nil {
		return err
	}
	sf.lines++
	if sf.lines <= 2*keepResponses {
		return nil
	}
	records := make([]stateRecord, 0, len(s.order))
	for _, rid := range s.order {
		r := s.responses[rid]
		records = append(records, stateRecord{ID: rid, Response: r.response, Items: r.items, OutIDs: r.outIDs})
	}
	if err := writeState(sf.path+".tmp", records); err != nil {
		return err
	}
	if err := os.Rename(sf.path+".tmp", sf.path); err != nil {
		return fmt.Errorf("sandbox state: %w", err)
	}
	f, err := os.OpenFile(sf.path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("sandbox state: %w", err)
	}
	sf.f.Close()
	sf.f, sf.lines = f, len(records)
	return nil
}

// Close closes the state file, if any. The sandbox keeps serving, from memory.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == nil {
		return nil
	}
	err := s.state.f.Close()
	s.state = nil
	return err
}

func readState(path string) ([]stateRecord, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var records []stateRecord
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r stateRecord
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.ID == "" {
			continue // a line cut short by a crash: the rest is still good
		}
		records = append(records, r)
	}
	return records, sc.Err()
}

func writeState(path string, records []stateRecord) error {
	var buf bytes.Buffer
	for _, r := range records {
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		buf.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("sandbox state: %w", err)
	}
	return nil
}
