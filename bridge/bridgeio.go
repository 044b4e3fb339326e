package bridge

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"

	"github.com/mcpmux/mcpmux/jsonrpc"
)

// bridgeLineLimit bounds the lines the bridge holds to learn their ids; a
// longer line is passed through in pieces, untracked.
const bridgeLineLimit = 64 << 20

// lineReader splits a stream into lines: whole lines up to
// bridgeLineLimit, longer ones in pieces as they come.
type lineReader struct {
	br   *bufio.Reader
	line []byte // the whole line being read
	long bool   // a line over the limit is passing in pieces
}

// piece is what lineReader.next returns. Its data is valid until the next
// call (it may lie in the reader's buffer).
type piece struct {
	data  []byte
	whole bool // a whole line of at most bridgeLineLimit bytes
	last  bool // the end of a line (a whole line always is)
	eol   bool // data ends with the line's newline (the stream's last line may lack one)
}

// next returns the next whole line or piece of a long line. The error is
// io.EOF at the end of the stream, after its last line.
func (r *lineReader) next() (piece, error) {
	for {
		chunk, err := r.br.ReadSlice('\n')
		atEOF := errors.Is(err, io.EOF) && (len(chunk) > 0 || len(r.line) > 0 || r.long)
		complete := err == nil || atEOF
		if !complete && !errors.Is(err, bufio.ErrBufferFull) {
			return piece{}, err
		}
		eol := err == nil
		if complete && len(r.line) == 0 && !r.long {
			// The common case: a line that fits the reader's buffer passes
			// as it lies there, without a copy.
			return piece{data: chunk, whole: true, last: true, eol: eol}, nil
		}
		if r.long {
			r.long = !complete
			return piece{data: chunk, last: complete, eol: eol}, nil
		}
		if len(r.line)+len(chunk) > bridgeLineLimit {
			data := append(r.line, chunk...)
			r.line, r.long = nil, !complete
			return piece{data: data, last: complete, eol: eol}, nil
		}
		if len(r.line)+len(chunk) > cap(r.line) {
			// Double: append's growth of large slices would copy a long
			// line many times over.
			r.line = append(make([]byte, 0, max(2*cap(r.line), len(r.line)+len(chunk))), r.line...)
		}
		r.line = append(r.line, chunk...)
		if complete {
			data := r.line
			r.line = r.line[:0]
			if cap(r.line) > 1<<20 {
				r.line = nil // do not keep a long line's buffer for good
			}
			return piece{data: data, whole: true, last: true, eol: eol}, nil
		}
	}
}

// hasLine reports whether a whole line is buffered in br, so that the next
// read returns without waiting.
func hasLine(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

var newline = []byte{'\n'}

// readStdin forwards the client's lines to the link up, waiting for one
// while the bridge reconnects. A last line that lacks its newline gets
// one, so that `printf '{...}' | mcpmux connect NAME` is answered. Lines
// that arrive together leave together: they are flushed whenever the next
// read may wait. It returns nil at EOF or once the bridge is over.
func (b *bridge) readStdin(stdin io.Reader) error {
	lr := lineReader{br: bufio.NewReaderSize(stdin, 64<<10)}
	var last, long *link // the link written last; the one a long line goes to
	var scan frameScan   // of the line being delivered; kept to spare its clearing out of the loop
	defer func() {
		if last != nil {
			last.flush()
		}
	}()
	for {
		if last != nil && !hasLine(lr.br) {
			last.flush()
		}
		p, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if p.whole {
			if last = b.deliver(&scan, p.data, !p.eol); last == nil {
				return nil
			}
			continue
		}
		// A long line goes, untracked, to the link up when it began; if
		// that link is lost meanwhile, the rest of the line goes with it.
		if long == nil {
			if long = b.slot.get(); long == nil {
				return nil
			}
		}
		long.t.spoil()
		long.write(p.data)
		if p.last {
			if !p.eol {
				long.write(newline)
			}
			last, long = long, nil
		}
	}
}

// deliver sends one whole line to the link up, noting what it asks and
// sets up first: the answers to its requests can come back as soon as its
// last byte is out. A line is checked and scanned for its id and method;
// only one that sets the session up (memory.mustParse), or is not JSON,
// is parsed. A link lost
// before the line was noted on it is not written to: the line waits for
// the next one. nil: the bridge is over.
func (b *bridge) deliver(scan *frameScan, line []byte, addNewline bool) *link {
	*scan = frameScan{}
	scan.feed(line)
	var a asks
	// A line that is not JSON is answered with id null (the daemon cannot
	// read its id): it asks nothing the bridge can wait for.
	if !jsonrpc.Valid(line) || b.mem.mustParse(scan) {
		a.msgs = messages(line)
		b.mem.noteSent(a.msgs)
	} else if scan.hasMethod {
		a.id = scan.idOf()
	}
	for {
		l := b.slot.get()
		if l == nil {
			return nil
		}
		var tail []byte
		if addNewline {
			tail = newline
		}
		if !l.t.sentLine(a, line, tail) {
			continue // lost: get waits for the next link
		}
		l.write(line)
		if addNewline {
			l.write(newline)
		}
		return l
	}
}

// daemonFrame is the frame the socket reader is passing on, across the
// pieces of a line longer than its buffer.
type daemonFrame struct {
	open bool      // a frame is passing: its first piece was written
	scan frameScan // its head, for its id
}

// readSocket pumps the daemon's lines to stdout while the link is up,
// through the link's read buffer, byte for byte: a line that fits the
// buffer is written from it, and a longer one piece by piece as it comes,
// never held whole. Each line's head is scanned for its id, to settle the
// request it answers once its last byte is written. The rare line the
// bridge must read (daemonMustParse) is parsed, and held whole to do so;
// such lines are how it keeps from the client the answers to replayed
// requests, and stops at a refusal of the session. It returns nil when
// the daemon or the bridge closed the link.
func (b *bridge) readSocket(l *link) error {
	var f daemonFrame
	for {
		if !hasLine(l.br) {
			if err := b.out.Flush(); err != nil {
				return &stdoutError{err}
			}
		}
		chunk, err := l.br.ReadSlice('\n')
		if len(chunk) > 0 && !l.heard.Load() {
			l.heard.Store(true)
			l.t.spoke()
		}
		atEOF := errors.Is(err, io.EOF) && (len(chunk) > 0 || f.open)
		if err == nil || atEOF || errors.Is(err, bufio.ErrBufferFull) {
			err := b.pump(l, &f, chunk, err == nil || atEOF, err == nil)
			if err != nil && linkEnded(err) {
				return nil // in a line read whole (readHeld)
			}
			if err != nil {
				return err
			}
			continue
		}
		if f.open { // cut short as the daemon went: keep stdout in lines
			b.out.Write(newline)
		}
		if ferr := b.out.Flush(); ferr != nil {
			return &stdoutError{ferr}
		}
		if linkEnded(err) {
			return nil
		}
		return err
	}
}

// linkEnded reports the errors of a link the daemon or the bridge closed.
func linkEnded(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed)
}

// pump passes one piece of the daemon's stream to stdout: a whole line
// (last), or a piece of a longer one; eol: it ends with the newline.
func (b *bridge) pump(l *link, f *daemonFrame, chunk []byte, last, eol bool) error {
	s := &f.scan
	if !f.open {
		*s = frameScan{}
		s.feed(chunk)
		// The last line, cut short as the daemon went, is read whole, as
		// it may still be a whole message.
		if b.daemonMustParse(l, s) || last && !eol {
			if last {
				return b.passLine(l, piece{data: chunk, whole: true, last: true, eol: eol})
			}
			return b.readHeld(l, chunk)
		}
	} else if !s.done {
		s.feed(chunk)
	}
	if _, err := b.out.Write(chunk); err != nil {
		return &stdoutError{err}
	}
	if f.open = !last; !last {
		return nil
	}
	if !eol { // cut short as the daemon went: it answers nothing; keep stdout in lines
		b.out.Write(newline)
		return nil
	}
	if s.hasID && s.outcome && !s.hasMethod && !s.odd {
		id := s.idOf()
		l.t.settle(id)
		if len(l.swallow) > 0 { // an answer to a replayed request, streamed as it came late in its frame
			delete(l.swallow, string(id))
		}
		b.mem.answered(id)
	}
	return nil
}

// daemonMustParse reports whether the line whose head s scanned must be
// read whole: a batch, one the scan cannot read, an answer to a replayed
// request or to the client's initialize (whose version memory notes), or
// an error with id null (a refusal of the session).
func (b *bridge) daemonMustParse(l *link, s *frameScan) bool {
	if s.odd || s.batch {
		return true
	}
	if !s.hasID || !s.outcome || s.hasMethod {
		return false
	}
	id := s.idOf()
	return s.isError && string(id) == "null" || l.swallow[string(id)] || b.mem.isInitAnswer(id)
}

// readHeld reads the rest of a line the bridge must read, whose first
// piece is head, holding it whole (up to bridgeLineLimit), and passes it
// on.
func (b *bridge) readHeld(l *link, head []byte) error {
	lr := lineReader{br: l.br, line: append([]byte(nil), head...)}
	for {
		p, err := lr.next()
		if err != nil {
			if ferr := b.out.Flush(); ferr != nil {
				return &stdoutError{ferr}
			}
			return err
		}
		if err := b.passLine(l, p); err != nil || p.last {
			return err
		}
	}
}

// passLine passes on a line the bridge reads, or a piece of one too long
// to hold: a whole line settles the requests it answers, and may be kept
// from the client, or be a refusal of the session.
func (b *bridge) passLine(l *link, p piece) error {
	if p.whole {
		forward, refused := b.fromDaemon(l, p.data)
		if refused != nil {
			if err := b.out.Flush(); err != nil {
				return &stdoutError{err}
			}
			return refused
		}
		if !forward {
			return nil
		}
	}
	if _, err := b.out.Write(p.data); err != nil {
		return &stdoutError{err}
	}
	if p.last && !p.eol { // cut short as the daemon went: keep stdout in lines
		b.out.Write(newline)
	}
	return nil
}

// fromDaemon looks at one whole line from the daemon: the requests it
// answers are settled, and forward says whether the client gets it.
func (b *bridge) fromDaemon(l *link, line []byte) (forward bool, refused *refusal) {
	msgs := messages(line)
	for _, m := range msgs {
		if m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError {
			l.t.settle(m.ID)
			b.mem.noteAnswer(m)
		}
	}
	if len(msgs) != 1 || jsonrpc.IsBatch(line) {
		return true, nil
	}
	m := msgs[0]
	if (m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError) && l.swallow[string(m.ID)] {
		delete(l.swallow, string(m.ID))
		return false, nil
	}
	if r := refusalOf(m); r != nil {
		return false, r
	}
	return true, nil
}

// messages parses a line, or each element of a batch, ignoring what does
// not parse: the daemon answers that itself.
func messages(line []byte) []*jsonrpc.Message {
	if jsonrpc.IsBatch(line) {
		elems, err := jsonrpc.SplitBatch(line)
		if err != nil {
			return nil
		}
		var out []*jsonrpc.Message
		for _, el := range elems {
			if m, err := jsonrpc.Parse(el); err == nil {
				out = append(out, m)
			}
		}
		return out
	}
	m, err := jsonrpc.Parse(line)
	if err != nil {
		return nil
	}
	return []*jsonrpc.Message{m}
}
