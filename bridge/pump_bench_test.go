package bridge

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// pumpRig is a bridge between pipes and a daemon the rig plays on a Unix
// socket: the daemon answers each request line with answer (its id put
// first), and the client's side counts the lines that come back.
type pumpRig struct {
	stdin  *io.PipeWriter
	lines  chan int // the bytes of each line the client got
	done   chan error
	cancel context.CancelFunc
}

// startPumpRig starts a bridge whose daemon answers every line with body,
// as the result of the request's id; idLast puts the id after the result,
// as some SDKs write it.
// floor runs a byte-copy bridge in its place, the floor of the issue's
// figures.
func startPumpRig(tb testing.TB, body []byte, idLast, floor bool) *pumpRig {
	tb.Helper()
	path := filepath.Join(testutil.ShortDir(tb), "demo.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &pumpRig{stdin: inW, lines: make(chan int, 1024), done: make(chan error, 1)}
	daemonDone := make(chan struct{})
	go func() { // the daemon: ends when the bridge closes its connection
		defer close(daemonDone)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serveAnswers(c, body, idLast)
	}()
	conn, err := net.Dial("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { // the bridge: waited for at cleanup
		err := runRigBridge(ctx, floor, conn, path, inR, outW)
		outW.Close()
		r.done <- err
	}()
	readerDone := make(chan struct{})
	go func() { // the client's reader: ends with stdout
		defer close(readerDone)
		countLines(outR, r.lines)
	}()
	tb.Cleanup(func() {
		inW.Close()
		cancel()
		<-r.done
		<-readerDone
		ln.Close()
		<-daemonDone
	})
	return r
}

// runRigBridge runs the bridge, or with floor a byte-copy bridge, between
// the pipes and conn.
func runRigBridge(ctx context.Context, floor bool, conn net.Conn, path string, in io.Reader, out io.Writer) error {
	if !floor {
		b := &bridge{name: "demo", drain: time.Second, dial: func(context.Context) (net.Conn, string, error) {
			return nil, path, io.ErrClosedPipe
		}, stderr: io.Discard, out: bufio.NewWriterSize(out, 64<<10)}
		return b.run(ctx, newLink(conn, path), in)
	}
	up := make(chan struct{})
	go func() { // the floor's upstream copy: ends with stdin, waited for below
		defer close(up)
		io.CopyBuffer(conn, in, make([]byte, 64<<10))
		conn.(*net.UnixConn).CloseWrite() // the daemon hangs up in turn
	}()
	_, err := io.CopyBuffer(out, conn, make([]byte, 64<<10))
	<-up
	return err
}

// serveAnswers answers each line read from c with body as its result.
func serveAnswers(c net.Conn, body []byte, idLast bool) {
	br := bufio.NewReaderSize(c, 64<<10)
	bw := bufio.NewWriterSize(c, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		i := bytes.Index(line, []byte(`"id":`))
		j := i + 5 + bytes.IndexByte(line[i+5:], ',')
		id := line[i+5 : j]
		if idLast {
			bw.WriteString(`{"jsonrpc":"2.0","result":`)
			bw.Write(body)
			bw.WriteString(`,"id":`)
			bw.Write(id)
		} else {
			bw.WriteString(`{"jsonrpc":"2.0","id":`)
			bw.Write(id)
			bw.WriteString(`,"result":`)
			bw.Write(body)
		}
		bw.WriteString("}\n")
		if br.Buffered() == 0 {
			if bw.Flush() != nil {
				return
			}
		}
	}
}

// countLines sends the length of each line read from r, without holding
// it.
func countLines(r io.Reader, lines chan<- int) {
	buf := make([]byte, 64<<10)
	n := 0
	for {
		k, err := r.Read(buf)
		for _, c := range buf[:k] {
			n++
			if c == '\n' {
				lines <- n
				n = 0
			}
		}
		if err != nil {
			close(lines)
			return
		}
	}
}

// send writes the request with id to the bridge's stdin, building it in
// buf (so that the rig allocates nothing per call).
func (r *pumpRig) send(tb testing.TB, buf []byte, id int) []byte {
	buf = append(buf[:0], `{"jsonrpc":"2.0","id":`...)
	buf = strconv.AppendInt(buf, int64(id), 10)
	buf = append(buf, `,"method":"tools/call","params":{"name":"read"}}`+"\n"...)
	if _, err := r.stdin.Write(buf); err != nil {
		tb.Fatal(err)
	}
	return buf
}

func (r *pumpRig) call(tb testing.TB, id int) int {
	r.send(tb, nil, id)
	return <-r.lines
}

// bigResult is a result of about n bytes, most of it one string.
func bigResult(n int) []byte {
	body := []byte(`{"content":[{"type":"text","text":"`)
	body = append(body, bytes.Repeat([]byte("abcdefghij"), n/10)...)
	return append(body, `"}]}`...)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPump10MB: one 10 MB answer at a time through the bridge; it
// reports the process's CPU per answer (the rig's daemon and client
// included) next to the allocations.
func BenchmarkPump10MB(b *testing.B) {
	b.Run("connect", func(b *testing.B) { benchLarge(b, false) })
	b.Run("floor", func(b *testing.B) { benchLarge(b, true) })
}

func benchLarge(b *testing.B, floor bool) {
	r := startPumpRig(b, bigResult(10<<20), false, floor)
	r.call(b, 0)
	b.ReportAllocs()
	b.SetBytes(10 << 20)
	cpu := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		r.call(b, i+1)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkPumpPipelined: small calls, 64 in flight at a time; allocs/op
// is the bridge's allocations per call (request and answer).
func BenchmarkPumpPipelined(b *testing.B) {
	b.Run("connect", func(b *testing.B) { benchPipelined(b, false) })
	b.Run("floor", func(b *testing.B) { benchPipelined(b, true) })
}

func benchPipelined(b *testing.B, floor bool) {
	r := startPumpRig(b, []byte(`{"content":[{"type":"text","text":"ok"}]}`), false, floor)
	r.call(b, 0)
	b.ReportAllocs()
	cpu := cpuTime()
	b.ResetTimer()
	const window = 64
	sent, buf := 0, make([]byte, 0, 256)
	for got := 0; got < b.N; got++ {
		for sent < b.N && sent-got < window {
			buf = r.send(b, buf, sent+1)
			sent++
		}
		<-r.lines
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e3, "cpu-µs/op")
}
