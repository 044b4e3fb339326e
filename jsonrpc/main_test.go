package jsonrpc_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// integerID is the JSON grammar of an integer: MCP ids are strings or these.
var integerID = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// isValidID is the tests' own reading of the id rule, independent of the
// package's: a JSON string, or a JSON number without fraction or exponent,
// with nothing around it.
func isValidID(v []byte) bool {
	if len(v) == 0 || !json.Valid(v) || len(bytes.TrimSpace(v)) != len(v) {
		return false
	}
	if v[0] == '"' {
		var s string
		return json.Unmarshal(v, &s) == nil
	}
	return integerID.Match(v)
}

// raw is shorthand for a json.RawMessage in tables.
func raw(s string) json.RawMessage { return json.RawMessage(s) }
