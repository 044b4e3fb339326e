package mux

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/session"
	"github.com/mcpmux/mcpmux/upstream"
)

// bigServerEnv makes the test binary a server whose every tools/call is
// answered with a text result of the given number of bytes.
const bigServerEnv = "MCPMUX_MUX_BIG_SERVER"

// bigServerEraEnv set to "modern" makes that server speak 2026-07-28 only:
// it refuses initialize and describes itself through server/discover.
const bigServerEraEnv = "MCPMUX_MUX_BIG_SERVER_ERA"

// runBigServer is that server: initialize (or server/discover), ping and
// tools/call, on stdio.
func runBigServer(size string) int {
	n, err := strconv.Atoi(size)
	if err != nil {
		return 2
	}
	modern := os.Getenv(bigServerEraEnv) == "modern"
	shape := ""
	if modern {
		shape = `"resultType":"complete",`
	}
	// Each answer's text is one letter, the last of the tool's name, so
	// that a client can tell one answer's bytes from another's.
	bodies := make([][]byte, 26)
	for i := range bodies {
		bodies[i] = []byte(`,"result":{` + shape + `"content":[{"type":"text","text":"` + strings.Repeat(string(rune('a'+i)), n) + `"}]}}` + "\n")
	}
	r := jsonrpc.NewReaderSize(os.Stdin, 1<<20, 64<<10)
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	for {
		frame, err := r.Read()
		if err != nil {
			return 0
		}
		m, err := jsonrpc.Parse(frame)
		if err != nil || m.Kind != jsonrpc.KindRequest {
			continue
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s`, m.ID)
		switch {
		case modern && m.Method == "initialize":
			w.WriteString(`,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}}` + "\n")
		case modern && m.Method == "server/discover":
			w.WriteString(`,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"big","version":"1"}}}}` + "\n")
		case m.Method == "initialize":
			w.WriteString(`,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"big","version":"1"}}}` + "\n")
		case m.Method == "tools/call":
			w.Write(bodies[answerLetter(m.Params)-'a'])
		default:
			w.WriteString(`,"result":{}}` + "\n")
		}
		w.Flush()
	}
}

// answerLetter is the letter of the big server's answer to a tools/call
// with these params: the last of the tool's name, if a small letter.
func answerLetter(params []byte) byte {
	s, ok := jsonrpc.FindPath(params, "name")
	if !ok {
		return 'x'
	}
	name, _ := jsonrpc.Unquote(params[s.Start:s.End])
	if name == "" || name[len(name)-1] < 'a' || name[len(name)-1] > 'z' {
		return 'x'
	}
	return name[len(name)-1]
}

// BenchmarkLargeAnswer: 10 MB answers from a real server process through
// the hub's server-read path (the upstream reader, the routing, the
// session's outbox and socket writer) to a client that reads each whole.
// It reports this process's CPU time and the bytes it allocated per
// answer; the client's share of both is its reads into one reused buffer.
// The client's ids are numbers, no longer than mcpmux's own; or strings,
// longer (the answer's head grows); or it is a session of 2026-07-28 on
// this legacy server, whose answers get their resultType put in.
func BenchmarkLargeAnswer(b *testing.B) {
	b.Run("number-id", func(b *testing.B) { benchLargeAnswer(b, "%d", false, "legacy") })
	b.Run("string-id", func(b *testing.B) { benchLargeAnswer(b, `"request-0000000000000000-%d"`, false, "legacy") })
	b.Run("modern", func(b *testing.B) { benchLargeAnswer(b, "%d", true, "legacy") })
	b.Run("legacy-on-modern", func(b *testing.B) { benchLargeAnswer(b, "%d", false, "modern") })
}

// largeEnvelope is the _meta of a 2026-07-28 client's requests.
const largeEnvelope = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}`

// benchLargeAnswer measures a session (modern: of 2026-07-28) with ids in
// idFmt on a server of the era server.
func benchLargeAnswer(b *testing.B, idFmt string, modern bool, server string) {
	const size = 10 << 20
	exe, err := os.Executable()
	require.NoError(b, err)
	hub := New(Config{Name: "big", Upstream: upstream.Config{
		Name: "big", Command: exe, Env: map[string]string{bigServerEnv: strconv.Itoa(size), bigServerEraEnv: server}, MaxMessageBytes: 16 << 20,
	}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx) })
	conn := benchSession(b, ctx, &wg, hub)
	b.Cleanup(func() {
		conn.Close()
		cancel()
		wg.Wait()
	})
	br := bufio.NewReaderSize(conn, 1<<20)
	buf := make([]byte, 0, 11<<20)
	params, answer := `{"name":"big"}`, `,"result":`
	if server == "modern" {
		answer = `,"result":{"resultType":"complete",`
	}
	if modern {
		params, answer = `{"name":"big",`+largeEnvelope+`}`, `,"result":{"resultType":"complete",`
	}
	call := func(id int) []byte {
		fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":`+idFmt+`,"method":"tools/call","params":`+params+`}`+"\n", id)
		return readLineInto(b, br, buf)
	}
	if !modern {
		fmt.Fprintf(conn, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`+"\n")
		if init := readLineInto(b, br, buf); !bytes.Contains(init, []byte(`"result"`)) {
			b.Fatalf("initialize: %.300s", init)
		}
		fmt.Fprintf(conn, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	}
	if warm := call(0); !bytes.HasPrefix(warm, []byte(`{"jsonrpc":"2.0","id":`+fmt.Sprintf(idFmt, 0)+answer)) {
		b.Fatalf("first call: %.300s", warm) // the server is started and warm
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := cpuTime()
	i := 0
	for b.Loop() {
		i++
		line := call(i)
		if want := `{"jsonrpc":"2.0","id":` + fmt.Sprintf(idFmt, i) + answer; !bytes.HasPrefix(line, []byte(want)) || len(line) < size {
			b.Fatalf("answer %d: %d bytes beginning %.300q", i, len(line), line)
		}
	}
	cpuPer := (cpuTime() - cpu) / time.Duration(i)
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(cpuPer.Microseconds())/1000, "cpu-ms/answer")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(i), "alloc-B/answer")
	b.ReportMetric(float64(after.NumGC-before.NumGC)/float64(i), "gc/answer")
}

// benchSession attaches a session over a socket pair and returns the
// client's end.
func benchSession(b testing.TB, ctx context.Context, wg *sync.WaitGroup, hub *Hub) net.Conn {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	require.NoError(b, err)
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		conns[i], err = net.FileConn(f)
		f.Close()
		require.NoError(b, err)
	}
	wg.Go(func() {
		hub.Serve(ctx, session.NewStream(conns[0], hub.MaxMessageBytes()), session.Peer{Transport: "bench"})
	})
	return conns[1]
}

// readLineInto reads one line into buf, reused: the client allocates
// nothing per answer.
func readLineInto(b testing.TB, br *bufio.Reader, buf []byte) []byte {
	buf = buf[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if err == nil {
			return buf
		}
		if err != bufio.ErrBufferFull {
			b.Fatalf("read: %v", err)
		}
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
