package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Kind is what a message is, by its envelope.
type Kind uint8

const (
	KindInvalid      Kind = iota
	KindRequest           // method and id
	KindNotification      // method, no id
	KindResult            // id and result
	KindError             // id (possibly null) and error
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResult:
		return "result"
	case KindError:
		return "error"
	}
	return "invalid"
}

// Span is a half-open byte range [Start, End) inside a frame.
type Span struct{ Start, End int }

// Message is a parsed envelope. Its raw fields are subslices of Frame and
// must not be modified; rewrites go through Splice and make a new frame.
type Message struct {
	Frame  []byte
	Kind   Kind
	Method string
	ID     json.RawMessage // nil when absent; "null" only on an error response
	Params json.RawMessage // nil when absent
	Result json.RawMessage
	Error  json.RawMessage

	idSpan     Span
	paramsSpan Span
}

// reserved member names, in the exact case the protocol spells them.
var reserved = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// Indexes into reserved.
const (
	rJSONRPC = iota
	rID
	rMethod
	rParams
	rResult
	rError
)

// Parse parses one frame strictly. On failure the error is a *Error whose
// Reason is parse_error or invalid_request; the returned *Message is then
// still non-nil and carries the frame's id if one was readable and valid, so
// that the caller can address its error response.
func Parse(frame []byte) (*Message, error) {
	var top topMembers
	if err := checkJSON(frame, &top); err != nil {
		return &Message{Frame: frame}, err
	}
	if top.n > maxTop {
		return ParseChecked(frame)
	}
	return parseMembers(frame, &top)
}

// ParseChecked is Parse for a frame already known to be valid UTF-8 JSON
// (its Reader said Checked): it skips that check, the one pass over every
// byte of a large frame. Given anything else, its results are undefined.
func ParseChecked(frame []byte) (*Message, error) { return parseMembers(frame, nil) }

// parseMembers parses a valid JSON frame whose top-level members are top,
// or, when top is nil, found by walking it.
func parseMembers(frame []byte, top *topMembers) (*Message, error) {
	m := &Message{Frame: frame}
	if err := checkObject(frame); err != nil {
		return m, err
	}
	e := members{frame: frame}
	if top == nil {
		eachMember(frame, skipSpace(frame, 0), e.member)
	} else {
		for i := range top.n { // at most maxTop: Parse sees to it
			key, escaped := frame[top.keys[i].Start+1:top.keys[i].End-1], false
			if bytes.IndexByte(key, '\\') >= 0 {
				key, escaped = frame[top.keys[i].Start:top.keys[i].End], true
			}
			e.member(key, escaped, top.vals[i])
		}
	}
	// The id first, so that every later complaint can be addressed.
	m.takeID(&e)
	if e.problem != "" {
		return m, invalid(e.problem)
	}
	if err := e.checkVersion(); err != nil {
		return m, err
	}
	if e.have[rParams] {
		v := e.val(rParams)
		if v[0] != '{' && v[0] != '[' {
			return m, invalid(`member "params" must be an object or an array`)
		}
		m.Params, m.paramsSpan = v, e.seen[rParams]
	}
	if e.have[rMethod] {
		return m, m.takeMethod(&e)
	}
	return m, m.takeOutcome(&e)
}

// checkObject checks that a valid JSON frame is an object.
func checkObject(frame []byte) error {
	switch frame[skipSpace(frame, 0)] {
	case '{':
		return nil
	case '[':
		return invalid("a batch is not allowed here")
	}
	return invalid("a message must be a JSON object")
}

// members is what Parse's scan of a frame's top-level members found: where
// each reserved member's value is, and the first thing wrong. The scan goes
// on after a problem, so that the id is found wherever it sits.
type members struct {
	frame       []byte
	seen        [len(reserved)]Span
	have        [len(reserved)]bool
	problem     string // the first problem; "" if none yet
	ambiguousID bool   // two ids: answer with null rather than guess
}

// fail keeps the first problem.
func (e *members) fail(p string) {
	if e.problem == "" {
		e.problem = p
	}
}

// val is the value of reserved member r, which the frame has.
func (e *members) val(r int) []byte { return e.frame[e.seen[r].Start:e.seen[r].End] }

// member is eachMember's callback: it records a reserved member, or what is
// wrong with its name. It always asks for the next member.
func (e *members) member(key []byte, escaped bool, v Span) bool {
	name := string(key)
	if escaped {
		var s string
		if json.Unmarshal(key, &s) != nil {
			e.fail("member name is not a valid string")
			return true
		}
		name = s
	}
	for r, want := range reserved {
		switch {
		case name == want:
			if e.have[r] {
				e.fail("member " + strconvQuote(want) + " appears twice")
				e.ambiguousID = e.ambiguousID || r == rID
				break // keep the first; read on for the id
			}
			e.have[r], e.seen[r] = true, v
		case mayFold(name, want) && strings.EqualFold(name, want):
			// A copy: name must not escape, so that it costs no allocation.
			e.fail("member " + strconvQuote(strings.Clone(name)) + " is a miscased " + strconvQuote(want))
		}
	}
	return true
}

// takeID gives m the frame's id, if it has exactly one and it is valid: a
// string or an integer, or null on an error response (the answer to a
// frame whose id could not be read). An id of another kind is a problem.
func (m *Message) takeID(e *members) {
	if !e.have[rID] || e.ambiguousID {
		return
	}
	id := e.val(rID)
	if validID(id) || string(id) == "null" && e.have[rError] && !e.have[rMethod] {
		m.ID, m.idSpan = id, e.seen[rID]
		return
	}
	e.fail("id must be a string or an integer")
}

// checkVersion checks for "jsonrpc": "2.0", however the string is spelled.
func (e *members) checkVersion() error {
	if !e.have[rJSONRPC] {
		return invalid(`member "jsonrpc" is missing`)
	}
	if v := e.val(rJSONRPC); string(v) != `"2.0"` {
		var s string
		if json.Unmarshal(v, &s) != nil || s != "2.0" {
			return invalid(`member "jsonrpc" must be "2.0"`)
		}
	}
	return nil
}

// takeMethod makes m a request or a notification.
func (m *Message) takeMethod(e *members) error {
	v := e.val(rMethod)
	if v[0] != '"' {
		return invalid(`member "method" must be a string`)
	}
	if e.have[rResult] || e.have[rError] {
		return invalid(`a message with "method" cannot carry "result" or "error"`)
	}
	if bytes.IndexByte(v, '\\') < 0 {
		// Valid UTF-8 JSON with no escape: the bytes are the string.
		m.Method = methodName(v[1 : len(v)-1])
	} else if err := json.Unmarshal(v, &m.Method); err != nil {
		return invalid(`member "method" is not a valid string`)
	}
	if e.have[rID] {
		m.Kind = KindRequest
	} else {
		m.Kind = KindNotification
	}
	return nil
}

// takeOutcome makes m a result or an error response, for a frame without
// "method".
func (m *Message) takeOutcome(e *members) error {
	switch {
	case e.have[rParams]:
		return invalid(`member "params" is only allowed with "method"`)
	case e.have[rResult] && e.have[rError]:
		return invalid(`a response cannot carry both "result" and "error"`)
	case !e.have[rResult] && !e.have[rError]:
		return invalid(`member "method" is missing`)
	case !e.have[rID]:
		return invalid(`a response must carry "id"`)
	case e.have[rResult]:
		if string(m.ID) == "null" {
			return invalid("id must be a string or an integer")
		}
		m.Kind, m.Result = KindResult, e.val(rResult)
		return nil
	}
	v := e.val(rError)
	if v[0] != '{' {
		return invalid(`member "error" must be an object`)
	}
	m.Kind, m.Error = KindError, v
	return nil
}

// mayFold is a quick test before strings.EqualFold(name, want), for an
// ASCII want in lower case: an ASCII first byte of name can only fold to
// its own other case, so most names are ruled out by their first byte.
func mayFold(name, want string) bool {
	return len(name) > 0 && (name[0] >= utf8.RuneSelf || name[0]|0x20 == want[0])
}

func invalid(detail string) *Error {
	return &Error{Code: CodeInvalidRequest, Message: "invalid request: " + detail, Reason: ReasonInvalidRequest}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// IDSpan is where the id value sits in Frame; ok is false when there is none.
func (m *Message) IDSpan() (Span, bool) { return m.idSpan, m.ID != nil }

// ParamsPath finds the value at a path of member names inside params, such as
// ("_meta", "progressToken"), and returns its span in Frame. Where a name
// appears more than once in an object, the last one counts, as it does for
// most JSON decoders.
func (m *Message) ParamsPath(path ...string) (Span, bool) {
	if m.Params == nil {
		return Span{}, false
	}
	s, ok := FindPath(m.Params, path...)
	if !ok {
		return Span{}, false
	}
	off := m.paramsSpan.Start
	return Span{s.Start + off, s.End + off}, true
}

// IsBatch reports whether a frame (assumed valid JSON) is an array.
func IsBatch(frame []byte) bool {
	i := skipSpace(frame, 0)
	return i < len(frame) && frame[i] == '['
}

// SplitBatch returns the elements of a batch frame, as subslices of it. An
// empty array, or a frame that is not valid UTF-8 JSON, is an error.
func SplitBatch(frame []byte) ([][]byte, error) {
	if err := CheckJSON(frame); err != nil {
		return nil, err
	}
	i := skipSpace(frame, 0)
	if frame[i] != '[' {
		return nil, invalid("not a batch")
	}
	var elems [][]byte
	i = skipSpace(frame, i+1)
	for frame[i] != ']' {
		end := skipValue(frame, i)
		elems = append(elems, frame[i:end])
		i = skipSpace(frame, end)
		if frame[i] == ',' {
			i = skipSpace(frame, i+1)
		}
	}
	if len(elems) == 0 {
		return nil, invalid("empty batch")
	}
	return elems, nil
}

// FindPath walks a valid JSON value through a path of object member names
// and returns the span of the value it reaches, relative to v.
func FindPath(v []byte, path ...string) (Span, bool) {
	cur := Span{skipSpace(v, 0), len(v)}
	for _, name := range path {
		if cur.Start >= len(v) || v[cur.Start] != '{' {
			return Span{}, false
		}
		var found Span
		ok := false
		eachMember(v, cur.Start, func(key []byte, escaped bool, val Span) bool {
			if keyEquals(key, escaped, name) {
				found, ok = val, true
			}
			return true
		})
		if !ok {
			return Span{}, false
		}
		cur = found
	}
	return cur, true
}

func keyEquals(key []byte, escaped bool, name string) bool {
	if !escaped {
		return string(key) == name
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == name
}

// eachMember calls fn for each member of the object starting at v[start],
// which must be valid JSON. key is the member name without its quotes
// (escaped reports a backslash in it; then key is the quoted JSON string).
func eachMember(v []byte, start int, fn func(key []byte, escaped bool, val Span) bool) error {
	i := skipSpace(v, start+1)
	for i < len(v) && v[i] != '}' {
		kEnd := skipString(v, i)
		key, escaped := v[i+1:kEnd-1], false
		if bytes.IndexByte(key, '\\') >= 0 {
			key, escaped = v[i:kEnd], true
		}
		i = skipSpace(v, kEnd)
		i = skipSpace(v, i+1) // the colon
		end := skipValue(v, i)
		if !fn(key, escaped, Span{i, end}) {
			return nil
		}
		i = skipSpace(v, end)
		if i < len(v) && v[i] == ',' {
			i = skipSpace(v, i+1)
		}
	}
	return nil
}

func skipSpace(v []byte, i int) int {
	for i < len(v) {
		switch v[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string that opens at v[i].
func skipString(v []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(v[i:], '"')
		if j < 0 {
			return len(v)
		}
		i += j
		// Count the backslashes before the quote: an odd number escapes it.
		n := 0
		for k := i - 1; k >= 0 && v[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// skipValue returns the index just past the valid JSON value at v[i].
func skipValue(v []byte, i int) int {
	switch v[i] {
	case '"':
		return skipString(v, i)
	case '{', '[':
		depth := 0
		for i < len(v) {
			switch v[i] {
			case '"':
				i = skipString(v, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(v) {
		switch v[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
		i++
	}
	return i
}

// Edit replaces a span of a frame with new bytes.
type Edit struct {
	Span
	Value []byte
}

// Splice returns a copy of frame with the edits applied. The edits must not
// overlap; they may come in any order.
func Splice(frame []byte, edits ...Edit) []byte {
	n := len(frame)
	for _, e := range edits {
		n += len(e.Value) - (e.End - e.Start)
	}
	if len(edits) == 2 && editBefore(edits[1], edits[0]) {
		edits[0], edits[1] = edits[1], edits[0]
	} else if len(edits) > 2 {
		sortEdits(edits)
	}
	if n >= largeFrame {
		// bytes.Join allocates without zeroing: a 10 MB answer is copied
		// once, not cleared and then copied.
		parts := make([][]byte, 0, 2*len(edits)+1)
		last := 0
		for _, e := range edits {
			parts = append(parts, frame[last:e.Start], e.Value)
			last = e.End
		}
		return bytes.Join(append(parts, frame[last:]), nil)
	}
	out := make([]byte, 0, n)
	last := 0
	for _, e := range edits {
		out = append(out, frame[last:e.Start]...)
		out = append(out, e.Value...)
		last = e.End
	}
	return append(out, frame[last:]...)
}

// largeFrame is the size from which a frame is put together with
// bytes.Join, which does not clear memory it is about to fill; below it the
// difference does not pay for the slice of parts.
const largeFrame = 64 << 10

func sortEdits(edits []Edit) {
	for i := 1; i < len(edits); i++ {
		for j := i; j > 0 && editBefore(edits[j], edits[j-1]); j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
}

// editBefore orders edits by position; an empty edit (an insertion) goes
// before a non-empty one that starts at the same byte.
func editBefore(a, b Edit) bool {
	return a.Start < b.Start || a.Start == b.Start && a.End < b.End
}

// WithID returns a copy of the message's frame with its id replaced.
func (m *Message) WithID(id []byte) []byte {
	return Splice(m.Frame, Edit{m.idSpan, id})
}

// ReplaceID is WithID for a caller that owns the frame and is done with the
// message: when the new id is no longer than the old one, the frame is
// rewritten in place (the bytes before the id move up by the difference)
// and a slice of it returned, so that a large answer is not copied whole;
// m's spans then no longer match, and m must not be used afterwards. A
// longer id goes in as SpliceHead puts it: in place in a large frame with
// the room, m then describing the frame returned; else in a copy.
func (m *Message) ReplaceID(id []byte) []byte {
	s := m.idSpan
	d := (s.End - s.Start) - len(id)
	if d < 0 {
		return m.SpliceHead(Edit{Span: s, Value: id})
	}
	f := m.Frame
	copy(f[d:], f[:s.Start])
	copy(f[d+s.Start:], id)
	return f[d:]
}

// SpliceHead is Splice of m's frame for a caller that owns the frame, with
// edits near its start (an answer's new id, a member put in at its
// result's start). A frame of more than 64 KiB whose edits all end within
// its first headMax bytes, with room past its end for what they add, is
// edited in place: its head is rebuilt and the rest moves along by the
// difference, in one move within its own buffer, so that a large answer is
// not copied into memory of its own. m is then left describing the frame
// returned, its members where they moved to (one that begins at an
// insertion does not take the inserted bytes in). Otherwise the frame is
// copied, as Splice does, and m is left as it was.
func (m *Message) SpliceHead(edits ...Edit) []byte {
	f := m.Frame
	g, p := 0, 0
	for _, e := range edits {
		g += len(e.Value) - (e.End - e.Start)
		p = max(p, e.End)
	}
	if len(f) <= largeFrame || p > headMax || cap(f)-len(f) < g {
		return Splice(f, edits...)
	}
	spans := [...]Span{m.span(m.ID), m.span(m.Params), m.span(m.Result), m.span(m.Error), m.idSpan, m.paramsSpan}
	head := Splice(f[:p], edits...)
	n := len(f) + g
	switch {
	case g > 0:
		f = f[:n]
		copy(f[p+g:], f[p:])
		copy(f, head)
	case g < 0:
		copy(f, head)
		copy(f[p+g:], f[p:])
		f = f[:n]
	default: // the rest stays where it is
		copy(f, head)
	}
	for i := range spans {
		spans[i] = moved(spans[i], edits)
	}
	m.Frame = f
	m.ID, m.Params, m.Result, m.Error = within(f, m.ID, spans[0]), within(f, m.Params, spans[1]), within(f, m.Result, spans[2]), within(f, m.Error, spans[3])
	m.idSpan, m.paramsSpan = spans[4], spans[5]
	return f
}

// headMax bounds how far into a frame SpliceHead edits it in place.
const headMax = 4 << 10

// span is where member value v sits in m.Frame; zero when v is absent.
func (m *Message) span(v []byte) Span {
	if v == nil {
		return Span{}
	}
	return SpanOf(m.Frame, v)
}

// moved is where s is once edits are applied: each of its ends goes along
// by what the edits ending at or before it add.
func moved(s Span, edits []Edit) Span {
	if s == (Span{}) {
		return s
	}
	out := s
	for _, e := range edits {
		d := len(e.Value) - (e.End - e.Start)
		if e.End <= s.Start {
			out.Start += d
		}
		if e.End <= s.End {
			out.End += d
		}
	}
	return out
}

// within is f at span s, for a member value that was there (old not nil).
// Its capacity runs to f's end, as a parsed member's does (SpanOf).
func within(f, old []byte, s Span) []byte {
	if old == nil {
		return nil
	}
	return f[s.Start:s.End]
}

// methodName is b as a string: one of MCP's common methods without an
// allocation (the compiler matches a switch on string(b) in place), any
// other as a copy. A request and its notifications each take one.
func methodName(b []byte) string {
	switch string(b) {
	case "tools/call":
		return "tools/call"
	case "tools/list":
		return "tools/list"
	case "resources/read":
		return "resources/read"
	case "resources/list":
		return "resources/list"
	case "prompts/get":
		return "prompts/get"
	case "prompts/list":
		return "prompts/list"
	case "ping":
		return "ping"
	case "notifications/progress":
		return "notifications/progress"
	case "notifications/cancelled":
		return "notifications/cancelled"
	case "notifications/message":
		return "notifications/message"
	}
	return string(b)
}
