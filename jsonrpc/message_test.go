package jsonrpc_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// envelope is what a test compares of a parsed Message.
type envelope struct {
	Kind   jsonrpc.Kind
	Method string
	ID     json.RawMessage
	Params json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage
}

func view(m *jsonrpc.Message) envelope {
	return envelope{m.Kind, m.Method, m.ID, m.Params, m.Result, m.Error}
}

type validCase struct {
	name  string
	frame string
	want  envelope
}

func validCases() []validCase {
	return []validCase{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
			envelope{Kind: jsonrpc.KindRequest, Method: "tools/call", ID: raw("1"), Params: raw(`{"name":"x"}`)}},
		{"request with array params", `{"jsonrpc":"2.0","id":"a","method":"m","params":[1,2]}`,
			envelope{Kind: jsonrpc.KindRequest, Method: "m", ID: raw(`"a"`), Params: raw(`[1,2]`)}},
		{"request without params", `{"jsonrpc":"2.0","id":0,"method":"ping"}`,
			envelope{Kind: jsonrpc.KindRequest, Method: "ping", ID: raw("0")}},
		{"request with empty params", `{"jsonrpc":"2.0","id":0,"method":"ping","params":{}}`,
			envelope{Kind: jsonrpc.KindRequest, Method: "ping", ID: raw("0"), Params: raw("{}")}},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			envelope{Kind: jsonrpc.KindNotification, Method: "notifications/initialized"}},
		{"notification with params", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":0.5}}`,
			envelope{Kind: jsonrpc.KindNotification, Method: "notifications/progress", Params: raw(`{"progressToken":1,"progress":0.5}`)}},
		{"result", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}`,
			envelope{Kind: jsonrpc.KindResult, ID: raw("7"), Result: raw(`{"content":[{"type":"text","text":"hi"}]}`)}},
		{"null result", `{"jsonrpc":"2.0","id":7,"result":null}`,
			envelope{Kind: jsonrpc.KindResult, ID: raw("7"), Result: raw("null")}},
		{"scalar result", `{"jsonrpc":"2.0","id":"x","result":"ok"}`,
			envelope{Kind: jsonrpc.KindResult, ID: raw(`"x"`), Result: raw(`"ok"`)}},
		{"error", `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"nope"}}`,
			envelope{Kind: jsonrpc.KindError, ID: raw("7"), Error: raw(`{"code":-32601,"message":"nope"}`)}},
		{"error with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
			envelope{Kind: jsonrpc.KindError, ID: raw("null"), Error: raw(`{"code":-32700,"message":"parse error"}`)}},
		{"members in reverse order", `{"params":[],"method":"m","id":2,"jsonrpc":"2.0"}`,
			envelope{Kind: jsonrpc.KindRequest, Method: "m", ID: raw("2"), Params: raw("[]")}},
		{"unknown members allowed", `{"jsonrpc":"2.0","x":1,"id":3,"_meta":{"id":9},"method":"m","ids":[1],"idx":"y","":0}`,
			envelope{Kind: jsonrpc.KindRequest, Method: "m", ID: raw("3")}},
		{"unknown members on a response", `{"jsonrpc":"2.0","id":3,"result":{},"extra":{"error":1,"method":"x"}}`,
			envelope{Kind: jsonrpc.KindResult, ID: raw("3"), Result: raw("{}")}},
		{"whitespace anywhere", " \t\r\n{ \"jsonrpc\" :\n\"2.0\" ,\t\"id\"\r\n:\n 1 , \"method\" : \"m\" , \"params\" : [ 1 , { } ] }\r\n\t ",
			envelope{Kind: jsonrpc.KindRequest, Method: "m", ID: raw("1"), Params: raw("[ 1 , { } ]")}},
		{"escaped jsonrpc version", `{"jsonrpc":"2\u002e0","method":"m"}`,
			envelope{Kind: jsonrpc.KindNotification, Method: "m"}},
		{"escaped method", `{"jsonrpc":"2.0","method":"tools\/call\u0021"}`,
			envelope{Kind: jsonrpc.KindNotification, Method: "tools/call!"}},
		{"unicode method", `{"jsonrpc":"2.0","method":"日本/é"}`,
			envelope{Kind: jsonrpc.KindNotification, Method: "日本/é"}},
		{"empty method", `{"jsonrpc":"2.0","method":""}`,
			envelope{Kind: jsonrpc.KindNotification}},
		{"escaped spelling of id", `{"jsonrpc":"2.0","\u0069d":5,"method":"m"}`,
			envelope{Kind: jsonrpc.KindRequest, Method: "m", ID: raw("5")}},
		{"escaped spelling of every reserved key", `{"\u006asonrpc":"2.0","\u0069\u0064":5,"m\u0065thod":"m","p\u0061rams":{}}`,
			envelope{Kind: jsonrpc.KindRequest, Method: "m", ID: raw("5"), Params: raw("{}")}},
		{"strings with brackets and escapes", `{"jsonrpc":"2.0","id":"}\"]","method":"m","params":{"a":"\\\"{[","b":"\\"}}`,
			envelope{Kind: jsonrpc.KindRequest, Method: "m", ID: raw(`"}\"]"`), Params: raw(`{"a":"\\\"{[","b":"\\"}`)}},
		{"lone surrogate escape is valid JSON", `{"jsonrpc":"2.0","method":"\ud800"}`,
			envelope{Kind: jsonrpc.KindNotification, Method: "\ufffd"}},
		{"params at json.Valid's maximum depth", `{"jsonrpc":"2.0","method":"m","params":` + nest(9999) + `}`,
			envelope{Kind: jsonrpc.KindNotification, Method: "m", Params: raw(nest(9999))}},
		{"deep params", `{"jsonrpc":"2.0","method":"m","params":` + nest(5000) + `}`,
			envelope{Kind: jsonrpc.KindNotification, Method: "m", Params: raw(nest(5000))}},
	}
}

// nest returns n nested arrays.
func nest(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

func TestParseValid(t *testing.T) {
	for _, c := range validCases() {
		t.Run(c.name, func(t *testing.T) {
			m, err := jsonrpc.Parse([]byte(c.frame))
			require.NoError(t, err, "frame %.200s", c.frame)
			assert.Equal(t, c.want, view(m), "frame %.200s", c.frame)
			assert.Equal(t, c.frame, string(m.Frame), "Frame of %.200s", c.frame)
			span, ok := m.IDSpan()
			assert.Equal(t, c.want.ID != nil, ok, "IDSpan ok of %.200s", c.frame)
			if ok {
				assert.Equal(t, string(c.want.ID), c.frame[span.Start:span.End], "IDSpan of %.200s", c.frame)
			}
		})
	}
}

// ids are kept byte for byte: "1" and 1 differ, big integers stay intact.
func idCases() []string {
	return []string{
		`1`, `"1"`, `-5`, `0`, `-0`, `9007199254740993`, `123456789012345678901234567890`,
		`-123456789012345678901234567890`, `""`, `"a\"b"`, `"\u00e9"`, `"é"`, `"日本"`,
		`"\ud83d\ude00"`, `"😀"`, `"a\\"`, `"\/"`, `" "`, `"\u0000"`, `"{}"`, `"null"`,
	}
}

func TestParseIDs(t *testing.T) {
	for _, id := range idCases() {
		forms := map[string]struct {
			frame string
			kind  jsonrpc.Kind
		}{
			"request": {`{"jsonrpc":"2.0","id":` + id + `,"method":"m"}`, jsonrpc.KindRequest},
			"spaced":  {`{"jsonrpc":"2.0","id":  ` + id + "\t ,\"method\":\"m\"}", jsonrpc.KindRequest},
			"last":    {`{"jsonrpc":"2.0","method":"m","id":` + id + `}`, jsonrpc.KindRequest},
			"result":  {`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`, jsonrpc.KindResult},
			"error":   {`{"id":` + id + `,"jsonrpc":"2.0","error":{"code":1,"message":""}}`, jsonrpc.KindError},
		}
		for name, f := range forms {
			t.Run(id+"/"+name, func(t *testing.T) {
				m, err := jsonrpc.Parse([]byte(f.frame))
				require.NoError(t, err, "frame %s", f.frame)
				assert.Equal(t, f.kind, m.Kind, "kind of %s", f.frame)
				assert.Equal(t, raw(id), m.ID, "id of %s", f.frame)
			})
		}
		t.Run(id+"/WithID", func(t *testing.T) {
			orig := `{"jsonrpc":"2.0","id":17,"method":"m","params":{"id":17}}`
			m, err := jsonrpc.Parse([]byte(orig))
			require.NoError(t, err)
			out := m.WithID([]byte(id))
			assert.Equal(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"m","params":{"id":17}}`, string(out), "WithID(%s)", id)
			assert.Equal(t, orig, string(m.Frame), "the original after WithID(%s)", id)
			m2, err := jsonrpc.Parse(out)
			require.NoError(t, err, "WithID(%s) made %s", id, out)
			assert.Equal(t, raw(id), m2.ID, "id after WithID(%s)", id)
		})
	}
}

// outcome is what a test compares of a failed Parse.
type outcome struct {
	Code   int
	Reason string
	ID     json.RawMessage
	Kind   jsonrpc.Kind
}

type invalidCase struct {
	name  string
	frame string
	code  int             // CodeParseError or CodeInvalidRequest
	id    json.RawMessage // the id that must be reported
}

func invalidCases() []invalidCase {
	const (
		pe = jsonrpc.CodeParseError
		ir = jsonrpc.CodeInvalidRequest
	)
	one := raw("1")
	return []invalidCase{
		// Not UTF-8 JSON: -32700, id null even when one is visible.
		{"empty", ``, pe, nil},
		{"whitespace only", " \t\r\n", pe, nil},
		{"truncated object", `{"jsonrpc":"2.0","id":1,"method":"m"`, pe, nil},
		{"truncated string", `{"jsonrpc":"2.0","id":1,"method":"m`, pe, nil},
		{"truncated after a colon", `{"jsonrpc":"2.0","id":`, pe, nil},
		{"not JSON", `hello`, pe, nil},
		{"single quotes", `{'jsonrpc':'2.0','id':1,'method':'m'}`, pe, nil},
		{"unquoted key", `{jsonrpc:"2.0",id:1,method:"m"}`, pe, nil},
		{"trailing comma", `{"jsonrpc":"2.0","id":1,"method":"m",}`, pe, nil},
		{"missing comma", `{"jsonrpc":"2.0" "id":1,"method":"m"}`, pe, nil},
		{"two objects", `{"jsonrpc":"2.0","id":1,"method":"m"}{"jsonrpc":"2.0","id":2,"method":"m"}`, pe, nil},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"m"} x`, pe, nil},
		{"invalid UTF-8 in a string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\xff\"}", pe, nil},
		{"invalid UTF-8 in a name", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"\xfe\":1}", pe, nil},
		{"invalid UTF-8 in params", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xc3\x28\"}}", pe, nil},
		{"overlong UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xc0\xaf\"}", pe, nil},
		{"UTF-8 encoded surrogate", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xed\xa0\x80\"}", pe, nil},
		{"truncated UTF-8 sequence", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xe6\x97\"}", pe, nil},
		{"NUL raw in a string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\x00\"}", pe, nil},
		{"NUL raw outside strings", "{\"jsonrpc\":\"2.0\",\"id\":1,\x00\"method\":\"m\"}", pe, nil},
		{"control character raw in a string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\x01\"}", pe, nil},
		{"newline raw in a string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\nn\"}", pe, nil},
		{"invalid escape", `{"jsonrpc":"2.0","id":1,"method":"\x41"}`, pe, nil},
		{"short unicode escape", `{"jsonrpc":"2.0","id":1,"method":"\u12"}`, pe, nil},
		{"NaN", `{"jsonrpc":"2.0","id":NaN,"method":"m"}`, pe, nil},
		{"leading zero", `{"jsonrpc":"2.0","id":01,"method":"m"}`, pe, nil},
		{"plus sign", `{"jsonrpc":"2.0","id":+1,"method":"m"}`, pe, nil},
		{"hex number", `{"jsonrpc":"2.0","id":0x1,"method":"m"}`, pe, nil},
		{"byte order mark", "\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}", pe, nil},
		{"comment", `{"jsonrpc":"2.0","id":1,"method":"m"} // hi`, pe, nil},
		{"nesting over 10000 levels", `{"jsonrpc":"2.0","id":1,"method":"m","params":` + nest(10000) + `}`, pe, nil},
		{"nesting of a million levels", nest(1000000), pe, nil},

		// Valid JSON, not a JSON-RPC object: -32600.
		{"bare number", `1`, ir, nil},
		{"bare string", `"x"`, ir, nil},
		{"bare true", `true`, ir, nil},
		{"bare null", `null`, ir, nil},
		{"empty array", `[]`, ir, nil},
		{"array of numbers", `[1,2]`, ir, nil},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, ir, nil},
		{"empty object", `{}`, ir, nil},
		{"wrong jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"m"}`, ir, one},
		{"jsonrpc a number", `{"jsonrpc":2,"id":1,"method":"m"}`, ir, one},
		{"jsonrpc 2.0 a number", `{"jsonrpc":2.0,"id":1,"method":"m"}`, ir, one},
		{"jsonrpc null", `{"jsonrpc":null,"id":1,"method":"m"}`, ir, one},
		{"jsonrpc with spaces", `{"jsonrpc":" 2.0","id":1,"method":"m"}`, ir, one},
		{"jsonrpc missing", `{"id":1,"method":"m"}`, ir, one},
		{"method missing", `{"jsonrpc":"2.0","id":1}`, ir, one},
		{"method missing, params present", `{"jsonrpc":"2.0","id":1,"params":{}}`, ir, one},
		{"method a number", `{"jsonrpc":"2.0","id":1,"method":1}`, ir, one},
		{"method null", `{"jsonrpc":"2.0","id":1,"method":null}`, ir, one},
		{"method an object", `{"jsonrpc":"2.0","id":1,"method":{"name":"m"}}`, ir, one},
		{"method an array", `{"jsonrpc":"2.0","id":1,"method":["m"]}`, ir, one},
		{"params a string", `{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}`, ir, one},
		{"params a number", `{"jsonrpc":"2.0","id":1,"method":"m","params":1}`, ir, one},
		{"params null", `{"jsonrpc":"2.0","id":1,"method":"m","params":null}`, ir, one},
		{"params true", `{"jsonrpc":"2.0","id":1,"method":"m","params":true}`, ir, one},
		{"id null on a request", `{"jsonrpc":"2.0","id":null,"method":"m"}`, ir, nil},
		{"id an object", `{"jsonrpc":"2.0","id":{"a":1},"method":"m"}`, ir, nil},
		{"id an array", `{"jsonrpc":"2.0","id":[1],"method":"m"}`, ir, nil},
		{"id a bool", `{"jsonrpc":"2.0","id":true,"method":"m"}`, ir, nil},
		{"id a float", `{"jsonrpc":"2.0","id":1.5,"method":"m"}`, ir, nil},
		{"id a whole float", `{"jsonrpc":"2.0","id":1.0,"method":"m"}`, ir, nil},
		{"id an exponent", `{"jsonrpc":"2.0","id":1e3,"method":"m"}`, ir, nil},
		{"id a capital exponent", `{"jsonrpc":"2.0","id":-1E+2,"method":"m"}`, ir, nil},
		{"id a float on a result", `{"jsonrpc":"2.0","id":2.5,"result":{}}`, ir, nil},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"method":"m","id":2}`, ir, nil},
		{"duplicate id, same value", `{"jsonrpc":"2.0","id":1,"method":"m","id":1}`, ir, nil},
		{"duplicate id on a response", `{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`, ir, nil},
		{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`, ir, one},
		{"duplicate method before the id", `{"jsonrpc":"2.0","method":"a","method":"b","id":1}`, ir, one},
		{"duplicate jsonrpc", `{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"m"}`, ir, one},
		{"duplicate params", `{"jsonrpc":"2.0","id":1,"method":"m","params":{},"params":[]}`, ir, one},
		{"duplicate result", `{"jsonrpc":"2.0","id":1,"result":1,"result":2}`, ir, one},
		{"duplicate error", `{"jsonrpc":"2.0","id":1,"error":{},"error":{}}`, ir, one},
		{"case variant ID", `{"jsonrpc":"2.0","ID":1,"method":"m"}`, ir, nil},
		{"case variant Id beside id", `{"jsonrpc":"2.0","Id":2,"id":1,"method":"m"}`, ir, one},
		{"case variant iD after id", `{"jsonrpc":"2.0","id":1,"method":"m","iD":2}`, ir, one},
		{"case variant Method", `{"jsonrpc":"2.0","id":1,"Method":"m"}`, ir, one},
		{"case variant Method before the id", `{"jsonrpc":"2.0","Method":"m","method":"m","id":1}`, ir, one},
		{"case variant JSONRPC", `{"JSONRPC":"2.0","id":1,"method":"m"}`, ir, one},
		{"case variant JsonRpc beside jsonrpc", `{"jsonrpc":"2.0","JsonRpc":"2.0","id":1,"method":"m"}`, ir, one},
		{"case variant Params", `{"jsonrpc":"2.0","id":1,"method":"m","Params":{}}`, ir, one},
		{"case variant RESULT", `{"jsonrpc":"2.0","id":1,"RESULT":{}}`, ir, one},
		{"case variant Error", `{"jsonrpc":"2.0","id":1,"Error":{}}`, ir, one},
		// encoding/json folds the long s (U+017F) to "s", so "paramſ" is params to a Go server.
		{"case variant with a long s", `{"jsonrpc":"2.0","id":1,"method":"m","paramſ":{}}`, ir, one},
		{"escaped case variant", `{"jsonrpc":"2.0","id":1,"method":"m","\u0050arams":{}}`, ir, one},
		{"escaped spelling of id beside id", `{"jsonrpc":"2.0","id":1,"\u0069d":2,"method":"m"}`, ir, nil},
		{"escaped spelling of method beside method", `{"jsonrpc":"2.0","id":1,"method":"a","\u006dethod":"b"}`, ir, one},
		{"result and error together", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}`, ir, one},
		{"method with result", `{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`, ir, one},
		{"method with error", `{"jsonrpc":"2.0","id":1,"method":"m","error":{"code":1,"message":""}}`, ir, one},
		{"notification with result", `{"jsonrpc":"2.0","method":"m","result":{}}`, ir, nil},
		{"params on a response", `{"jsonrpc":"2.0","id":1,"result":{},"params":{}}`, ir, one},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, ir, nil},
		{"error response without id", `{"jsonrpc":"2.0","error":{"code":1,"message":""}}`, ir, nil},
		{"result with null id", `{"jsonrpc":"2.0","id":null,"result":{}}`, ir, nil},
		{"error a string", `{"jsonrpc":"2.0","id":1,"error":"boom"}`, ir, one},
		{"error a number", `{"jsonrpc":"2.0","id":1,"error":-32600}`, ir, one},
		{"error null", `{"jsonrpc":"2.0","id":1,"error":null}`, ir, one},
		{"error an array", `{"jsonrpc":"2.0","id":1,"error":[]}`, ir, one},
		{"deep nesting, wrong version", `{"jsonrpc":"1.0","id":1,"method":"m","params":` + nest(9000) + `}`, ir, one},
		{"string id, problem first", `{"method":1,"jsonrpc":"2.0","id":"abc"}`, ir, raw(`"abc"`)},
		{"big id, problem first", `{"jsonrpc":"2.0","params":1,"method":"m","id":123456789012345678901234567890}`, ir, raw(`123456789012345678901234567890`)},
		// An error response with a null id reports "null", which answers the same as nil.
		{"null id on an invalid error response", `{"jsonrpc":"1.0","id":null,"error":{}}`, ir, raw("null")},
	}
}

func TestParseInvalid(t *testing.T) {
	cases := invalidCases()
	require.GreaterOrEqual(t, len(cases), 30)
	reasons := map[int]string{jsonrpc.CodeParseError: jsonrpc.ReasonParseError, jsonrpc.CodeInvalidRequest: jsonrpc.ReasonInvalidRequest}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := jsonrpc.Parse([]byte(c.frame))
			require.Error(t, err, "frame %.200q", c.frame)
			require.NotNil(t, m, "the message beside the error for %.200q", c.frame)
			var e *jsonrpc.Error
			require.ErrorAs(t, err, &e, "frame %.200q", c.frame)
			want := outcome{c.code, reasons[c.code], c.id, jsonrpc.KindInvalid}
			assert.Equal(t, want, outcome{e.Code, e.Reason, m.ID, m.Kind}, "frame %.200q: %v", c.frame, err)
			assert.Equal(t, c.frame, string(m.Frame), "Frame of %.200q", c.frame)
			if c.id != nil {
				span, ok := m.IDSpan()
				require.True(t, ok, "IDSpan of %.200q", c.frame)
				assert.Equal(t, string(c.id), c.frame[span.Start:span.End], "IDSpan of %.200q", c.frame)
			}
		})
	}
}

func TestParseMessages(t *testing.T) {
	cases := []struct {
		frame string
		want  string
	}{
		{`{"jsonrpc":"2.0","id":1,"Method":"m"}`, `invalid request: member "Method" is a miscased "method" (-32600 invalid_request)`},
		{`{"jsonrpc":"2.0","id":1,"id":1,"Method":"m"}`, `invalid request: member "id" appears twice (-32600 invalid_request)`},
		{`{"jsonrpc":"2.0","id":1.5,"Method":"m"}`, `invalid request: member "Method" is a miscased "method" (-32600 invalid_request)`},
		{`{"jsonrpc":"2.0","id":1.5,"method":"m"}`, `invalid request: id must be a string or an integer (-32600 invalid_request)`},
		{`[]`, `invalid request: a batch is not allowed here (-32600 invalid_request)`},
		{`x`, `parse error: not JSON (-32700 parse_error)`},
		{`junk on stdout`, `parse error: not JSON (-32700 parse_error)`},
		{"{\"a\":\"\xff\"}", `parse error: not valid UTF-8 (-32700 parse_error)`},
	}
	for _, c := range cases {
		_, err := jsonrpc.Parse([]byte(c.frame))
		require.Error(t, err, c.frame)
		assert.Equal(t, c.want, err.Error(), "frame %s", c.frame)
	}
}

// TestParseDoesNotModify checks that Parse and the rewrites leave the frame alone.
func TestParseDoesNotModify(t *testing.T) {
	for _, c := range validCases() {
		frame := []byte(c.frame)
		m, err := jsonrpc.Parse(frame)
		require.NoError(t, err)
		m.WithID([]byte(`"new"`))
		m.ParamsPath("_meta", "progressToken")
		assert.Equal(t, c.frame, string(frame), "frame %.100s after Parse and rewrites", c.frame)
	}
}

func TestKindString(t *testing.T) {
	got := map[jsonrpc.Kind]string{}
	for _, k := range []jsonrpc.Kind{jsonrpc.KindInvalid, jsonrpc.KindRequest, jsonrpc.KindNotification, jsonrpc.KindResult, jsonrpc.KindError, 99} {
		got[k] = k.String()
	}
	want := map[jsonrpc.Kind]string{
		jsonrpc.KindInvalid: "invalid", jsonrpc.KindRequest: "request", jsonrpc.KindNotification: "notification",
		jsonrpc.KindResult: "result", jsonrpc.KindError: "error", 99: "invalid",
	}
	assert.Equal(t, want, got, "Kind.String")
}

// tokenRequest is a tools/call with a progress token among look-alikes.
const tokenRequest = `{"jsonrpc":"2.0", "id":"client-1" ,"method":"tools/call",` +
	`"params":{ "name":"search", "arguments":{"_meta":{"progressToken":"decoy"},"q":"\"progressToken\":1"},` +
	` "_meta" : { "progressToken" : "tok-A" , "other":[1,{"progressToken":2}] } },"x":{"progressToken":3}}`

func TestParamsPathRewrite(t *testing.T) {
	m, err := jsonrpc.Parse([]byte(tokenRequest))
	require.NoError(t, err)
	tok, ok := m.ParamsPath("_meta", "progressToken")
	require.True(t, ok, "progress token of %s", tokenRequest)
	assert.Equal(t, `"tok-A"`, tokenRequest[tok.Start:tok.End], "progress token span")
	id, ok := m.IDSpan()
	require.True(t, ok)

	want := strings.Replace(strings.Replace(tokenRequest, `"client-1"`, `17`, 1), `"tok-A"`, `"mux-9"`, 1)
	for _, order := range [][]jsonrpc.Edit{
		{{Span: id, Value: []byte("17")}, {Span: tok, Value: []byte(`"mux-9"`)}},
		{{Span: tok, Value: []byte(`"mux-9"`)}, {Span: id, Value: []byte("17")}},
	} {
		out := jsonrpc.Splice(m.Frame, order...)
		assert.Equal(t, want, string(out), "splice of id and token")
		require.True(t, json.Valid(out), "splice result %s", out)
		m2, err := jsonrpc.Parse(out)
		require.NoError(t, err, "reparse of %s", out)
		tok2, ok := m2.ParamsPath("_meta", "progressToken")
		require.True(t, ok)
		assert.Equal(t, envelope{Kind: jsonrpc.KindRequest, Method: "tools/call", ID: raw("17"), Params: m2.Params}, view(m2), "reparse of %s", out)
		assert.Equal(t, `"mux-9"`, string(out[tok2.Start:tok2.End]), "token after the rewrite")
	}
	assert.Equal(t, tokenRequest, string(m.Frame), "the original after the rewrites")
}

func TestParamsPath(t *testing.T) {
	const head = `{"jsonrpc":"2.0","id":1,"method":"m","params":`
	cases := []struct {
		name   string
		params string
		path   []string
		want   string // the value at the path; "" when not found
	}{
		{"token", `{"_meta":{"progressToken":5}}`, []string{"_meta", "progressToken"}, `5`},
		{"object token", `{"_meta":{"progressToken":{"a":[1]}}}`, []string{"_meta", "progressToken"}, `{"a":[1]}`},
		{"no path is params itself", `{"a":1}`, nil, `{"a":1}`},
		{"one level", `{"a":1,"b":[2]}`, []string{"b"}, `[2]`},
		{"last duplicate wins", `{"_meta":{"progressToken":1,"progressToken":2}}`, []string{"_meta", "progressToken"}, `2`},
		{"last duplicate parent wins", `{"_meta":{"progressToken":1},"_meta":{"progressToken":2}}`, []string{"_meta", "progressToken"}, `2`},
		{"last duplicate parent wins even without the member", `{"_meta":{"progressToken":1},"_meta":{}}`, []string{"_meta", "progressToken"}, ``},
		{"last duplicate parent wins even when not an object", `{"_meta":{"progressToken":1},"_meta":1}`, []string{"_meta", "progressToken"}, ``},
		{"escaped names", `{"\u005fmeta":{"progress\u0054oken":"t"}}`, []string{"_meta", "progressToken"}, `"t"`},
		{"escaped slash in a name", `{"a\/b":1}`, []string{"a/b"}, `1`},
		{"escaped and plain duplicates, last wins", `{"_meta":{"progressToken":1,"progress\u0054oken":2}}`, []string{"_meta", "progressToken"}, `2`},
		{"miscased name is another member", `{"_meta":{"ProgressToken":1}}`, []string{"_meta", "progressToken"}, ``},
		{"whitespace", "{ \"_meta\" :\n{ \"progressToken\"\t:  \"x\"  } }", []string{"_meta", "progressToken"}, `"x"`},
		{"look-alike inside a string", `{"s":"\"_meta\":{\"progressToken\":1}","_meta":{}}`, []string{"_meta", "progressToken"}, ``},
		{"deeper is not it", `{"_meta":{"x":{"progressToken":1}}}`, []string{"_meta", "progressToken"}, ``},
		{"_meta a string", `{"_meta":"progressToken"}`, []string{"_meta", "progressToken"}, ``},
		{"_meta an array", `{"_meta":[{"progressToken":1}]}`, []string{"_meta", "progressToken"}, ``},
		{"params an array", `[{"_meta":{"progressToken":1}}]`, []string{"_meta", "progressToken"}, ``},
		{"empty objects", `{}`, []string{"_meta"}, ``},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frame := head + c.params + `}`
			m, err := jsonrpc.Parse([]byte(frame))
			require.NoError(t, err, frame)
			got := ""
			if s, ok := m.ParamsPath(c.path...); ok {
				got = frame[s.Start:s.End]
			}
			assert.Equal(t, c.want, got, "ParamsPath%q of %s", c.path, c.params)

			// FindPath on params alone finds the same value.
			got = ""
			if s, ok := jsonrpc.FindPath(m.Params, c.path...); ok {
				got = string(m.Params[s.Start:s.End])
			}
			assert.Equal(t, c.want, got, "FindPath%q of %s", c.path, c.params)
		})
	}
	t.Run("no params", func(t *testing.T) {
		m, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"m"}`))
		require.NoError(t, err)
		s, ok := m.ParamsPath("_meta", "progressToken")
		assert.Equal(t, jsonrpc.Span{}, s, "span without params")
		assert.False(t, ok, "found without params")
	})
}

func TestFindPath(t *testing.T) {
	cases := []struct {
		v    string
		path []string
		want string
	}{
		{` {"a":{"b":[1]}}`, []string{"a", "b"}, `[1]`},
		{`{"a":{"b":[1]}}`, []string{"a", "b", "c"}, ``},
		{`{"a" : "x" }`, []string{"a"}, `"x"`},
		{`[{"a":1}]`, []string{"a"}, ``},
		{`"a"`, []string{"a"}, ``},
		{`1`, []string{"a"}, ``},
		{`{"":{"":2}}`, []string{"", ""}, `2`},
		{`{"a":1,"a":{"b":2}}`, []string{"a", "b"}, `2`},
		{`{"é":1,"\u00e9":2}`, []string{"é"}, `2`},
		{`{"a":"}","b":"{\"a\":9}","c":true}`, []string{"c"}, `true`},
		{`{"a":` + nest(5000) + `,"b":null}`, []string{"b"}, `null`},
	}
	for _, c := range cases {
		got := ""
		if s, ok := jsonrpc.FindPath([]byte(c.v), c.path...); ok {
			got = c.v[s.Start:s.End]
		}
		assert.Equal(t, c.want, got, "FindPath(%.60s, %q)", c.v, c.path)
	}
}

func TestSplice(t *testing.T) {
	const f = `{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"progressToken":"t"},"x":"y"}}`
	m, err := jsonrpc.Parse([]byte(f))
	require.NoError(t, err)
	id, _ := m.IDSpan()
	tok, ok := m.ParamsPath("_meta", "progressToken")
	require.True(t, ok)
	x, ok := m.ParamsPath("x")
	require.True(t, ok)
	eid := jsonrpc.Edit{Span: id, Value: []byte(`"big-id"`)}
	etok := jsonrpc.Edit{Span: tok, Value: []byte(`12345`)}
	ex := jsonrpc.Edit{Span: x, Value: []byte(`{"z":[]}`)}
	want3 := `{"jsonrpc":"2.0","id":"big-id","method":"m","params":{"_meta":{"progressToken":12345},"x":{"z":[]}}}`

	perms := [][]jsonrpc.Edit{
		{eid, etok, ex}, {eid, ex, etok}, {etok, eid, ex},
		{etok, ex, eid}, {ex, eid, etok}, {ex, etok, eid},
	}
	for i, p := range perms {
		out := jsonrpc.Splice([]byte(f), p...)
		assert.Equal(t, want3, string(out), "three edits, order %d", i)
		assert.True(t, json.Valid(out), "three edits, order %d: %s", i, out)
		m2, err := jsonrpc.Parse(out)
		require.NoError(t, err, "reparse of %s", out)
		assert.Equal(t, raw(`"big-id"`), m2.ID, "id after three edits, order %d", i)
	}

	cases := []struct {
		name  string
		edits []jsonrpc.Edit
		want  string
	}{
		{"no edits", nil, f},
		{"one edit", []jsonrpc.Edit{eid}, strings.Replace(f, `"id":1`, `"id":"big-id"`, 1)},
		{"two edits in order", []jsonrpc.Edit{eid, etok}, strings.Replace(strings.Replace(f, `"id":1`, `"id":"big-id"`, 1), `"t"`, `12345`, 1)},
		{"two edits reversed", []jsonrpc.Edit{etok, eid}, strings.Replace(strings.Replace(f, `"id":1`, `"id":"big-id"`, 1), `"t"`, `12345`, 1)},
		{"insertion", []jsonrpc.Edit{{Span: jsonrpc.Span{Start: 1, End: 1}, Value: []byte(`"a":0,`)}}, `{"a":0,` + f[1:]},
		{"deletion", []jsonrpc.Edit{{Span: jsonrpc.Span{Start: 1, End: len(`{"jsonrpc":"2.0",`)}}}, `{` + f[len(`{"jsonrpc":"2.0",`):]},
		{"whole frame", []jsonrpc.Edit{{Span: jsonrpc.Span{Start: 0, End: len(f)}, Value: []byte(`{}`)}}, `{}`},
		{"adjacent edits", []jsonrpc.Edit{{Span: jsonrpc.Span{Start: 1, End: 2}, Value: []byte("A")}, {Span: jsonrpc.Span{Start: 0, End: 1}, Value: []byte("B")}}, `BAjsonrpc` + f[len(`{"jsonrpc`):]},
		{"insertion given after a replacement at the same byte", []jsonrpc.Edit{{Span: jsonrpc.Span{Start: 0, End: 1}, Value: []byte("B")}, {Span: jsonrpc.Span{Start: 0, End: 0}, Value: []byte("A")}}, `AB` + f[1:]},
		{"insertions around a replacement, reversed", []jsonrpc.Edit{
			{Span: jsonrpc.Span{Start: 1, End: 1}, Value: []byte("x")},
			{Span: jsonrpc.Span{Start: 0, End: 1}, Value: []byte("B")},
			{Span: jsonrpc.Span{Start: 0, End: 0}, Value: []byte("A")},
		}, `ABx` + f[1:]},
		{"at the end", []jsonrpc.Edit{{Span: jsonrpc.Span{Start: len(f), End: len(f)}, Value: []byte("\n")}}, f + "\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := []byte(f)
			out := jsonrpc.Splice(in, c.edits...)
			assert.Equal(t, c.want, string(out), "Splice(%v)", c.edits)
			assert.Equal(t, f, string(in), "the input after Splice(%v)", c.edits)
			if len(out) > 0 && len(in) > 0 {
				out[0] = '!'
				assert.Equal(t, f, string(in), "the input after writing to the output of Splice(%v)", c.edits)
			}
		})
	}
}

func TestSplitBatch(t *testing.T) {
	cases := []struct {
		name  string
		frame string
		want  []string
		code  int // 0: no error
	}{
		{"two requests", `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]`, []string{`{"jsonrpc":"2.0","id":1,"method":"a"}`, `{"jsonrpc":"2.0","method":"b"}`}, 0},
		{"whitespace", " [ {\"a\":1} ,\n\t{ } , [ ] ] ", []string{`{"a":1}`, `{ }`, `[ ]`}, 0},
		{"one element", `[{"id":1}]`, []string{`{"id":1}`}, 0},
		{"scalars", `[1,"x",true,null,-2.5e3]`, []string{`1`, `"x"`, `true`, `null`, `-2.5e3`}, 0},
		{"brackets in strings", `["],[",{"a":"}{"},"\"]"]`, []string{`"],["`, `{"a":"}{"}`, `"\"]"`}, 0},
		{"nested arrays", `[[1,[2]],[[3]]]`, []string{`[1,[2]]`, `[[3]]`}, 0},
		{"empty batch", `[]`, nil, jsonrpc.CodeInvalidRequest},
		{"empty batch with spaces", ` [ ] `, nil, jsonrpc.CodeInvalidRequest},
		{"not a batch", `{"jsonrpc":"2.0","method":"m"}`, nil, jsonrpc.CodeInvalidRequest},
		{"a scalar", `1`, nil, jsonrpc.CodeInvalidRequest},
		{"not JSON", `[1,`, nil, jsonrpc.CodeParseError},
		{"empty", ``, nil, jsonrpc.CodeParseError},
		{"invalid UTF-8", "[\"\xff\"]", nil, jsonrpc.CodeParseError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			elems, err := jsonrpc.SplitBatch([]byte(c.frame))
			var got []string
			for _, e := range elems {
				got = append(got, string(e))
			}
			code := 0
			var e *jsonrpc.Error
			if errors.As(err, &e) {
				code = e.Code
			} else {
				require.NoError(t, err, "SplitBatch(%s)", c.frame)
			}
			assert.Equal(t, struct {
				Elems []string
				Code  int
			}{c.want, c.code}, struct {
				Elems []string
				Code  int
			}{got, code}, "SplitBatch(%q)", c.frame)
		})
	}
}

func TestIsBatch(t *testing.T) {
	cases := map[string]bool{
		`[]`: true, " \r\n\t[1]": true, `[`: true,
		`{}`: false, ``: false, `   `: false, `"["`: false, `1`: false,
	}
	for in, want := range cases {
		assert.Equal(t, want, jsonrpc.IsBatch([]byte(in)), "IsBatch(%q)", in)
	}
}

// TestEncoders checks that the frames mcpmux writes parse back as what they say.
func TestEncoders(t *testing.T) {
	req, err := jsonrpc.Request(raw("5"), "tools/list", map[string]any{"cursor": "c"})
	require.NoError(t, err)
	noParams, err := jsonrpc.Request(raw(`"s-1"`), "ping", nil)
	require.NoError(t, err)
	note, err := jsonrpc.Notification("notifications/tools/list_changed", nil)
	require.NoError(t, err)
	noteParams, err := jsonrpc.Notification("notifications/progress", json.RawMessage(`{"progressToken":1,"progress":1}`))
	require.NoError(t, err)
	_, err = jsonrpc.Request(raw("1"), "m", func() {})
	assert.ErrorContains(t, err, "encode m: ", "unencodable params")

	cases := []struct {
		name  string
		frame []byte
		want  envelope
	}{
		{"request", req, envelope{Kind: jsonrpc.KindRequest, Method: "tools/list", ID: raw("5"), Params: raw(`{"cursor":"c"}`)}},
		{"request without params", noParams, envelope{Kind: jsonrpc.KindRequest, Method: "ping", ID: raw(`"s-1"`)}},
		{"notification", note, envelope{Kind: jsonrpc.KindNotification, Method: "notifications/tools/list_changed"}},
		{"notification with params", noteParams, envelope{Kind: jsonrpc.KindNotification, Method: "notifications/progress", Params: raw(`{"progressToken":1,"progress":1}`)}},
		{"result", jsonrpc.Response(raw("9007199254740993"), raw(`{"tools":[]}`)), envelope{Kind: jsonrpc.KindResult, ID: raw("9007199254740993"), Result: raw(`{"tools":[]}`)}},
		{"result with a string id", jsonrpc.Response(raw(`"\u00e9"`), raw(`{}`)), envelope{Kind: jsonrpc.KindResult, ID: raw(`"\u00e9"`), Result: raw(`{}`)}},
		{"nil result is null", jsonrpc.Response(raw("1"), nil), envelope{Kind: jsonrpc.KindResult, ID: raw("1"), Result: raw(`null`)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.True(t, json.Valid(c.frame), "%s is not JSON", c.frame)
			m, err := jsonrpc.Parse(c.frame)
			require.NoError(t, err, "Parse(%s)", c.frame)
			assert.Equal(t, c.want, view(m), "Parse(%s)", c.frame)
		})
	}
	assert.Equal(t, `{"jsonrpc":"2.0","id":"\u00e9","result":{}}`, string(jsonrpc.Response(raw(`"\u00e9"`), raw(`{}`))), "Response keeps the id's bytes")
	assert.Equal(t, `{"jsonrpc":"2.0","id":null,"result":{}}`, string(jsonrpc.Response(nil, raw(`{}`))), "Response with a nil id")
}

func TestParseVersusDecoder(t *testing.T) {
	// Every valid frame agrees with encoding/json on the reserved members.
	for _, c := range validCases() {
		t.Run(c.name, func(t *testing.T) {
			m, err := jsonrpc.Parse([]byte(c.frame))
			require.NoError(t, err)
			checkAgainstDecoder(t, m)
		})
	}
}

// checkAgainstDecoder compares a parsed message with encoding/json's reading
// of the same frame, both as a map (exact names) and as a struct (the
// case-insensitive matching that Go servers use).
func checkAgainstDecoder(t *testing.T, m *jsonrpc.Message) {
	t.Helper()
	var obj map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(m.Frame, &obj), "decode %.200q", m.Frame)
	var method string
	if obj["method"] != nil {
		require.NoError(t, json.Unmarshal(obj["method"], &method))
	}
	var version string
	require.NoError(t, json.Unmarshal(obj["jsonrpc"], &version))
	fromMap := envelope{m.Kind, method, obj["id"], obj["params"], obj["result"], obj["error"]}
	assert.Equal(t, view(m), fromMap, "map decoding of %.200q", m.Frame)
	assert.Equal(t, "2.0", version, "jsonrpc of %.200q", m.Frame)

	var st struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(m.Frame, &st), "decode %.200q", m.Frame)
	fromStruct := envelope{m.Kind, st.Method, st.ID, st.Params, st.Result, st.Error}
	assert.Equal(t, view(m), fromStruct, "struct decoding of %.200q", m.Frame)
	assert.Equal(t, "2.0", st.JSONRPC, "struct jsonrpc of %.200q", m.Frame)
}

func ExampleParse() {
	m, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"_meta":{"progressToken":"p"}}}`))
	if err != nil {
		panic(err)
	}
	id, _ := m.IDSpan()
	tok, _ := m.ParamsPath("_meta", "progressToken")
	fmt.Printf("%s\n", jsonrpc.Splice(m.Frame, jsonrpc.Edit{Span: id, Value: []byte("41")}, jsonrpc.Edit{Span: tok, Value: []byte("7")}))
	// Output: {"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"_meta":{"progressToken":7}}}
}
