package testutil_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

func TestFakeServer(t *testing.T) {
	t.Setenv(testutil.FakeTagEnv, "t1")
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`not json`,
		`{"jsonrpc":"2.0","id":2,"method":"hold"}`,
		`{"jsonrpc":"2.0","id":3,"method":"hold"}`,
		`{"jsonrpc":"2.0","id":4,"method":"whoami"}`,
		`{"jsonrpc":"2.0","id":5,"method":"release"}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
	}, "\n") + "\n"
	var out, stderr bytes.Buffer
	assert.Equal(t, 0, testutil.FakeServer("serve", strings.NewReader(in), &out, &stderr), "exit code at the end of input")
	want := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":4,"result":{"pid":` + jsonOf(os.Getpid()) + `,"tag":"t1"}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"released":true}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"released":true}}`,
		`{"jsonrpc":"2.0","id":5,"result":{}}`,
		`{"jsonrpc":"2.0","id":6,"result":{}}`,
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if assert.Len(t, got, len(want), "answers:\n%s", out.String()) {
		for i := range want {
			assert.JSONEq(t, want[i], got[i], "answer %d", i)
		}
	}
	assert.Empty(t, stderr.String())
}

func TestFakeServerExits(t *testing.T) {
	var out, stderr bytes.Buffer
	assert.Equal(t, 3, testutil.FakeServer("exit 3", strings.NewReader(""), &out, &stderr))
	assert.Equal(t, "fake server: told to exit 3\n", stderr.String())
	assert.Empty(t, out.String())
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
