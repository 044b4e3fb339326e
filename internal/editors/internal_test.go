package editors

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/config"
)

// TestImportStripJSONC checks that comments and trailing commas go, and
// that strings are left alone, whatever they hold.
func TestImportStripJSONC(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // equivalent JSON
	}{
		{"plain JSON", `{"a": [1, 2], "b": {}}`, `{"a": [1, 2], "b": {}}`},
		{"line comments", "// top\n{\"a\": 1 // one\n}\n// end", `{"a": 1}`},
		{"block comments", "/* a\n b */{\"a\": /* x */ 1}/**/", `{"a": 1}`},
		{"trailing commas", `{"a": [1, 2, ], "b": {"c": 3,},}`, `{"a": [1, 2], "b": {"c": 3}}`},
		{"trailing comma then comment", "{\"a\": 1, // last\n}", `{"a": 1}`},
		{"comment markers in strings", `{"u": "http://x/*y*/", "v": "a // b", "w": ",]"}`, `{"u": "http://x/*y*/", "v": "a // b", "w": ",]"}`},
		{"escaped quotes in strings", `{"q": "say \"// hi\", ", "r": "\\", "s": 1,}`, `{"q": "say \"// hi\", ", "r": "\\", "s": 1}`},
		{"byte order mark", "\xef\xbb\xbf{\"a\": 1}", `{"a": 1}`},
		{"CRLF line comment", "{\"a\": 1, // x\r\n\"b\": 2}", `{"a": 1, "b": 2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := stripJSONC([]byte(tt.in))
			assert.Len(t, got, len(tt.in), "offsets must not move for %q", tt.in)
			assert.JSONEq(t, tt.want, string(got), "input %q", tt.in)
			assert.Equal(t, strings.Count(tt.in, "\n"), bytes.Count(got, []byte("\n")), "lines must not move for %q", tt.in)
		})
	}
}

// TestImportTOMLString checks the quoting of values against go-toml.
func TestImportTOMLString(t *testing.T) {
	for _, s := range []string{"", "plain", `"quoted"`, `back\slash`, "tab\tnew\nline\r", "bell\a del\x7f nul\x00", "ünïcødé ☃ 𝄞", "''' and \"\"\""} {
		doc := "k = " + tomlString(s) + "\n" + tomlKey(s) + " = 1\n"
		var got map[string]any
		if s == "k" || s == "" {
			doc = "k = " + tomlString(s) + "\n"
		}
		require.NoError(t, toml.Unmarshal([]byte(doc), &got), "document:\n%s", doc)
		assert.Equal(t, s, got["k"], "document:\n%s", doc)
		if s != "" {
			assert.Equal(t, int64(1), got[s], "document:\n%s", doc)
		}
	}
}

// TestImportSanitizeServerName checks the renaming of names mcpmux refuses.
func TestImportSanitizeServerName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"memory", "memory"},
		{"a.b_c-d", "a.b_c-d"},
		{"my server", "my-server"},
		{"github (work)", "github-work"},
		{"@scope/pkg", "scope-pkg"},
		{"_private", "private"},
		{"café", "caf"},
		{"a  /  b", "a-b"},
		{"日本", "server"},
		{"", "server"},
		{strings.Repeat("x", 70) + " y", strings.Repeat("x", 64)},
	}
	for _, tt := range tests {
		got := sanitizeServerName(tt.in)
		assert.Equal(t, tt.want, got, "sanitizeServerName(%q)", tt.in)
		assert.True(t, config.ValidServerName(got), "sanitizeServerName(%q) = %q is not valid", tt.in, got)
	}
}
