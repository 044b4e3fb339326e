package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
)

// maxStderrLine bounds one logged stderr line; the rest of a longer line is
// dropped and truncatedMark appended.
const (
	maxStderrLine = 8 << 10
	truncatedMark = " …[truncated]"
)

// stderrLoop reads the server's stderr until EOF (or until waitLoop closes
// the pipe): into copyTo if set, else line by line into the log and the tail.
func (p *Process) stderrLoop(copyTo io.Writer) {
	defer close(p.errDone)
	if copyTo != nil {
		_, _ = io.Copy(copyTo, p.stderr) // where it goes is the caller's business
		return
	}
	br := bufio.NewReaderSize(p.stderr, maxStderrLine)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			line := string(bytes.TrimRight(chunk, "\r\n")) // a copy: the buffer is reused
			if errors.Is(err, bufio.ErrBufferFull) {
				line += truncatedMark
				for errors.Is(err, bufio.ErrBufferFull) {
					_, err = br.ReadSlice('\n')
				}
			}
			if line != "" {
				line = strings.ToValidUTF8(line, "\uFFFD")
				p.tail.add(line)
				p.log.Info("server stderr", "stderr", line)
			}
		}
		if err != nil {
			return
		}
	}
}

// ring keeps the last lines added to it.
type ring struct {
	mu    sync.Mutex
	buf   []string
	next  int // where the next line goes
	count int // lines held, up to len(buf)
}

func newRing(n int) *ring { return &ring{buf: make([]string, n)} }

func (r *ring) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf[r.next] = line
	r.next = (r.next + 1) % len(r.buf)
	r.count = min(r.count+1, len(r.buf))
}

// lines returns the lines held, oldest first, in a new slice.
func (r *ring) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, r.count)
	start := (r.next - r.count + len(r.buf)) % len(r.buf)
	for i := range r.count {
		out = append(out, r.buf[(start+i)%len(r.buf)])
	}
	return out
}
