package responses

import (
	"encoding/json"
	"fmt"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// FileSearch is a file_search tool read as an Aptix retrieval: stock SDKs
// get RAG without the aptix extension. Its vector store id names the Aptix
// workspace; attribute filters on repo, language and tag map onto the
// request's Repo, Language and Tags.
type FileSearch struct {
	Workspace  string
	Repo       string
	Language   string
	Tags       []string
	MaxResults int
}

type filter struct {
	Type    string          `json:"type"`
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value"`
	Filters []filter        `json:"filters"`
}

func parseFileSearch(i int, raw json.RawMessage) (*FileSearch, *Error) {
	var t struct {
		VectorStoreIDs []string `json:"vector_store_ids"`
		MaxNumResults  int      `json:"max_num_results"`
		Filters        *filter  `json:"filters"`
	}
	param := fmt.Sprintf("tools[%d]", i)
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, invalid(param, CodeInvalidType, "Invalid type for '%s': %v.", param, err)
	}
	if len(t.VectorStoreIDs) != 1 || !contracts.IsToken(t.VectorStoreIDs[0]) {
		return nil, invalid(param+".vector_store_ids", CodeInvalidValue,
			"Invalid '%s.vector_store_ids': expected one Aptix workspace id ([A-Za-z0-9_-]{1,128}).", param)
	}
	fs := &FileSearch{Workspace: t.VectorStoreIDs[0], MaxResults: t.MaxNumResults}
	if t.Filters != nil {
		if e := fs.apply(param+".filters", *t.Filters); e != nil {
			return nil, e
		}
	}
	return fs, nil
}

// apply reads eq/in comparisons on repo, language and tag(s), under and.
func (fs *FileSearch) apply(param string, f filter) *Error {
	switch f.Type {
	case "and":
		for _, sub := range f.Filters {
			if e := fs.apply(param, sub); e != nil {
				return e
			}
		}
		return nil
	case "eq", "in":
	default:
		return invalid(param, CodeInvalidValue, "Invalid '%s': Aptix supports eq and in comparisons (under and) on repo, language and tags; got type '%s'.", param, f.Type)
	}
	var values []string
	var one string
	if json.Unmarshal(f.Value, &one) == nil {
		values = []string{one}
	} else if json.Unmarshal(f.Value, &values) != nil {
		return invalid(param, CodeInvalidValue, "Invalid '%s': the value of '%s' must be a string or a list of strings.", param, f.Key)
	}
	switch f.Key {
	case "repo":
		fs.Repo = values[0]
	case "language":
		fs.Language = values[0]
	case "tag", "tags":
		fs.Tags = append(fs.Tags, values...)
	default:
		return invalid(param, CodeInvalidValue, "Invalid '%s': unknown attribute '%s' (Aptix filters on repo, language and tags).", param, f.Key)
	}
	return nil
}
