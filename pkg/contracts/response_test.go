package contracts

import "testing"

// TestUpstreamUsage: AGN-004 §2.3 as the mapper and the tool loop read it.
func TestUpstreamUsage(t *testing.T) {
	for name, c := range map[string]struct {
		in   *UpstreamUsage
		want LlmUsage
	}{
		"no usage":             {nil, LlmUsage{}},
		"responses names":      {&UpstreamUsage{InputTokens: 10, OutputTokens: 3, TotalTokens: 13}, LlmUsage{10, 3, 13, 0, 0, 0}},
		"chat names":           {&UpstreamUsage{PromptTokens: 7, CompletionTokens: 2, TotalTokens: 9}, LlmUsage{7, 2, 9, 0, 0, 0}},
		"responses name wins":  {&UpstreamUsage{InputTokens: 10, PromptTokens: 99, OutputTokens: 3, CompletionTokens: 98}, LlmUsage{10, 3, 13, 0, 0, 0}},
		"missing total summed": {&UpstreamUsage{InputTokens: 4, OutputTokens: 5}, LlmUsage{4, 5, 9, 0, 0, 0}},
		"responses details": {&UpstreamUsage{InputTokens: 100, OutputTokens: 50, InputTokensDetails: &tokenDetails{CachedTokens: 40},
			OutputTokensDetails: &tokenDetails{ReasoningTokens: 30}}, LlmUsage{100, 50, 150, 40, 30, 0}},
		"cache writes": {&UpstreamUsage{InputTokens: 15, OutputTokens: 5, InputTokensDetails: &tokenDetails{CachedTokens: 2, CacheWriteTokens: 3}}, LlmUsage{15, 5, 20, 2, 0, 3}},
		"chat details": {&UpstreamUsage{PromptTokens: 10, CompletionTokens: 5, PromptTokensDetails: &tokenDetails{CachedTokens: 8},
			CompletionTokensDetails: &tokenDetails{ReasoningTokens: 2}}, LlmUsage{10, 5, 15, 8, 2, 0}},
	} {
		if got := c.in.LlmUsage(); got != c.want {
			t.Errorf("%s: %+v, want %+v", name, got, c.want)
		}
	}
}

func TestLlmUsagePlus(t *testing.T) {
	if got := (LlmUsage{1, 2, 3, 4, 5, 6}).Plus(LlmUsage{10, 20, 30, 40, 50, 60}); got != (LlmUsage{11, 22, 33, 44, 55, 66}) {
		t.Fatalf("%+v", got)
	}
}
