package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// answer is the part of an error response the table compares.
type answer struct {
	Code   int
	Reason string
	ID     string // raw JSON
}

// The answers DESIGN.md's error table gives, by condition.
var (
	parseError = answer{jsonrpc.CodeParseError, jsonrpc.ReasonParseError, "null"}
	noBatch    = answer{jsonrpc.CodeInvalidRequest, jsonrpc.ReasonBatchNotSupported, "null"}
)

func invalidReq(id string) answer {
	return answer{jsonrpc.CodeInvalidRequest, jsonrpc.ReasonInvalidRequest, id}
}

func tooLarge(id string) answer {
	return answer{jsonrpc.CodeInvalidRequest, jsonrpc.ReasonTooLarge, id}
}

// TestMalformedFramesTable sends one malformed frame after another over the
// real socket, each followed in the same write by a valid echo request. Each
// frame must get the error DESIGN.md's table gives it (or, for the frames
// that are well-formed answers and notifications, nothing at all), the
// follow-up must be answered, and in the end the demo server must have seen
// none of the bad frames: only the follow-ups and the stats call.
func TestMalformedFramesTable(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	d := startDaemon(t, demo("demo", nil, `max_message_bytes = "64KiB"`), "")

	// Batches are legal only in protocol 2025-03-26, so the batch cases run
	// twice: on a session that negotiated it and on one that did not.
	sessions := map[string]*client{"2025-06-18": dial(t, d.socket("demo")), "2025-03-26": dial(t, d.socket("demo"))}
	for version, c := range sessions {
		m, err := c.initialize(version)
		require.NoError(t, err)
		require.Contains(t, string(m.Result), `"protocolVersion":"`+version+`"`)
	}

	pad := strings.Repeat("x", 200<<10) // 200 KiB: well over the 64 KiB limit
	require.Greater(t, len(pad), limit)
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000) // under the limit, over any sane depth
	require.Less(t, len(deep), limit)
	tests := []struct {
		name    string
		frame   string
		version string   // the session it is sent on; "" is 2025-06-18
		want    []answer // the answers before the follow-up's; none for nil
		batch   bool     // want arrives as one JSON array
	}{
		// Not JSON, or not UTF-8: -32700 and a null id, whatever id is inside.
		{name: "truncated object", frame: `{"jsonrpc":"2.0","id":1,"method":"tools/list"`, want: []answer{parseError}},
		{name: "not JSON at all", frame: `hello, world`, want: []answer{parseError}},
		{name: "single quotes", frame: `{'jsonrpc':'2.0','id':2,'method':'tools/list'}`, want: []answer{parseError}},
		{name: "invalid UTF-8 in a string", frame: "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":{\"x\":\"\xff\xfe\"}}", want: []answer{parseError}},
		{name: "NUL byte between members", frame: "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\"\x00}", want: []answer{parseError}},
		{name: "raw control character in a string", frame: "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/\x01list\"}", want: []answer{parseError}},
		{name: "invalid escape", frame: `{"jsonrpc":"2.0","id":6,"method":"tools/\qlist"}`, want: []answer{parseError}},
		{name: "trailing garbage", frame: `{"jsonrpc":"2.0","id":7,"method":"tools/list"} x`, want: []answer{parseError}},
		{name: "two objects on one line", frame: `{"jsonrpc":"2.0","id":8,"method":"tools/list"}{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, want: []answer{parseError}},
		{name: "byte order mark", frame: "\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/list\"}", want: []answer{parseError}},
		{name: "nesting deeper than any decoder allows", frame: `{"jsonrpc":"2.0","id":11,"method":"tools/list","params":{"x":` + deep + `}}`, want: []answer{parseError}},
		{name: "truncated batch", frame: `[{"jsonrpc":"2.0","id":12,"method":"tools/list"}`, want: []answer{parseError}},
		{name: "truncated batch, batches allowed", frame: `[{"jsonrpc":"2.0","id":12,"method":"tools/list"}`, version: "2025-03-26", want: []answer{parseError}},

		// JSON, but not a valid JSON-RPC message: -32600, with the id when
		// it is readable and valid.
		{name: "bare number", frame: `42`, want: []answer{invalidReq("null")}},
		{name: "bare string", frame: `"tools/list"`, want: []answer{invalidReq("null")}},
		{name: "bare null", frame: `null`, want: []answer{invalidReq("null")}},
		{name: "bare true", frame: `true`, want: []answer{invalidReq("null")}},
		{name: "empty object", frame: `{}`, want: []answer{invalidReq("null")}},
		{name: "jsonrpc 1.0", frame: `{"jsonrpc":"1.0","id":20,"method":"tools/list"}`, want: []answer{invalidReq("20")}},
		{name: "jsonrpc as a number", frame: `{"jsonrpc":2.0,"id":21,"method":"tools/list"}`, want: []answer{invalidReq("21")}},
		{name: "jsonrpc missing", frame: `{"id":22,"method":"tools/list"}`, want: []answer{invalidReq("22")}},
		{name: "method missing", frame: `{"jsonrpc":"2.0","id":23}`, want: []answer{invalidReq("23")}},
		{name: "method a number", frame: `{"jsonrpc":"2.0","id":24,"method":42}`, want: []answer{invalidReq("24")}},
		{name: "method null", frame: `{"jsonrpc":"2.0","id":25,"method":null}`, want: []answer{invalidReq("25")}},
		{name: "params a string", frame: `{"jsonrpc":"2.0","id":26,"method":"tools/list","params":"all"}`, want: []answer{invalidReq("26")}},
		{name: "params null", frame: `{"jsonrpc":"2.0","id":27,"method":"tools/list","params":null}`, want: []answer{invalidReq("27")}},
		{name: "notification with params a number", frame: `{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":7}`, want: []answer{invalidReq("null")}},
		{name: "id a boolean", frame: `{"jsonrpc":"2.0","id":true,"method":"tools/list"}`, want: []answer{invalidReq("null")}},
		{name: "id a fraction", frame: `{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`, want: []answer{invalidReq("null")}},
		{name: "id an object", frame: `{"jsonrpc":"2.0","id":{"n":1},"method":"tools/list"}`, want: []answer{invalidReq("null")}},
		{name: "id an array", frame: `{"jsonrpc":"2.0","id":[1],"method":"tools/list"}`, want: []answer{invalidReq("null")}},
		{name: "id null on a request", frame: `{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, want: []answer{invalidReq("null")}},
		{name: "id twice", frame: `{"jsonrpc":"2.0","id":30,"id":31,"method":"tools/list"}`, want: []answer{invalidReq("null")}},
		{name: "method twice", frame: `{"jsonrpc":"2.0","id":32,"method":"tools/list","method":"tools/call"}`, want: []answer{invalidReq("32")}},
		{name: "jsonrpc twice", frame: `{"jsonrpc":"2.0","jsonrpc":"2.0","id":33,"method":"tools/list"}`, want: []answer{invalidReq("33")}},
		{name: "method in another case", frame: `{"jsonrpc":"2.0","id":34,"Method":"tools/call","method":"tools/list"}`, want: []answer{invalidReq("34")}},
		{name: "id in another case", frame: `{"jsonrpc":"2.0","ID":35,"method":"tools/list"}`, want: []answer{invalidReq("null")}},
		{name: "method twice, once escaped", frame: `{"jsonrpc":"2.0","id":36,"\u006dethod":"tools/call","method":"tools/list"}`, want: []answer{invalidReq("36")}},
		{name: "method with a result", frame: `{"jsonrpc":"2.0","id":37,"method":"tools/list","result":{}}`, want: []answer{invalidReq("37")}},
		{name: "result and error", frame: `{"jsonrpc":"2.0","id":38,"result":{},"error":{"code":1,"message":"both"}}`, want: []answer{invalidReq("38")}},
		{name: "error not an object", frame: `{"jsonrpc":"2.0","id":39,"error":"bad"}`, want: []answer{invalidReq("39")}},

		// Batches: refused as a whole where the session did not negotiate
		// them, answered element by element where it did.
		{name: "batch", frame: `[{"jsonrpc":"2.0","id":41,"method":"tools/list"}]`, want: []answer{noBatch}},
		{name: "empty batch", frame: `[]`, want: []answer{noBatch}},
		{name: "empty batch, batches allowed", frame: `[]`, version: "2025-03-26", want: []answer{invalidReq("null")}},
		{name: "junk batch, batches allowed", frame: `[1,"x",null]`, version: "2025-03-26",
			want: []answer{invalidReq("null"), invalidReq("null"), invalidReq("null")}, batch: true},

		// Over max_message_bytes: skipped unread; the id is reported when
		// the skipping scan found one at the top level.
		{name: "oversized, id first", frame: `{"jsonrpc":"2.0","id":45,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + pad + `"}}}`, want: []answer{tooLarge("45")}},
		{name: "oversized, id last", frame: `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"text":"` + pad + `"}},"id":"late"}`, want: []answer{tooLarge(`"late"`)}},
		{name: "oversized notification", frame: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"pad":"` + pad + `"}}`, want: []answer{tooLarge("null")}},
		{name: "oversized, id only inside params", frame: `{"jsonrpc":"2.0","method":"tools/call","params":{"id":48,"pad":"` + pad + `"}}`, want: []answer{tooLarge("null")}},
		{name: "oversized garbage", frame: pad, want: []answer{tooLarge("null")}},

		// Well-formed, but nothing to answer and nothing to forward.
		{name: "a response to nothing", frame: `{"jsonrpc":"2.0","id":50,"result":{}}`},
		{name: "an error response to nothing", frame: `{"jsonrpc":"2.0","id":51,"error":{"code":-1,"message":"no"}}`},
		{name: "an error response with a null id", frame: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`},
		{name: "cancellation of an unknown id", frame: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999,"reason":"none"}}`},
		{name: "cancellation of an unknown string id", frame: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"ghost"}}`},
		{name: "cancellation without a request id", frame: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`},
		{name: "a line of blanks", frame: " \t  \r"},
	}

	follows := 0
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			version := tt.version
			if version == "" {
				version = "2025-06-18"
			}
			c := sessions[version]
			follow := fmt.Sprintf(`"after-%d"`, i)
			text := "after " + tt.name
			follows++
			b := append([]byte(tt.frame), '\n')
			b = append(append(b, toolCall(follow, "echo", map[string]string{"text": text})...), '\n')
			require.NoError(t, c.sendRaw(b))

			var got []answer
			gotBatch := false
			record := func(m *jsonrpc.Message) {
				e, err := errorOf(m)
				if err != nil {
					got = append(got, answer{Reason: "unexpected " + string(m.Frame)})
					return
				}
				assert.Equal(t, "demo", e.Data.Server, "data.server of %s", m.Frame)
				got = append(got, answer{e.Code, e.Data.Reason, string(m.ID)})
			}
			for {
				frame, err := c.readFrame()
				require.NoError(t, err, "the session must go on after %s", tt.name)
				if jsonrpc.IsBatch(frame) {
					elems, err := jsonrpc.SplitBatch(frame)
					require.NoError(t, err, "batch answer %s", frame)
					gotBatch = true
					for _, el := range elems {
						m, err := jsonrpc.Parse(el)
						require.NoError(t, err, "batch element %s", el)
						record(m)
					}
					continue
				}
				m, err := jsonrpc.Parse(frame)
				require.NoError(t, err, "the daemon sent an invalid message: %.300s", frame)
				if string(m.ID) == follow {
					got, err := resultText(m)
					require.NoError(t, err)
					assert.Equal(t, text, got, "the follow-up's answer")
					break
				}
				record(m)
			}
			assert.Equal(t, tt.want, got, "answers to %.200q", tt.frame)
			assert.Equal(t, tt.batch, gotBatch, "answered as a batch")
		})
	}

	// None of the frames above reached the server: it saw its own handshake
	// with mcpmux, the follow-ups and this stats call, nothing else.
	st := sessions["2025-06-18"].mustStats(t)
	want := append([]string{"initialize", "notifications/initialized"}, slices.Repeat([]string{"tools/call"}, follows+1)...)
	assert.Equal(t, want, st.Methods, "methods the server received")
	assert.Equal(t, 1+follows+1, st.Requests, "requests the server received: its initialize, %d follow-ups, stats", follows)
	assert.Empty(t, st.Cancelled, "cancellations the server received")
}
