package mux

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/upstream"
)

// TestLargeAnswersPipelined: a server's large answers, read into the
// reader's recycled buffers and edited there (the id put back, longer or
// shorter; a modern session's resultType put in), each reach their session
// whole and unmixed while the next ones are read: twenty 1 MB answers asked
// for at once, each of its own letter, to a session whose ids are numbers,
// one whose ids are long strings, a session of 2026-07-28, and a legacy
// session on a server of 2026-07-28.
func TestLargeAnswersPipelined(t *testing.T) {
	letter := func(i int) byte { return 'a' + byte(i%26) }
	const size, calls = 1 << 20, 20
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	hubs := map[string]*Hub{}
	for _, era := range []string{"legacy", "modern"} {
		hub := New(Config{Name: "big", Upstream: upstream.Config{
			Name: "big", Command: exe, Env: map[string]string{bigServerEnv: strconv.Itoa(size), bigServerEraEnv: era}, MaxMessageBytes: 4 << 20,
		}})
		hubs[era] = hub
		wg.Go(func() { hub.Run(ctx) })
	}
	for _, tt := range []struct {
		name, idFmt string
		modern      bool   // a session of 2026-07-28
		server      string // the server's era
	}{
		{"number ids", "%d", false, "legacy"},
		{"string ids", `"a-long-request-id-%d"`, false, "legacy"},
		{"modern", "%d", true, "legacy"},
		{"legacy on a modern server", `"a-long-request-id-%d"`, false, "modern"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn := benchSession(t, ctx, &wg, hubs[tt.server])
			defer conn.Close()
			params, shape := `{"name":"big-%c"}`, `,"result":{"content"`
			if tt.server == "modern" {
				shape = `,"result":{"resultType":"complete","content"`
			}
			if tt.modern {
				params, shape = `{"name":"big-%c",`+largeEnvelope+`}`, `,"result":{"resultType":"complete","content"`
			} else {
				fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`+"\n")
				fmt.Fprintf(conn, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			}
			var reqs bytes.Buffer
			for i := range calls {
				fmt.Fprintf(&reqs, `{"jsonrpc":"2.0","id":`+tt.idFmt+`,"method":"tools/call","params":`+params+`}`+"\n", i, letter(i))
			}
			_, err := conn.Write(reqs.Bytes())
			require.NoError(t, err)
			br := bufio.NewReaderSize(conn, 1<<20)
			buf := make([]byte, 0, size+4096)
			seen := map[string]bool{}
			for len(seen) < calls {
				line := readLineInto(t, br, buf)
				m, err := jsonrpc.Parse(bytes.TrimSpace(line))
				require.NoError(t, err, "%.200s", line)
				if string(m.ID) == `"init"` {
					continue
				}
				require.True(t, bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":`+string(m.ID)+shape)), "%.200s", line)
				i, err := strconv.Atoi(string(bytes.Trim(m.ID, `"a-long-request-id`)))
				require.NoError(t, err, "id %s", m.ID)
				want := letter(i)
				text := line[bytes.Index(line, []byte(`"text":"`))+len(`"text":"`):]
				text = text[:bytes.IndexByte(text, '"')]
				require.Len(t, text, size, "answer %s", m.ID)
				require.Equal(t, -1, bytes.IndexFunc(text, func(r rune) bool { return r != rune(want) }), "answer %s: only %c", m.ID, want)
				require.False(t, seen[string(m.ID)], "answer %s twice", m.ID)
				seen[string(m.ID)] = true
			}
		})
	}
}
