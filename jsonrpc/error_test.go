package jsonrpc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

func TestErrorResponse(t *testing.T) {
	cases := []struct {
		name string
		err  *jsonrpc.Error
		id   json.RawMessage
		want map[string]any
	}{
		{
			"invalid request with an id",
			&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: x", Reason: jsonrpc.ReasonInvalidRequest, Server: "memory"},
			raw("7"),
			map[string]any{"jsonrpc": "2.0", "id": 7.0, "error": map[string]any{
				"code": -32600.0, "message": "invalid request: x",
				"data": map[string]any{"reason": "invalid_request", "server": "memory"},
			}},
		},
		{
			"parse error, nil id is null",
			&jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error", Reason: jsonrpc.ReasonParseError},
			nil,
			map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
				"code": -32700.0, "message": "parse error",
				"data": map[string]any{"reason": "parse_error", "server": ""},
			}},
		},
		{
			"empty id is null",
			&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "too many sessions", Reason: jsonrpc.ReasonTooManySessions, Server: "s"},
			raw(""),
			map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
				"code": -32603.0, "message": "too many sessions",
				"data": map[string]any{"reason": "too_many_sessions", "server": "s"},
			}},
		},
		{
			"extra members",
			&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "message too large", Reason: jsonrpc.ReasonTooLarge, Server: "fs",
				Extra: map[string]any{"size": 2000, "limit": 1024, "nested": map[string]any{"a": []int{1}}}},
			raw(`"abc"`),
			map[string]any{"jsonrpc": "2.0", "id": "abc", "error": map[string]any{
				"code": -32600.0, "message": "message too large",
				"data": map[string]any{"reason": "message_too_large", "server": "fs", "size": 2000.0, "limit": 1024.0, "nested": map[string]any{"a": []any{1.0}}},
			}},
		},
		{
			"extra cannot override reason or server",
			&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "m", Reason: jsonrpc.ReasonTimeout, Server: "real",
				Extra: map[string]any{"reason": "fake", "server": "fake", "retry": true}},
			raw("1"),
			map[string]any{"jsonrpc": "2.0", "id": 1.0, "error": map[string]any{
				"code": -32603.0, "message": "m",
				"data": map[string]any{"reason": "timeout", "server": "real", "retry": true},
			}},
		},
		{
			"unencodable extra is dropped, the answer stays",
			&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "m", Reason: jsonrpc.ReasonInternal, Server: "s",
				Extra: map[string]any{"f": func() {}, "nan": math.NaN()}},
			raw("2"),
			map[string]any{"jsonrpc": "2.0", "id": 2.0, "error": map[string]any{
				"code": -32603.0, "message": "m",
				"data": map[string]any{"reason": "internal_error", "server": "s"},
			}},
		},
		{
			"message needing escapes",
			&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "no \"x\"\n<tag> é", Reason: jsonrpc.ReasonNotSupported, Server: "a\"b"},
			raw(`"é"`),
			map[string]any{"jsonrpc": "2.0", "id": "é", "error": map[string]any{
				"code": -32601.0, "message": "no \"x\"\n<tag> é",
				"data": map[string]any{"reason": "not_supported", "server": "a\"b"},
			}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := c.err.Response(c.id)
			require.True(t, json.Valid(out), "Response is not JSON: %s", out)
			var got map[string]any
			require.NoError(t, json.Unmarshal(out, &got))
			assert.Equal(t, c.want, got, "Response(%s) of %+v", c.id, c.err)

			// It is a well-formed error response, and its id is the bytes given.
			m, err := jsonrpc.Parse(out)
			require.NoError(t, err, "Parse(%s)", out)
			wantID := c.id
			if len(wantID) == 0 {
				wantID = raw("null")
			}
			assert.Equal(t, envelope{Kind: jsonrpc.KindError, ID: wantID, Error: m.Error}, view(m), "Parse(%s)", out)
		})
	}
}

func TestErrorResponseKeepsIDBytes(t *testing.T) {
	for _, id := range idCases() {
		out := (&jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "m", Reason: jsonrpc.ReasonDuplicateID}).Response(raw(id))
		m, err := jsonrpc.Parse(out)
		require.NoError(t, err, "Parse(%s)", out)
		assert.Equal(t, raw(id), m.ID, "id of the response to %s", id)
	}
}

func TestErrorIs(t *testing.T) {
	invalid := &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: x", Reason: jsonrpc.ReasonInvalidRequest}
	tooLarge := &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "too large", Reason: jsonrpc.ReasonTooLarge}
	cases := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"itself", invalid, invalid, true},
		{"same code and reason, other message", invalid, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Reason: jsonrpc.ReasonInvalidRequest}, true},
		{"same code and reason, other server", invalid.WithServer("a"), invalid.WithServer("b"), true},
		{"same code, other reason", invalid, tooLarge, false},
		{"same code, no reason", invalid, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest}, false},
		{"other code, same reason", invalid, &jsonrpc.Error{Code: jsonrpc.CodeParseError, Reason: jsonrpc.ReasonInvalidRequest}, false},
		{"wrapped", fmt.Errorf("session 3: %w", invalid), &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Reason: jsonrpc.ReasonInvalidRequest}, true},
		{"joined", errors.Join(errors.New("x"), tooLarge), &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Reason: jsonrpc.ReasonTooLarge}, true},
		{"not an *Error target", invalid, errors.New("invalid request: x (-32600 invalid_request)"), false},
		{"from Parse", parseErr(`[]`), &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Reason: jsonrpc.ReasonInvalidRequest}, true},
		{"parse error from Parse", parseErr(`{`), &jsonrpc.Error{Code: jsonrpc.CodeParseError, Reason: jsonrpc.ReasonParseError}, true},
		{"parse error is not invalid request", parseErr(`{`), invalid, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, errors.Is(c.err, c.target), "errors.Is(%v, %v)", c.err, c.target)
		})
	}
}

func parseErr(frame string) error {
	_, err := jsonrpc.Parse([]byte(frame))
	return err
}

func TestErrorAsAndString(t *testing.T) {
	base := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server exited", Reason: jsonrpc.ReasonUpstreamExited}
	named := base.WithServer("memory")

	assert.Equal(t, "server exited (-32603 upstream_exited)", base.Error(), "Error() without a server")
	assert.Equal(t, "memory: server exited (-32603 upstream_exited)", named.Error(), "Error() with a server")
	assert.Equal(t, "", base.Server, "WithServer must not change the original")
	assert.Equal(t, jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server exited", Reason: jsonrpc.ReasonUpstreamExited, Server: "memory"}, *named, "WithServer copy")

	var e *jsonrpc.Error
	require.ErrorAs(t, fmt.Errorf("restart: %w", named), &e)
	assert.Equal(t, named, e, "errors.As through a wrap")
}

// TestReasons pins the data.reason strings: tests outside this repository
// match on them (DESIGN.md's error table).
func TestReasons(t *testing.T) {
	got := []string{
		jsonrpc.ReasonParseError, jsonrpc.ReasonInvalidRequest, jsonrpc.ReasonTooLarge, jsonrpc.ReasonDuplicateID,
		jsonrpc.ReasonNotInitialized, jsonrpc.ReasonInternal, jsonrpc.ReasonUnknownTask,
		jsonrpc.ReasonInvalidLevel, jsonrpc.ReasonTooManySessions, jsonrpc.ReasonBatchNotSupported, jsonrpc.ReasonUpstreamExited,
		jsonrpc.ReasonUpstreamStalled, jsonrpc.ReasonUpstreamUnavailable, jsonrpc.ReasonTimeout, jsonrpc.ReasonNotSupported,
		jsonrpc.ReasonMethodNotFound, jsonrpc.ReasonNoClient, jsonrpc.ReasonClientGone, jsonrpc.ReasonClientTimeout,
		jsonrpc.ReasonForbidden, jsonrpc.ReasonUnauthorized, jsonrpc.ReasonNoSuchServer, jsonrpc.ReasonNoSession,
		jsonrpc.ReasonShuttingDown, jsonrpc.ReasonHeaderMismatch, jsonrpc.ReasonTooManyStreams,
	}
	want := []string{
		"parse_error", "invalid_request", "message_too_large", "duplicate_id",
		"not_initialized", "internal_error", "unknown_task",
		"invalid_level", "too_many_sessions", "batch_not_supported", "upstream_exited",
		"upstream_stalled", "upstream_unavailable", "timeout", "not_supported",
		"method_not_found", "no_client", "client_gone", "client_timeout",
		"forbidden", "unauthorized", "no_such_server", "no_session",
		"shutting_down", "header_mismatch", "too_many_streams",
	}
	assert.Equal(t, want, got, "Reason constants")
	assert.Equal(t, []int{-32700, -32600, -32601, -32602, -32603},
		[]int{jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams, jsonrpc.CodeInternalError},
		"Code constants")
}
