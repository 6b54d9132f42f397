// Package profiles names the LLM backends an AgentContext may select. A profile
// holds the base URL, the *name* of the environment variable with the API key
// (never the key), models, limits and capabilities. The envelope stage reads
// capabilities to shape the request; the LLM caller reads the rest to call it.
package profiles

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aptix-dev/aptix/pkg/contracts"
)

// ToolMode says how function tools reach a backend.
type ToolMode string

const (
	// ToolModeNative sends tools in the request's tools field.
	ToolModeNative ToolMode = "native"
	// ToolModePrompt removes function tools and injects calling instructions
	// into the prompt (docs/tool-emulation.md), parsing <tool_call> blocks from the text.
	ToolModePrompt ToolMode = "prompt"
)

// API names the wire protocol a backend speaks.
type API string

const (
	// APIResponses is OpenAI's Responses API (POST {baseUrl}/responses): the default.
	APIResponses API = "responses"
	// APIChatCompletions is OpenAI's Chat Completions API (POST
	// {baseUrl}/chat/completions), which most self-hosted and rented models
	// speak. The LLM caller translates the Responses request the envelope
	// built into it and the reply back (docs/backends.md). Such a backend has
	// no server-side state: no previous_response_id (Aptix replays the
	// conversation), no background mode (no re-attach), no compaction.
	APIChatCompletions API = "chat-completions"
	// APIAnthropicMessages is Anthropic's Messages API (POST
	// {baseUrl}/messages, x-api-key, anthropic-version). The LLM caller
	// translates the turn's Responses request into it and the reply back,
	// or forwards a Messages client's own body (docs/backends.md). Like
	// Chat Completions it keeps nothing server-side: Aptix replays the
	// conversation, thinking blocks and their signatures included.
	APIAnthropicMessages API = "anthropic-messages"
)

// Anthropic holds what an Anthropic Messages backend needs that the
// Responses request does not say.
type Anthropic struct {
	// Version is the anthropic-version header sent when the client sent
	// none (default DefaultAnthropicVersion).
	Version string `json:"version,omitempty"`
	// MaxTokens is max_tokens for a request that names no limit: Messages
	// requires one, Responses does not (default DefaultAnthropicMaxTokens).
	MaxTokens int `json:"maxTokens,omitempty"`
}

// The Anthropic defaults.
const (
	DefaultAnthropicVersion   = "2023-06-01"
	DefaultAnthropicMaxTokens = 8192
)

// Chat holds what differs between Chat Completions servers, so no server's
// quirk lives in code (docs/backends.md lists them per server).
type Chat struct {
	// TokenLimitField receives max_output_tokens: "max_completion_tokens"
	// (OpenAI's current name, the default) or "max_tokens" (what many
	// servers still read).
	TokenLimitField string `json:"tokenLimitField,omitempty"`
	// DeveloperRole: the server accepts role "developer". Without it
	// developer messages are sent as "system".
	DeveloperRole bool `json:"developerRole,omitempty"`
	// InstructionsRole is the role of the message carrying the request's
	// instructions: "system" (default) or "developer" (needs DeveloperRole).
	InstructionsRole string `json:"instructionsRole,omitempty"`
	// NoStreamOptions: the server refuses stream_options, so a streamed call
	// does not ask for usage in a final chunk (usage may then be absent).
	NoStreamOptions bool `json:"noStreamOptions,omitempty"`
	// FlattenText sends a message whose parts are all text as one string,
	// the parts joined by a blank line, for servers that take only string
	// content. By default a user message with several parts keeps them.
	FlattenText bool `json:"flattenText,omitempty"`
	// DropFields are request fields never sent (after translation), e.g.
	// ["seed","reasoning_effort"] for a server that rejects them.
	DropFields []string `json:"dropFields,omitempty"`
	// ExtraBody is merged into every request body last (it wins over the
	// translated fields): a server's own parameters, e.g. OpenRouter's
	// "provider" or vLLM's "top_k".
	ExtraBody map[string]json.RawMessage `json:"extraBody,omitempty"`
}

// Capabilities are what a backend does with a /responses request beyond the basics.
type Capabilities struct {
	// RetainsTools: the backend keeps tools across previous_response_id, so
	// unchanged tools may be omitted on continuation. OpenAI does not.
	RetainsTools bool `json:"retainsTools"`
	// SupportsPreviousResponseID: the backend threads turns by
	// previous_response_id. Without it Aptix replays the conversation's items.
	SupportsPreviousResponseID bool `json:"supportsPreviousResponseId"`
	// ToolMode: native or prompt.
	ToolMode ToolMode `json:"toolMode"`
	// Reattach: the backend keeps background responses and resumes their
	// event streams (POST /responses with background:true, GET
	// /responses/{id}?stream=true&starting_after=N, POST …/cancel). With it
	// the LLM caller creates every call in background mode and records the
	// upstream response id before relaying anything, so a turn redelivered
	// after a crash (or a stream cut mid-way) re-attaches to the call already
	// paid for instead of making it again (docs/reliability.md#re-attach). Off unless a
	// profile says so, because it has costs on hosted models:
	//   - OpenAI keeps a background response for about 10 minutes: a turn
	//     redelivered later than that finds it gone and calls again (with a
	//     warning in the result);
	//   - background mode stores the response (store:true), so it is not
	//     compatible with Zero Data Retention;
	//   - time to first token may be higher (the response is queued first).
	// On for the built-in sandbox, which serves all of it; another Aptix
	// gateway serves it too.
	Reattach bool `json:"reattach"`
	// Compact: the backend serves POST /responses/compact, so the gateway
	// forwards a compaction of explicit input to it (its compaction items
	// are the backend's own, which only it can read).
	Compact bool `json:"compact,omitempty"`
	// InputTokens: the backend serves POST /responses/input_tokens, so the
	// gateway forwards a token count to it instead of counting itself.
	InputTokens bool `json:"inputTokens,omitempty"`
}

// Profile is one backend.
type Profile struct {
	Name string `json:"name"`
	// BaseURL ends in /v1, as openai-go expects.
	BaseURL string `json:"baseUrl"`
	// APIKeyEnv names the environment variable holding the API key; empty for none.
	APIKeyEnv    string `json:"apiKeyEnv,omitempty"`
	DefaultModel string `json:"defaultModel,omitempty"`
	// ContextWindow is the model's context window in tokens (0: unknown).
	// With it, a request with truncation "auto" has its oldest input items
	// dropped by the LLM caller until it fits (an estimate of ~4 bytes a
	// token), instead of failing upstream.
	ContextWindow int `json:"contextWindow,omitempty"`
	// MaxOutputTokens is the output a budgeted turn that names no
	// max_output_tokens is limited to, and so the output its budget
	// reservation counts (docs/usage-and-budgets.md#the-reservation-rule);
	// 0 is DefaultMaxOutputTokens.
	MaxOutputTokens int               `json:"maxOutputTokens,omitempty"`
	Aliases         map[string]string `json:"aliases,omitempty"`
	// AliasRules are the aliases that ask for Aptix's own turn (AGN-003
	// framing, retrieval) beyond a rename (alias.go).
	AliasRules map[string]Alias `json:"aliasRules,omitempty"`
	// Models are further model names this profile serves: a request naming
	// one is routed here (Set.Route) and /v1/models lists it.
	Models []string `json:"models,omitempty"`
	// API is the wire protocol: APIResponses (default) or APIChatCompletions.
	API API `json:"api,omitempty"`
	// Chat are the Chat Completions server's quirks (API chat-completions only).
	Chat Chat `json:"chat,omitzero"`
	// Anthropic are the Messages backend's settings (API anthropic-messages only).
	Anthropic Anthropic `json:"anthropic,omitzero"`
	// Headers are sent with every request to the backend (e.g. OpenRouter's
	// HTTP-Referer and X-Title). Never put a secret here: use APIKeyEnv.
	Headers map[string]string `json:"headers,omitempty"`
	// AttemptTimeout bounds one HTTP attempt; TurnTimeout bounds all attempts of a turn.
	AttemptTimeout time.Duration `json:"attemptTimeout"`
	TurnTimeout    time.Duration `json:"turnTimeout"`
	MaxRetries     int           `json:"maxRetries"`
	MaxConcurrent  int           `json:"maxConcurrent"`
	Capabilities   Capabilities  `json:"capabilities"`
	// MaxResponseBytes caps what the backend may send for one call: the
	// bytes of a JSON answer, or of the whole event stream of a streamed
	// one (which carries the text twice: as deltas and in the final
	// response). A bigger answer is cut off where it crosses the cap and the
	// turn fails with response_too_large, not retried (a retry would pay
	// again). An error body is kept up to the smaller of this and 1 MiB.
	// Default DefaultMaxResponseBytes.
	MaxResponseBytes int64 `json:"maxResponseBytes,omitempty"`
	// Sandbox marks the built-in sandbox model, so logs never pass it off as a model.
	Sandbox bool `json:"sandbox,omitempty"`
	// Prices are USD per million tokens by model name, "*" for any model
	// not named (docs/usage-and-budgets.md). A model with no price leaves
	// its turns unpriced.
	Prices Prices `json:"prices,omitempty"`
	// Fallbacks are the profiles a call moves to, in order, when this
	// one's fails after its own retries with 429, 5xx, 529, a connection
	// error or a timeout, before any output reached the client
	// (docs/backends.md#fallbacks). Each asks its own model for the one
	// requested (FallbackModel). Only the first profile's list is followed.
	Fallbacks []string `json:"fallbacks,omitempty"`
}

// FallbackModel is the model this profile is asked for when a call for
// requested (a model or alias as the client named it) falls back to it:
// its alias of that name, the model itself when the profile serves it,
// else the profile's default.
func (p Profile) FallbackModel(requested string) string {
	if m, ok := p.Aliases[requested]; ok {
		return m
	}
	if requested != "" && p.serves(requested) {
		return requested
	}
	return p.Model("")
}

// Defaults applied to any field a profile leaves unset.
const (
	DefaultAttemptTimeout = 120 * time.Second
	DefaultTurnTimeout    = 300 * time.Second
	DefaultMaxRetries     = 3
	DefaultMaxConcurrent  = 32
	DefaultModel          = "gpt-5.1"
	DefaultSandboxURL     = "http://127.0.0.1:8089/v1"
	// DefaultMaxResponseBytes bounds one upstream answer. The largest
	// answers a model gives are far below it (128k output tokens are about
	// 512 KiB of text, a few MiB with reasoning items and JSON escaping),
	// while an answer is held a few times over on its way (the body, its
	// event, the completion and the client's copy): unbounded, one 200 MB
	// answer took a 272 MB process past 1.5 GB. 16 MiB keeps a turn's peak
	// near 100 MB and leaves room for any real answer.
	DefaultMaxResponseBytes int64 = 16 << 20
)

// APIKey reads the key from the environment variable the profile names.
func (p Profile) APIKey() string {
	if p.APIKeyEnv == "" {
		return ""
	}
	return os.Getenv(p.APIKeyEnv)
}

// Model resolves a requested model through the aliases, falling back to the
// profile's default and then to the global DefaultModel.
func (p Profile) Model(requested string) string {
	if requested == "" {
		requested = p.DefaultModel
	}
	if requested == "" {
		return DefaultModel
	}
	if m, ok := p.Aliases[requested]; ok {
		return m
	}
	return requested
}

// Set is the profiles a process knows, with one default.
type Set struct {
	Default  string
	profiles map[string]Profile
}

// Get returns the named profile, or the default for "".
func (s *Set) Get(name string) (Profile, error) {
	if name == "" {
		name = s.Default
	}
	p, ok := s.profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("unknown backend profile %q (known: %s)", name, strings.Join(s.Names(), ", "))
	}
	return p, nil
}

// Names lists the profile names, sorted.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.profiles))
	for n := range s.profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Put adds or replaces a profile, applying defaults.
func (s *Set) Put(p Profile) {
	if s.profiles == nil {
		s.profiles = map[string]Profile{}
	}
	s.profiles[p.Name] = withDefaults(p)
}

func withDefaults(p Profile) Profile {
	if p.AttemptTimeout <= 0 {
		p.AttemptTimeout = DefaultAttemptTimeout
	}
	if p.TurnTimeout <= 0 {
		p.TurnTimeout = DefaultTurnTimeout
	}
	if p.MaxRetries < 0 {
		p.MaxRetries = 0
	}
	if p.MaxConcurrent <= 0 {
		p.MaxConcurrent = DefaultMaxConcurrent
	}
	if p.Capabilities.ToolMode == "" {
		p.Capabilities.ToolMode = ToolModeNative
	}
	if p.API == "" {
		p.API = APIResponses
	}
	if p.MaxResponseBytes <= 0 {
		p.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if p.API == APIAnthropicMessages {
		p.Capabilities.SupportsPreviousResponseID, p.Capabilities.RetainsTools = false, false
		p.Capabilities.Reattach, p.Capabilities.Compact, p.Capabilities.InputTokens = false, false, false
		p.Anthropic.Version = cmp.Or(p.Anthropic.Version, DefaultAnthropicVersion)
		if p.Anthropic.MaxTokens <= 0 {
			p.Anthropic.MaxTokens = DefaultAnthropicMaxTokens
		}
	}
	if p.API == APIChatCompletions {
		// Chat Completions keeps nothing server-side: these can never hold.
		p.Capabilities.SupportsPreviousResponseID, p.Capabilities.RetainsTools = false, false
		p.Capabilities.Reattach, p.Capabilities.Compact, p.Capabilities.InputTokens = false, false, false
		if p.Chat.TokenLimitField == "" {
			p.Chat.TokenLimitField = TokenLimitMaxCompletionTokens
		}
		if p.Chat.InstructionsRole == "" {
			p.Chat.InstructionsRole = "system"
		}
	}
	return p
}

// The Chat.TokenLimitField values.
const (
	TokenLimitMaxCompletionTokens = "max_completion_tokens"
	TokenLimitMaxTokens           = "max_tokens"
)

// ChatCompletions reports whether the profile speaks Chat Completions.
func (p Profile) ChatCompletions() bool { return p.API == APIChatCompletions }

// Configured reports whether the profile can be called: it needs no API
// key, or the environment variable it names is set.
func (p Profile) Configured() bool { return p.APIKeyEnv == "" || os.Getenv(p.APIKeyEnv) != "" }

// Builtin returns the built-in profiles: openai (OPENAI_API_KEY,
// OPENAI_BASE_URL) and sandbox (APTIX_SANDBOX_URL). The default is openai when
// OPENAI_API_KEY is set, otherwise sandbox.
func Builtin() *Set {
	s := &Set{}
	base := os.Getenv("OPENAI_BASE_URL")
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	s.Put(Profile{
		Name: "openai", BaseURL: base, APIKeyEnv: "OPENAI_API_KEY", DefaultModel: DefaultModel,
		MaxRetries:   DefaultMaxRetries,
		Capabilities: Capabilities{RetainsTools: false, SupportsPreviousResponseID: true, ToolMode: ToolModeNative, Compact: true, InputTokens: true},
	})
	sb := os.Getenv("APTIX_SANDBOX_URL")
	if sb == "" {
		sb = DefaultSandboxURL
	}
	s.Put(Profile{
		Name: "sandbox", BaseURL: sb, DefaultModel: "sandbox-1", Sandbox: true,
		AttemptTimeout: 30 * time.Second, TurnTimeout: 60 * time.Second, MaxRetries: DefaultMaxRetries, MaxConcurrent: 256,
		Capabilities: Capabilities{RetainsTools: false, SupportsPreviousResponseID: true, ToolMode: ToolModeNative, Reattach: true, Compact: true, InputTokens: true},
		// The sandbox is free, but priced (at zero) so its turns show a cost
		// and tests can give it a price (APTIX_PROFILE_SANDBOX_PRICES) to spend.
		Prices: Prices{"*": {}},
	})
	s.Default = "sandbox"
	if os.Getenv("OPENAI_API_KEY") != "" {
		s.Default = "openai"
	}
	return s
}

// DefaultMaxOutputTokens is a profile's MaxOutputTokens when it names none.
const DefaultMaxOutputTokens = 4096

// SandboxMaxOutputTokens is a sandbox profile's MaxOutputTokens when it
// names none.
const SandboxMaxOutputTokens = 256

// BudgetMaxOutput is the output a budgeted turn that names no
// max_output_tokens is sent with, and its reservation counts.
func (p Profile) BudgetMaxOutput() int {
	switch {
	case p.MaxOutputTokens > 0:
		return p.MaxOutputTokens
	case p.Sandbox:
		return SandboxMaxOutputTokens // its answers are short
	}
	return DefaultMaxOutputTokens
}

// fileProfile is the on-disk shape: durations as strings ("30s"), and
// supportsPreviousResponseId defaulting to true when absent.
type fileProfile struct {
	BaseURL         string            `json:"baseUrl"`
	APIKeyEnv       string            `json:"apiKeyEnv"`
	DefaultModel    string            `json:"defaultModel"`
	ContextWindow   int               `json:"contextWindow"`
	MaxOutputTokens int               `json:"maxOutputTokens"`
	Aliases         map[string]Alias  `json:"aliases"`
	Models          []string          `json:"models"`
	API             API               `json:"api"`
	Chat            *Chat             `json:"chat"`
	Anthropic       *Anthropic        `json:"anthropic"`
	Headers         map[string]string `json:"headers"`
	AttemptTimeout  string            `json:"attemptTimeout"`
	TurnTimeout     string            `json:"turnTimeout"`
	MaxRetries      *int              `json:"maxRetries"`
	MaxConcurrent   int               `json:"maxConcurrent"`
	// MaxResponseBytes: 0 or absent is the default; negative is an error.
	MaxResponseBytes int64 `json:"maxResponseBytes"`
	Capabilities     struct {
		RetainsTools               bool     `json:"retainsTools"`
		SupportsPreviousResponseID *bool    `json:"supportsPreviousResponseId"`
		ToolMode                   ToolMode `json:"toolMode"`
		Reattach                   bool     `json:"reattach"`
		Compact                    bool     `json:"compact"`
		InputTokens                bool     `json:"inputTokens"`
	} `json:"capabilities"`
	// Sandbox marks the built-in sandbox model's endpoints (e.g. its chat
	// endpoint), so logs never pass them off as a model.
	Sandbox   bool     `json:"sandbox"`
	Prices    Prices   `json:"prices"`
	Fallbacks []string `json:"fallbacks"`
}

type file struct {
	Default  string                 `json:"default"`
	Profiles map[string]fileProfile `json:"profiles"`
}

// Parse reads a profiles file (JSON) on top of the built-in profiles.
func Parse(data []byte) (*Set, error) { return parse("profiles", data) }

// parse is Parse for the file named name. Every problem is reported, not
// only the first, each as NAME:LINE:COL: profile "x": what, so a user
// fixing a file sees them all and where they are. A JSON syntax error
// stops the reading there (nothing after it can be trusted).
func parse(name string, data []byte) (*Set, error) {
	var errs []error
	at := func(off int64, format string, a ...any) {
		line, col := lineCol(data, off)
		errs = append(errs, fmt.Errorf("%s:%d:%d: %s", name, line, col, fmt.Sprintf(format, a...)))
	}
	f, err := scanFile(data, at)
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			at(se.Offset, "JSON syntax error: %v", err)
		} else {
			at(0, "%v", err)
		}
		return nil, errors.Join(errs...)
	}
	s := Builtin()
	for _, e := range f.profiles {
		p, err := e.profile(at)
		if err != nil {
			at(e.offset, "profile %q: %v", e.name, err)
			continue
		}
		if p != nil {
			s.Put(*p)
		}
	}
	for _, e := range f.profiles {
		if err := s.checkFallbacks(e.name); err != nil {
			at(e.offset, "profile %q: %v", e.name, err)
		}
	}
	if f.defaultName != "" {
		if _, ok := s.profiles[f.defaultName]; !ok {
			at(f.defaultOffset, "default profile %q is not defined", f.defaultName)
		} else {
			s.Default = f.defaultName
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// scannedFile is a profiles file read token by token, so each profile
// keeps the offset of its value for the errors about it.
type scannedFile struct {
	defaultName   string
	defaultOffset int64
	profiles      []rawProfile
}

type rawProfile struct {
	name   string
	offset int64 // of the value's first byte
	raw    json.RawMessage
}

// scanFile reads the top-level object of a profiles file: "default" and
// "profiles" (their order free); an unknown key or a profile defined twice
// is reported with at, a syntax error returned.
func scanFile(data []byte, at func(int64, string, ...any)) (scannedFile, error) {
	var f scannedFile
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := expectDelim(dec, '{', "the file must be a JSON object"); err != nil {
		return f, err
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return f, err
		}
		off := valueOffset(data, dec.InputOffset())
		switch key {
		case "default":
			if err := dec.Decode(&f.defaultName); err != nil {
				if err := fieldError(err, "default", off, at); err != nil {
					return f, err
				}
			}
			f.defaultOffset = off
		case "profiles":
			if err := expectDelim(dec, '{', "profiles must be an object of profiles by name"); err != nil {
				return f, err
			}
			seen := map[string]bool{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return f, err
				}
				name, _ := tok.(string)
				e := rawProfile{name: name, offset: valueOffset(data, dec.InputOffset())}
				if err := dec.Decode(&e.raw); err != nil {
					return f, err
				}
				if seen[name] {
					at(e.offset, "profile %q is defined twice", name)
					continue
				}
				seen[name] = true
				f.profiles = append(f.profiles, e)
			}
			if _, err := dec.Token(); err != nil {
				return f, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return f, err
			}
			at(off, "unknown field %q (want default, profiles)", key)
		}
	}
	_, err := dec.Token()
	return f, err
}

// fieldError is a syntax error as is, anything else (a wrong type) at off.
func fieldError(err error, field string, off int64, at func(int64, string, ...any)) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return err
	}
	at(off, "%s: %v", field, err)
	return nil
}

func expectDelim(dec *json.Decoder, d json.Delim, msg string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return errors.New(msg)
	}
	return nil
}

// valueOffset is the offset of the value after a key ending at keyEnd: past
// the blanks and the colon.
func valueOffset(data []byte, keyEnd int64) int64 {
	i := keyEnd
	for i < int64(len(data)) && strings.IndexByte(" \t\r\n:", data[i]) >= 0 {
		i++
	}
	return i
}

// lineCol is the 1-based line and column of byte offset off in data.
func lineCol(data []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := 1 + bytes.Count(before, []byte("\n"))
	return line, int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
}

// profile reads one profile; a problem is reported with at and the
// profile skipped (nil), so every profile's problems are reported.
func (e rawProfile) profile(at func(int64, string, ...any)) (*Profile, error) {
	name := e.name
	var fp fileProfile
	dec := json.NewDecoder(bytes.NewReader(e.raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fp); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			at(e.offset+te.Offset, "profile %q: %v", name, err)
			return nil, nil
		}
		return nil, err // an unknown field: json names it
	}
	bad := false
	fail := func(err error) {
		at(e.offset, "profile %q: %v", name, err)
		bad = true
	}
	if !validName(name) {
		fail(errors.New("name must match [a-z0-9_-]+"))
	}
	p := Profile{Name: name, BaseURL: strings.TrimRight(fp.BaseURL, "/"), APIKeyEnv: fp.APIKeyEnv,
		DefaultModel: fp.DefaultModel, ContextWindow: fp.ContextWindow, MaxConcurrent: fp.MaxConcurrent, MaxRetries: DefaultMaxRetries,
		Models: fp.Models, API: fp.API, Headers: fp.Headers, Sandbox: fp.Sandbox, Prices: fp.Prices, Fallbacks: fp.Fallbacks}
	var err error
	if p.Aliases, p.AliasRules, err = aliasMaps(fp.Aliases); err != nil {
		fail(err)
	}
	if err := fp.Prices.check(); err != nil {
		fail(err)
	}
	if p.BaseURL == "" {
		fail(errors.New("baseUrl is required"))
	}
	if p.ContextWindow < 0 {
		fail(errors.New("contextWindow must not be negative"))
	}
	p.MaxOutputTokens = fp.MaxOutputTokens
	if p.MaxOutputTokens < 0 || p.MaxOutputTokens > contracts.MaxOutputTokensLimit {
		fail(fmt.Errorf("maxOutputTokens must be between 0 and %d", contracts.MaxOutputTokensLimit))
	}
	if fp.MaxResponseBytes < 0 {
		fail(errors.New("maxResponseBytes must not be negative"))
	}
	p.MaxResponseBytes = fp.MaxResponseBytes
	if fp.MaxRetries != nil {
		p.MaxRetries = *fp.MaxRetries
	}
	if p.AttemptTimeout, err = parseDuration(fp.AttemptTimeout); err != nil {
		fail(fmt.Errorf("attemptTimeout: %w", err))
	}
	if p.TurnTimeout, err = parseDuration(fp.TurnTimeout); err != nil {
		fail(fmt.Errorf("turnTimeout: %w", err))
	}
	p.Capabilities = Capabilities{RetainsTools: fp.Capabilities.RetainsTools, SupportsPreviousResponseID: true, ToolMode: fp.Capabilities.ToolMode,
		Reattach: fp.Capabilities.Reattach, Compact: fp.Capabilities.Compact, InputTokens: fp.Capabilities.InputTokens}
	if fp.Capabilities.SupportsPreviousResponseID != nil {
		p.Capabilities.SupportsPreviousResponseID = *fp.Capabilities.SupportsPreviousResponseID
	}
	switch p.Capabilities.ToolMode {
	case "", ToolModeNative, ToolModePrompt:
	default:
		fail(fmt.Errorf("toolMode must be native or prompt, got %q", p.Capabilities.ToolMode))
	}
	if err := p.parseAPI(fp); err != nil {
		fail(err)
	}
	if bad {
		return nil, nil
	}
	return &p, nil
}

// parseAPI checks the api field and the settings that depend on it: a Chat
// Completions backend keeps no server-side state, so a capability that
// needs some is a configuration error, not something to ignore quietly.
func (p *Profile) parseAPI(fp fileProfile) error {
	switch p.API {
	case "", APIResponses:
		if fp.Chat != nil {
			return fmt.Errorf(`"chat" quirks need "api": %q`, APIChatCompletions)
		}
		if fp.Anthropic != nil {
			return fmt.Errorf(`"anthropic" settings need "api": %q`, APIAnthropicMessages)
		}
		return nil
	case APIChatCompletions:
		if fp.Anthropic != nil {
			return fmt.Errorf(`"anthropic" settings need "api": %q`, APIAnthropicMessages)
		}
	case APIAnthropicMessages:
		if fp.Chat != nil {
			return fmt.Errorf(`"chat" quirks need "api": %q`, APIChatCompletions)
		}
		if fp.Anthropic != nil {
			p.Anthropic = *fp.Anthropic
		}
	default:
		return fmt.Errorf("api must be %q, %q or %q, got %q", APIResponses, APIChatCompletions, APIAnthropicMessages, p.API)
	}
	c := fp.Capabilities
	switch {
	case c.SupportsPreviousResponseID != nil && *c.SupportsPreviousResponseID:
		return fmt.Errorf("a %s backend has no previous_response_id (Aptix replays the conversation): drop supportsPreviousResponseId", p.API)
	case c.Reattach:
		return fmt.Errorf("a %s backend has no background mode to re-attach to: drop reattach", p.API)
	case c.Compact:
		return fmt.Errorf("a %s backend serves no /responses/compact: drop compact", p.API)
	case c.InputTokens:
		return fmt.Errorf("a %s backend serves no /responses/input_tokens (the gateway counts): drop inputTokens", p.API)
	case c.RetainsTools:
		return fmt.Errorf("a %s backend keeps no tools between requests: drop retainsTools", p.API)
	}
	p.Capabilities.SupportsPreviousResponseID = false
	if fp.Chat != nil {
		p.Chat = *fp.Chat
	}
	switch p.Chat.TokenLimitField {
	case "", TokenLimitMaxCompletionTokens, TokenLimitMaxTokens:
	default:
		return fmt.Errorf("chat.tokenLimitField must be %q or %q, got %q", TokenLimitMaxCompletionTokens, TokenLimitMaxTokens, p.Chat.TokenLimitField)
	}
	switch p.Chat.InstructionsRole {
	case "", "system":
	case "developer":
		if !p.Chat.DeveloperRole {
			return errors.New(`chat.instructionsRole "developer" needs chat.developerRole true`)
		}
	default:
		return fmt.Errorf(`chat.instructionsRole must be "system" or "developer", got %q`, p.Chat.InstructionsRole)
	}
	return nil
}

// Load reads a profiles file; an empty path yields the built-ins.
func Load(path string) (*Set, error) {
	if path == "" {
		return Builtin(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read profiles: %w", err)
	}
	return parse(path, data)
}

// FromEnv loads APTIX_PROFILES (a file path, optional), then applies
// APTIX_BACKEND (the default profile) and per-profile overrides
// APTIX_PROFILE_<NAME>_{BASE_URL,MODEL,PRICES,FALLBACKS,MAX_CONCURRENT,MAX_RETRIES,MAX_RESPONSE_BYTES,ATTEMPT_TIMEOUT,TURN_TIMEOUT}
// (NAME upper-cased, '-' as '_'; FALLBACKS a comma-separated list of profiles).
func FromEnv() (*Set, error) {
	s, err := Load(os.Getenv("APTIX_PROFILES"))
	if err != nil {
		return nil, err
	}
	for _, name := range s.Names() {
		p := s.profiles[name]
		key := "APTIX_PROFILE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_"
		if v := os.Getenv(key + "BASE_URL"); v != "" {
			p.BaseURL = strings.TrimRight(v, "/")
		}
		if v := os.Getenv(key + "MODEL"); v != "" {
			p.DefaultModel = v
		}
		if v := os.Getenv(key + "PRICES"); v != "" {
			prices, err := ParsePrices(v)
			if err != nil {
				return nil, fmt.Errorf("%sPRICES: %w", key, err)
			}
			p.Prices = prices
		}
		for suffix, dst := range map[string]*int{"MAX_CONCURRENT": &p.MaxConcurrent, "MAX_RETRIES": &p.MaxRetries} {
			if v := os.Getenv(key + suffix); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("%s%s: %w", key, suffix, err)
				}
				*dst = n
			}
		}
		if v, ok := os.LookupEnv(key + "FALLBACKS"); ok {
			p.Fallbacks = nil
			for _, fb := range strings.Split(v, ",") {
				if fb = strings.TrimSpace(fb); fb != "" {
					p.Fallbacks = append(p.Fallbacks, fb)
				}
			}
		}
		if v := os.Getenv(key + "MAX_RESPONSE_BYTES"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%sMAX_RESPONSE_BYTES: want a byte count, got %q", key, v)
			}
			p.MaxResponseBytes = n
		}
		for suffix, dst := range map[string]*time.Duration{"ATTEMPT_TIMEOUT": &p.AttemptTimeout, "TURN_TIMEOUT": &p.TurnTimeout} {
			if v := os.Getenv(key + suffix); v != "" {
				d, err := time.ParseDuration(v)
				if err != nil {
					return nil, fmt.Errorf("%s%s: %w", key, suffix, err)
				}
				*dst = d
			}
		}
		s.Put(p)
	}
	for _, name := range s.Names() {
		if err := s.checkFallbacks(name); err != nil {
			return nil, fmt.Errorf("profile %q: %w", name, err)
		}
	}
	if v := os.Getenv("APTIX_BACKEND"); v != "" {
		if _, err := s.Get(v); err != nil {
			return nil, fmt.Errorf("APTIX_BACKEND: %w", err)
		}
		s.Default = v
	}
	return s, nil
}

// checkFallbacks refuses a fallback naming no profile or the profile
// itself, or named twice: a typo would otherwise surface only when the
// backend fails.
func (s *Set) checkFallbacks(name string) error {
	p, ok := s.profiles[name]
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	for _, fb := range p.Fallbacks {
		switch _, known := s.profiles[fb]; {
		case fb == name:
			return fmt.Errorf("fallbacks: %q is the profile itself", fb)
		case !known:
			return fmt.Errorf("fallbacks: unknown profile %q (known: %s)", fb, strings.Join(s.Names(), ", "))
		case seen[fb]:
			return fmt.Errorf("fallbacks: %q is named twice", fb)
		}
		seen[fb] = true
	}
	return nil
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

func validName(n string) bool {
	if n == "" {
		return false
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
