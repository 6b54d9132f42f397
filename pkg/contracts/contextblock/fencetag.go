package contextblock

import "strings"

// fenceTags maps language names as detectors and clients spell them (go-enry,
// VS Code language ids, human names) to the fence tags AGN-002 §5 lists
// (csharp, typescript, scss, json, xml, …). Keys are lowercase.
var fenceTags = map[string]string{
	"c#":                 "csharp",
	"cs":                 "csharp",
	"csharp":             "csharp",
	"f#":                 "fsharp",
	"c++":                "cpp",
	"cpp":                "cpp",
	"objective-c":        "objectivec",
	"objective-c++":      "objectivecpp",
	"visual basic .net":  "vbnet",
	"vb.net":             "vbnet",
	"typescript":         "typescript",
	"ts":                 "typescript",
	"tsx":                "tsx",
	"typescriptreact":    "tsx",
	"javascript":         "javascript",
	"js":                 "javascript",
	"javascriptreact":    "jsx",
	"jsx":                "jsx",
	"go":                 "go",
	"golang":             "go",
	"python":             "python",
	"py":                 "python",
	"shell":              "bash",
	"bash":               "bash",
	"sh":                 "bash",
	"shellscript":        "bash",
	"powershell":         "powershell",
	"markdown":           "markdown",
	"md":                 "markdown",
	"json":               "json",
	"jsonc":              "jsonc",
	"json with comments": "jsonc",
	"xml":                "xml",
	"html":               "html",
	"css":                "css",
	"scss":               "scss",
	"sass":               "sass",
	"less":               "less",
	"yaml":               "yaml",
	"yml":                "yaml",
	"toml":               "toml",
	"sql":                "sql",
	"tsql":               "sql",
	"dockerfile":         "dockerfile",
	"makefile":           "makefile",
	"rust":               "rust",
	"java":               "java",
	"kotlin":             "kotlin",
	"ruby":               "ruby",
	"php":                "php",
	"swift":              "swift",
	"protocol buffer":    "protobuf",
	"protobuf":           "protobuf",
	"text":               "text",
	"plain text":         "text",
	"plaintext":          "text",
}

// FenceTag normalizes a language name to a fence tag. Unknown names are
// lowercased with anything but [a-z0-9_+.-] removed (spaces become '-'), so
// the tag can never contain a backtick or break the fence line; an empty
// result is "text".
func FenceTag(language string) string {
	l := strings.ToLower(strings.TrimSpace(language))
	if t, ok := fenceTags[l]; ok {
		return t
	}
	var sb strings.Builder
	for _, r := range l {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '+', r == '.', r == '-':
			sb.WriteRune(r)
		case r == ' ':
			sb.WriteByte('-')
		}
	}
	if sb.Len() == 0 {
		return "text"
	}
	return sb.String()
}
