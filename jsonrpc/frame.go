package jsonrpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// readBufferSize is the read buffer a Reader starts with and goes back to.
// A daemon holds one per idle session, so it is small.
const readBufferSize = 512

// grownBufferSize is the read buffer a small Reader takes, from a pool,
// for a frame that does not fit its own, or for a run of frames that came
// in one read (a client that pipelines), and gives back once it has
// nothing buffered: a large frame, or a run, is read in fewer, larger
// pieces.
const grownBufferSize = 64 << 10

// grown is a pooled grown buffer, reading first what the small one held
// when it took over (pre), then the source.
type grown struct {
	br  *bufio.Reader
	pre prefixed
}

// prefixed reads b, then src.
type prefixed struct {
	b   []byte
	src io.Reader
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		return p.src.Read(b)
	}
	n := copy(b, p.b)
	p.b = p.b[n:]
	return n, nil
}

// grownPool recycles the grown buffers of Readers.
var grownPool = sync.Pool{New: func() any { return &grown{br: bufio.NewReaderSize(nil, grownBufferSize)} }}

// maxCapturedID bounds the id bytes kept while skipping an oversized frame.
const maxCapturedID = 1 << 10

// maxKeyBytes is the longest spelling of a member name the scan looks for:
// "method" (or "result") with every letter escaped.
const maxKeyBytes = len(`\u006d\u0065\u0074\u0068\u006f\u0064`)

// TooLargeError reports a frame longer than the reader's limit. The frame was
// consumed through its newline without being held in memory; the stream is
// still usable.
type TooLargeError struct {
	Size  int64           // bytes in the frame, newline excluded
	Limit int             // the limit it broke
	ID    json.RawMessage // its top-level id, when the skipping scan found exactly one valid id; else nil
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("jsonrpc: message of %d bytes is over the limit of %d", e.Size, e.Limit)
}

// Reader reads newline-delimited frames.
type Reader struct {
	br      *bufio.Reader // small, or grown's while a large frame or a run is read
	small   *bufio.Reader // the Reader's own buffer
	grown   *grown        // nil: reading with small
	src     io.Reader
	limit   int
	large   bool // frames over largeFrame are checked as read, in pooled buffers
	checked bool // the frame the last Read returned was checked as it was read
}

// CheckLargeFrames makes the Reader check each frame of more than 64 KiB
// as it reads it (Checked) and put it together in a pooled buffer
// (Recycle). A server's stdout reader does: its frames are answers, each
// parsed once and, when plain, given back once written. Other readers put
// large frames together in buffers of their own, and Parse checks them.
func (r *Reader) CheckLargeFrames() { r.large = true }

// NewReader returns a Reader that refuses frames longer than limit bytes.
// Its buffer is small, for readers that a daemon holds by the thousand.
func NewReader(r io.Reader, limit int) *Reader {
	return NewReaderSize(r, limit, readBufferSize)
}

// NewReaderSize is NewReader with a read buffer of size bytes: a reader that
// carries a lot (a server's stdout, shared by every session) reads it in
// fewer, larger pieces.
func NewReaderSize(r io.Reader, limit, size int) *Reader {
	br := bufio.NewReaderSize(r, size)
	return &Reader{br: br, small: br, src: r, limit: limit}
}

// Reset makes the Reader read from r, keeping its buffer; what it had
// buffered is dropped.
func (r *Reader) Reset(src io.Reader) {
	r.release()
	r.src = src
	r.br.Reset(src)
}

// grow moves reading to a pooled grown buffer, which takes over what the
// small one holds: nothing is lost, and nothing more is read from the
// source to move it.
func (r *Reader) grow() {
	if r.grown != nil || r.small.Size() >= grownBufferSize {
		return
	}
	g := grownPool.Get().(*grown)
	n := r.small.Buffered()
	g.pre.b, _ = r.small.Peek(n) // valid until small reads again: after shrink
	g.pre.src = r.src
	g.br.Reset(&g.pre)
	if n > 0 {
		g.br.Peek(n) // copies pre into the grown buffer, reading nothing else
	}
	r.grown, r.br = g, g.br
}

// shrink goes back to the small buffer once the grown one holds nothing.
func (r *Reader) shrink() {
	if r.grown != nil && r.br.Buffered() == 0 {
		r.release()
	}
}

// release gives the grown buffer back, with whatever it holds.
func (r *Reader) release() {
	g := r.grown
	if g == nil {
		return
	}
	g.br.Reset(nil)
	g.pre = prefixed{}
	grownPool.Put(g)
	r.grown, r.br = nil, r.small
	r.small.Reset(r.src)
}

// HasLine reports whether the first buffered line is whole and not blank,
// so that the next Read returns without waiting for input. (A blank line
// first makes it report false, a flush too many for a caller that batches,
// never one too few.) A reader that holds back work while more input is at
// hand asks it before each Read.
func (r *Reader) HasLine() bool {
	b, _ := r.br.Peek(r.br.Buffered())
	i := bytes.IndexByte(b, '\n')
	return i >= 0 && skipSpace(b[:i], 0) < i
}

// Read returns the next non-blank line, without its line ending, in a slice
// the caller owns. A line over the limit is skipped and reported as a
// *TooLargeError, after which Read may be called again. Any other error
// (io.EOF when the peer hung up) ends the stream.
func (r *Reader) Read() ([]byte, error) {
	for {
		frame, err := r.readLine()
		if err != nil {
			return nil, err
		}
		if skipSpace(frame, 0) < len(frame) { // blank means JSON whitespace only
			return frame, nil
		}
	}
}

func (r *Reader) readLine() ([]byte, error) {
	r.shrink()
	r.checked = false
	chunk, err := r.br.ReadSlice('\n')
	if err != nil || len(chunk) > min(r.limit, largeFrame) {
		return r.readLong(chunk, err)
	}
	// The common case, a whole line in the buffer, is copied out here;
	// readLong holds what a long one needs, off the frame an idle session
	// parks under.
	frame := trimEOL(append(make([]byte, 0, len(chunk)), chunk...))
	if r.grown == nil && r.br.Buffered() > 0 {
		// More than this frame came in one read: a run of them, read
		// on in larger pieces until it ends.
		r.grow()
	}
	return frame, nil
}

// readLong goes on with a line whose first chunk (and ReadSlice's error for
// it) readLine has: one over the buffer, over the limit, or over
// largeFrame, or the stream's end.
func (r *Reader) readLong(chunk []byte, err error) ([]byte, error) {
	var (
		l    longLine
		size int64
	)
	for {
		size += int64(len(chunk))
		full := errors.Is(err, bufio.ErrBufferFull)
		l.take(chunk, r.limit, full, r.large)
		if full {
			r.grow()
			chunk, err = r.br.ReadSlice('\n')
			continue
		}
		if err != nil && !(errors.Is(err, io.EOF) && size > 0) {
			l.drop()
			return nil, err
		}
		if l.scan != nil {
			return nil, &TooLargeError{Size: size - int64(l.scan.eol()), Limit: r.limit, ID: l.scan.id()}
		}
		frame := trimEOL(l.join(chunk))
		if len(frame) > r.limit { // over the limit by its last byte or two
			scan := new(idScanner)
			scan.feed(frame)
			Recycle(frame)
			return nil, &TooLargeError{Size: int64(len(frame)), Limit: r.limit, ID: scan.id()}
		}
		r.checked = l.check != nil && l.check.valid()
		return frame, nil
	}
}

// Checked reports whether the frame the last Read returned was checked as
// it was read, and found valid UTF-8 JSON: a frame of more than 64 KiB is
// checked a buffer-full at a time, while those bytes are in the cache, and
// ParseChecked then parses it without a second pass. When Checked is false
// the frame is unchecked (or invalid): Parse it.
func (r *Reader) Checked() bool { return r.checked }

// longLine is a line being read in more than one piece. Past largeFrame
// bytes it is checked as it is read, and gathered in a buffer from
// framePool while that has room, in pooled fragments before framePool has
// one free (they then move into it) and after it is full; its end puts it
// together: in the pooled buffer when the whole line fits (one copy in
// all), else in one of its size and a little more (headroom). It never
// grows a buffer by doubling, which would leave a trail of garbage as large
// again.
type longLine struct {
	big   []byte   // a pooled buffer, holding the line's first bytes
	frags [][]byte // copies of the buffer-fulls after those
	n     int      // bytes in frags
	check *checker
	scan  *idScanner // past the limit: the line is skipped, its id looked for
}

// take adds a piece of the line; more: it is not the last. Past the limit
// the line is only scanned for its id; past largeFrame, if large, it is
// checked and goes into a pooled buffer.
func (l *longLine) take(chunk []byte, limit int, more, large bool) {
	if l.scan == nil && len(l.big)+l.n+len(chunk)-2 > limit { // room for "\r\n"; no overflow at math.MaxInt
		l.scan = new(idScanner)
		l.each(l.scan.feed)
		l.drop()
	}
	if l.scan != nil {
		l.scan.feed(chunk)
		return
	}
	if large && l.check == nil && l.n+len(chunk) > largeFrame {
		l.check = new(checker)
		l.each(l.check.feed)
	}
	if l.check != nil && l.big == nil {
		// Again at each piece while none was free: the writer of the last
		// large answer may give its buffer back only as this one is read.
		l.takeBuffer()
	}
	if l.check != nil {
		l.check.feed(chunk)
	}
	switch {
	case !more:
	case l.fits(len(chunk)):
		l.big = append(l.big, chunk...)
	default:
		// ReadSlice's buffer is reused: keep a copy.
		l.frags = append(l.frags, getFrag(chunk))
		l.n += len(chunk)
	}
}

// takeBuffer takes a pooled buffer for the line, and moves into it the
// fragments read so far when they fit.
func (l *longLine) takeBuffer() {
	p, ok := framePool.Get().(*[]byte)
	if !ok {
		return
	}
	l.big = (*p)[:0]
	if cap(l.big) < l.n {
		return
	}
	for _, f := range l.frags {
		l.big = append(l.big, f...)
		putFrag(f)
	}
	l.frags, l.n = nil, 0
}

// fits reports whether n more bytes go into the pooled buffer: there is
// one, nothing went past it yet, and it has room.
func (l *longLine) fits(n int) bool {
	return l.big != nil && l.frags == nil && len(l.big)+n <= cap(l.big)
}

// each calls fn with what the line holds so far, in order.
func (l *longLine) each(fn func([]byte)) {
	fn(l.big)
	for _, f := range l.frags {
		fn(f)
	}
}

// join puts the line together, last the final piece, in a slice of its own.
func (l *longLine) join(last []byte) []byte {
	if l.fits(len(last)) {
		return append(l.big, last...)
	}
	if l.big == nil && l.frags == nil {
		return append(make([]byte, 0, len(last)), last...)
	}
	n := len(l.big) + l.n + len(last)
	frame := make([]byte, 0, n+n/headroom)
	l.each(func(b []byte) { frame = append(frame, b...) })
	frame = append(frame, last...)
	l.drop()
	return frame
}

// headroom: a large line put together in memory of its own gets 1/headroom
// more room than it needs, so that once recycled it takes the next answers
// even when they are a little longer (a longer id, a count with one more
// digit): exactly its size, an answer one byte longer, every other one when
// two clients' ids differ in length, was put together in fresh memory again.
const headroom = 16

// drop gives the fragments and the pooled buffer back.
func (l *longLine) drop() {
	for _, f := range l.frags {
		putFrag(f)
	}
	if l.big != nil {
		Recycle(l.big)
	}
	l.big, l.frags, l.n = nil, nil, 0
}

// framePool recycles the buffers that frames of more than largeFrame bytes
// are put together in: Recycle gives them back.
var framePool sync.Pool // of *[]byte

// Recycle gives back the buffer of a frame that Read returned, once
// nothing refers to any of its bytes any more (nor ever will): the next
// large frame is read into it, without the page faults and the garbage of
// a fresh buffer of megabytes. frame must start where the frame Read
// returned started; its length does not matter. A frame of at most 64 KiB
// is left to the garbage collector, and so is any frame never recycled.
func Recycle(frame []byte) {
	if cap(frame) <= largeFrame {
		return
	}
	b := frame[:0]
	framePool.Put(&b)
}

// fragPool recycles the copies of buffer-fulls that long lines are
// gathered in, so that a stream of large answers does not fault in fresh
// memory for each.
var fragPool sync.Pool

// getFrag returns a copy of chunk, in a pooled buffer when one is big
// enough.
func getFrag(chunk []byte) []byte {
	if p, ok := fragPool.Get().(*[]byte); ok && cap(*p) >= len(chunk) {
		return append((*p)[:0], chunk...)
	}
	return bytes.Clone(chunk)
}

// putFrag gives a fragment's buffer back to the pool.
func putFrag(f []byte) {
	if cap(f) > 1<<20 {
		return
	}
	fragPool.Put(&f)
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// idScanner finds the top-level "id" member of a JSON object fed to it in
// pieces, holding only a bounded copy of that member's value. It assumes
// nothing about the input's validity and gives up (no id) on anything odd.
type idScanner struct {
	started, bad bool
	depth        int
	inStr, esc   bool
	expectKey    bool // at depth 1, the next string is a member name
	inKey        bool
	key          []byte // the member name as written, up to maxKeyBytes
	keyLong      bool   // too long to be any spelling of "id"
	afterKey     bool   // a member name was read; its ':' is next
	capturing    bool
	val          []byte
	valLong      bool
	found        int
	method       bool // a top-level "method" member was seen
	outcome      bool // a top-level "result" or "error" member was seen
	lastTwo      [2]byte
}

func (s *idScanner) feed(p []byte) {
	switch len(p) {
	case 0:
		return
	case 1:
		s.lastTwo[0], s.lastTwo[1] = s.lastTwo[1], p[0]
	default:
		s.lastTwo[0], s.lastTwo[1] = p[len(p)-2], p[len(p)-1]
	}
	for _, b := range p {
		switch {
		case s.bad:
			return
		case !s.started:
			s.begin(b)
		default: // inside the object: capture and stringByte inline here
			if s.capturing {
				s.capture(b)
			}
			if s.inStr {
				s.stringByte(b)
			} else {
				s.structural(b)
			}
		}
	}
}

// begin takes a byte before the object: whitespace, or the opening brace.
func (s *idScanner) begin(b byte) {
	switch b {
	case ' ', '\t', '\r', '\n':
	case '{':
		s.started, s.depth, s.expectKey = true, 1, true
	default:
		s.bad = true
	}
}

// capture keeps b as part of the id's value, or ends the value at the
// comma or brace that closes the member.
func (s *idScanner) capture(b byte) {
	if !s.inStr && s.depth == 1 && (b == ',' || b == '}') {
		s.capturing = false
		return
	}
	if len(s.val) < maxCapturedID {
		s.val = append(s.val, b)
	} else {
		s.valLong = true
	}
}

// stringByte takes a byte inside a string, of a member name or a value.
func (s *idScanner) stringByte(b byte) {
	switch {
	case s.esc:
		s.esc = false
	case b == '\\':
		s.esc = true
	case b == '"':
		s.inStr = false
		if s.inKey {
			s.inKey, s.afterKey = false, true
		}
		return // the closing quote is no part of the name
	}
	if !s.inKey {
		return
	}
	if len(s.key) < maxKeyBytes {
		s.key = append(s.key, b)
	} else {
		s.keyLong = true
	}
}

// structural takes a byte outside strings: it tracks the depth and, at the
// top level, which string is a member name and where an id's value starts.
func (s *idScanner) structural(b byte) {
	switch b {
	case '"':
		s.inStr = true
		if s.depth == 1 && s.expectKey {
			s.inKey, s.expectKey, s.keyLong = true, false, false
			s.key = s.key[:0]
		}
	case ':':
		if s.depth == 1 && s.afterKey {
			s.afterKey = false
			switch {
			case s.keyIs("id"):
				s.found++
				s.capturing, s.val, s.valLong = true, s.val[:0], false
			case s.keyIs("method"):
				s.method = true
			case s.keyIs("result"), s.keyIs("error"):
				s.outcome = true
			}
		}
	case '{', '[':
		s.depth++
	case '}', ']':
		s.depth--
		if s.depth < 0 {
			s.bad = true
		}
	case ',':
		if s.depth == 1 {
			s.expectKey = true
		}
	}
}

// keyIs reports whether the member name just read is name, in any
// spelling: Parse decodes escaped names, so "\u0069d" is an id too. Names
// longer than maxKeyBytes are never compared.
func (s *idScanner) keyIs(name string) bool {
	switch {
	case s.keyLong:
		return false
	case bytes.IndexByte(s.key, '\\') < 0:
		return string(s.key) == name
	}
	return keyEquals(append(append([]byte{'"'}, s.key...), '"'), true, name)
}

// eol reports how many line-ending bytes ended the input: those trimEOL
// removes ("\n", "\r\n", or a "\r" at the end of the stream).
func (s *idScanner) eol() int {
	switch {
	case s.lastTwo[1] == '\r':
		return 1
	case s.lastTwo[1] != '\n':
		return 0
	case s.lastTwo[0] == '\r':
		return 2
	}
	return 1
}

// ResponseID is the id of a frame that has the shape of a response (a
// top-level "result" or "error" member and no "method"), found by a scan
// that needs the frame to be neither valid JSON nor valid UTF-8: the id of
// an answer that Parse refuses, so that its request can be told. It is nil
// when the frame has no such shape, no id, more than one, or one MCP does
// not allow.
func ResponseID(frame []byte) json.RawMessage {
	var s idScanner
	s.feed(frame)
	if s.method || !s.outcome {
		return nil
	}
	return s.id()
}

func (s *idScanner) id() json.RawMessage {
	if s.bad || s.found != 1 || s.valLong || s.capturing {
		return nil
	}
	v := bytes.TrimSpace(s.val)
	if validID(v) {
		return json.RawMessage(bytes.Clone(v))
	}
	return nil
}

// validID reports whether v is an id MCP allows: a JSON string or integer.
func validID(v []byte) bool {
	if len(v) == 0 || !valid(v) {
		return false
	}
	switch v[0] {
	case '"':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return !bytes.ContainsAny(v, ".eE")
	}
	return false
}
