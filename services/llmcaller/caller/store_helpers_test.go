package caller_test

import "github.com/aptix-dev/aptix/pkg/contracts"

func sampleResult() contracts.LLMResult {
	return contracts.LLMResult{Backend: "sb", Model: "m", Status: 429, Body: "{\"error\": {\"code\":\"c\"}}\n", Attempts: 3,
		Error: &contracts.UpstreamError{Status: 429, Type: "rate_limit_error", Code: "c", Message: "slow down"}, DurationMs: 12.5}
}
