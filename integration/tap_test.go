package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// tapLine is one line of `mcpmux tap --json`, by the names DESIGN.md gives
// its fields.
type tapLine struct {
	Time       time.Time       `json:"time"`
	Server     string          `json:"server"`
	Session    uint64          `json:"session"`
	Client     string          `json:"client"`
	Dir        string          `json:"dir"`
	Kind       string          `json:"kind"`
	Method     string          `json:"method"`
	ID         json.RawMessage `json:"id"`
	UpstreamID json.RawMessage `json:"upstream_id"`
	Bytes      int             `json:"bytes"`
	MS         *float64        `json:"ms"`
	Shape      string          `json:"shape"`
	Message    json.RawMessage `json:"message"`
	Lost       int64           `json:"lost"`
}

// tapRun is one `mcpmux tap` following a daemon.
type tapRun struct {
	tb  testing.TB
	cmd *exec.Cmd

	mu    sync.Mutex
	lines []string // what it printed, a line each
	done  chan struct{}
}

// startTap runs `mcpmux tap --config d.path args...` and returns once the
// daemon has attached it (the tap says so on stderr). At cleanup it gets
// SIGINT, must exit 0 and is waited for.
func startTap(tb testing.TB, d *daemon, args ...string) *tapRun {
	tb.Helper()
	t := &tapRun{tb: tb, done: make(chan struct{})}
	t.cmd = mcpmux(context.Background(), append([]string{"tap", "--config", d.path}, args...)...)
	stdout, err := t.cmd.StdoutPipe()
	require.NoError(tb, err)
	stderr, err := t.cmd.StderrPipe()
	require.NoError(tb, err)
	require.NoError(tb, t.cmd.Start())
	go t.read(stdout) // ends when the tap exits; stop waits for it
	tb.Cleanup(t.stop)
	first, err := bufio.NewReader(stderr).ReadString('\n')
	require.NoError(tb, err, "the tap's first line on stderr")
	require.Contains(tb, first, "tapping ", "the tap says it is attached")
	go io.Copy(io.Discard, stderr) // ends with the tap
	return t
}

func (t *tapRun) read(r io.Reader) {
	defer close(t.done)
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			t.mu.Lock()
			t.lines = append(t.lines, strings.TrimSuffix(line, "\n"))
			t.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (t *tapRun) stop() {
	if t.cmd.ProcessState != nil {
		return
	}
	t.cmd.Process.Signal(syscall.SIGINT)
	<-t.done
	assert.NoError(t.tb, t.cmd.Wait(), "mcpmux tap ends with 0 on Ctrl-C")
}

// text is everything the tap printed so far.
func (t *tapRun) text() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.lines...)
}

// events is what a --json tap printed so far, decoded.
func (t *tapRun) events() []tapLine {
	var out []tapLine
	for _, l := range t.text() {
		var ev tapLine
		require.NoError(t.tb, json.Unmarshal([]byte(l), &ev), "a tap --json line: %s", l)
		out = append(out, ev)
	}
	return out
}

// await waits until a --json tap printed a line that match accepts, and
// returns it with every line before it.
func (t *tapRun) await(what string, match func(tapLine) bool) (tapLine, []tapLine) {
	t.tb.Helper()
	var found tapLine
	var before []tapLine
	testutil.Eventually(t.tb, ioTimeout, what, func() (bool, error) {
		before = nil
		for _, ev := range t.events() {
			if match(ev) {
				found = ev
				return true, nil
			}
			before = append(before, ev)
		}
		return false, nil
	})
	return found, before
}

// awaitText waits until a text tap printed a line that re matches.
func (t *tapRun) awaitText(re *regexp.Regexp) string {
	t.tb.Helper()
	var found string
	testutil.Eventually(t.tb, ioTimeout, "a line matching "+re.String(), func() (bool, error) {
		for _, l := range t.text() {
			if re.MatchString(l) {
				found = l
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// answerTo matches the answer to the request of a session with id.
func answerTo(session uint64, id string) func(tapLine) bool {
	return func(ev tapLine) bool {
		return ev.Session == session && ev.Kind == "answer" && string(ev.ID) == id
	}
}

// openAs opens a session whose client calls itself name in initialize.
func openAs(tb testing.TB, path, name string) *client {
	tb.Helper()
	c := dial(tb, path)
	m, err := c.call(`"init"`, "initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": name, "version": "1"},
	})
	require.NoError(tb, err)
	require.Empty(tb, m.Error, "initialize")
	require.NoError(tb, c.send(notification("notifications/initialized", nil)))
	return c
}

// sessionIDs are the ids of a server's sessions by their client's name,
// from `mcpmux status --json`.
func sessionIDs(tb testing.TB, d *daemon, server string) map[string]uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	out, err := mcpmux(ctx, "status", "--json", "--config", d.path).Output()
	require.NoError(tb, err, "mcpmux status --json")
	var st struct {
		Servers []struct {
			Name        string `json:"name"`
			SessionList []struct {
				ID     uint64 `json:"id"`
				Client string `json:"client"`
			} `json:"session_list"`
		} `json:"servers"`
	}
	require.NoError(tb, json.Unmarshal(out, &st), "status: %s", out)
	ids := map[string]uint64{}
	for _, s := range st.Servers {
		for _, sess := range s.SessionList {
			if s.Name == server {
				ids[sess.Client] = sess.ID
			}
		}
	}
	return ids
}

// TestTapSeesACallAndItsAnswer: a tap of one server shows a session's call
// going up and its answer coming down, each with the client's id and the
// server's, the session and its client's name, sizes, and the time the
// answer took; in text, one line each. A tap of another server sees none
// of it.
func TestTapSeesACallAndItsAnswer(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil)+demo("other", nil), "")
	jsonTap := startTap(t, d, "--json", "demo")
	textTap := startTap(t, d, "demo")
	otherTap := startTap(t, d, "--json", "other")
	alice := openAs(t, d.socket("demo"), "alice")
	id := sessionIDs(t, d, "demo")["alice"]
	require.NotZero(t, id, "alice's session is listed")

	require.NoError(t, alice.echo(`"call-1"`, "hello"))
	answer, before := jsonTap.await("the answer to call-1", answerTo(id, `"call-1"`))
	var call tapLine
	for _, ev := range before {
		if ev.Kind == "request" && string(ev.ID) == `"call-1"` {
			call = ev
		}
	}
	require.Equal(t, "tools/call", call.Method, "the call came before its answer: %+v", before)
	assert.Equal(t, tapLine{Time: call.Time, Server: "demo", Session: id, Client: "alice", Dir: "up", Kind: "request",
		Method: "tools/call", ID: json.RawMessage(`"call-1"`), UpstreamID: call.UpstreamID, Bytes: call.Bytes,
		Shape: `{arguments:{text:string(5)}, name:"echo"}`}, call)
	assert.Regexp(t, `^[0-9]+$`, string(call.UpstreamID), "the server's id is mcpmux's own number")
	assert.Positive(t, call.Bytes)
	assert.Equal(t, "down", answer.Dir)
	assert.Equal(t, "tools/call", answer.Method, "the answer names the method it answers")
	assert.Equal(t, string(call.UpstreamID), string(answer.UpstreamID), "the answer carries the server's id of its call")
	assert.Equal(t, "alice", answer.Client)
	require.NotNil(t, answer.MS, "an answer says how long it took")
	assert.Positive(t, *answer.MS)
	assert.InDelta(t, answer.Time.Sub(call.Time).Seconds()*1000, *answer.MS, 1000, "ms is the time between the call and its answer")

	up := string(call.UpstreamID)
	textTap.awaitText(regexp.MustCompile(fmt.Sprintf(`^\d\d:\d\d:\d\d\.\d{3} demo #%d \(alice\) -> tools/call id "call-1" \(up %s\) \d+B \{arguments:\{text:string\(5\)\}, name:"echo"\}$`, id, up)))
	textTap.awaitText(regexp.MustCompile(fmt.Sprintf(`^\d\d:\d\d:\d\d\.\d{3} demo #%d \(alice\) <- answer to tools/call id "call-1" \(up %s\) \d+B \d+\.\dms \{content:\[1×\{text:string\(5\), type:string\(4\)\}\]`, id, up)))

	// A call on other, after demo's were published: the other tap's queue
	// is in order, so once it shows this call, it has shown all it got.
	bob := openAs(t, d.socket("other"), "bob")
	require.NoError(t, bob.echo(`"call-2"`, "there"))
	_, seen := otherTap.await("the answer to call-2", answerTo(sessionIDs(t, d, "other")["bob"], `"call-2"`))
	for _, ev := range seen {
		assert.Equal(t, "other", ev.Server, "a tap of other sees nothing of demo: %+v", ev)
	}
	for _, ev := range jsonTap.events() {
		assert.Equal(t, "demo", ev.Server, "a tap of demo sees nothing of other: %+v", ev)
	}
}

// TestTapSessionFilter: with --session, a tap shows that session's
// messages and no other session's of the same server.
func TestTapSessionFilter(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	alice := openAs(t, d.socket("demo"), "alice")
	bob := openAs(t, d.socket("demo"), "bob")
	ids := sessionIDs(t, d, "demo")
	require.NotZero(t, ids["bob"])
	require.NotEqual(t, ids["alice"], ids["bob"])
	tap := startTap(t, d, "--json", "--session", fmt.Sprint(ids["bob"]), "demo")

	require.NoError(t, alice.echo(`"a-1"`, "from alice"))
	require.NoError(t, bob.echo(`"b-1"`, "from bob"))
	require.NoError(t, alice.echo(`"a-2"`, "from alice"))
	require.NoError(t, bob.echo(`"b-2"`, "from bob"))
	_, before := tap.await("bob's second answer", answerTo(ids["bob"], `"b-2"`))
	require.NotEmpty(t, before)
	for _, ev := range before {
		assert.Equal(t, ids["bob"], ev.Session, "only bob's session: %+v", ev)
		assert.NotContains(t, string(ev.ID), "a-", "none of alice's requests: %+v", ev)
	}
}

// TestTapRedactsValues: a value sent in a tool's arguments, which the
// server echoes back, appears in no line of a tap (text or --json) unless
// it is run with --full.
func TestTapRedactsValues(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-7Hq2ZpX9wV4mN8rT1yK6uB3c"
	d := startDaemon(t, demo("demo", nil), "")
	text := startTap(t, d, "demo")
	asJSON := startTap(t, d, "--json")
	full := startTap(t, d, "--json", "--full", "demo")
	c := openAs(t, d.socket("demo"), "alice")
	id := sessionIDs(t, d, "demo")["alice"]

	require.NoError(t, c.echo(`"s-1"`, secret))
	ans, _ := full.await("the answer to s-1 in full", answerTo(id, `"s-1"`))
	assert.Contains(t, string(ans.Message), secret, "--full shows the whole answer")
	asJSON.await("the redacted answer to s-1", answerTo(id, `"s-1"`))
	text.awaitText(regexp.MustCompile(`answer to tools/call id "s-1"`))

	lines := append(text.text(), asJSON.text()...)
	require.GreaterOrEqual(t, len(lines), 4, "a call and its answer in each tap")
	for _, l := range lines {
		assert.NotContains(t, l, secret, "a redacted line")
		assert.NotContains(t, l, secret[:12], "not even its start")
	}
	var sawCall bool
	for _, ev := range full.events() {
		if ev.Kind == "request" && string(ev.ID) == `"s-1"` {
			sawCall = true
			assert.Contains(t, string(ev.Message), secret, "--full shows the whole call")
		}
	}
	assert.True(t, sawCall, "the full tap shows the call")
}

// foreignTapEnv names the variable that makes this test binary a client of
// another user that asks the control socket at its value for GET /tap.
const foreignTapEnv = "MCPMUX_TEST_FOREIGN_TAP"

// foreignTapReport is what that client prints: its uid, whether it could
// connect, and what it got back.
type foreignTapReport struct {
	UID     int    `json:"uid"`
	DialErr string `json:"dial_err"`
	Got     string `json:"got"`
	ReadErr string `json:"read_err"`
}

// foreignTap is the main of this binary run as that client.
func foreignTap(path string) int {
	rep := foreignTapReport{UID: os.Getuid()}
	defer func() { json.NewEncoder(os.Stdout).Encode(rep) }()
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		rep.DialErr = err.Error()
		return 0
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, tapRequest); err != nil {
		rep.ReadErr = "write: " + err.Error()
		return 0
	}
	b, err := io.ReadAll(io.LimitReader(c, 4096))
	rep.Got = string(b)
	if err != nil {
		rep.ReadErr = err.Error()
	}
	return 0
}

// tapRequest is GET /tap as `mcpmux tap` sends it, by hand.
const tapRequest = "GET /tap HTTP/1.1\r\nHost: mcpmux\r\n\r\n"

// TestTapRefusesAnotherUser: the control endpoint is owner-only. A process
// of another uid that reaches the control socket (its folder and mode are
// opened up here, in the test only, so that it gets past them to the
// daemon's check of the peer's credentials) is hung up on without a byte,
// and the daemon logs the refusal; the same request from the owner is
// answered 200 and its tap streams.
func TestTapRefusesAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run a client as another uid (socket's TestAcceptRefusesOtherUsers needs it too)")
	}
	t.Parallel()
	d := startDaemon(t, demo("demo", nil), "")
	control := filepath.Join(d.sockets, ".control.sock")
	require.NoError(t, os.Chmod(d.dir, 0o711))
	require.NoError(t, os.Chmod(d.sockets, 0o711))
	require.NoError(t, os.Chmod(control, 0o666))

	self, err := os.Executable()
	require.NoError(t, err)
	bin, err := os.MkdirTemp("", "mxforeign")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(bin) })
	require.NoError(t, os.Chmod(bin, 0o755))
	copyFile(t, self, filepath.Join(bin, "foreign"))
	cmd := exec.Command(filepath.Join(bin, "foreign"))
	cmd.Dir = bin
	cmd.Env = []string{foreignTapEnv + "=" + control, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.Output()
	require.NoError(t, err, "the foreign client")
	var rep foreignTapReport
	require.NoError(t, json.Unmarshal(out, &rep), "its report: %s", out)
	assert.Equal(t, nobody, rep.UID)
	assert.Empty(t, rep.DialErr, "it reached the socket: the daemon's own check is what refuses it")
	assert.Empty(t, rep.Got, "not a byte of an answer, let alone a message")
	testutil.Eventually(t, ioTimeout, "the daemon logs the refusal", func() (bool, error) {
		return strings.Contains(d.log(), "refused a connection from another user") && strings.Contains(d.log(), "uid=65534"), nil
	})

	own, err := net.DialTimeout("unix", control, ioTimeout)
	require.NoError(t, err)
	defer own.Close()
	own.SetDeadline(time.Now().Add(ioTimeout))
	_, err = io.WriteString(own, tapRequest)
	require.NoError(t, err)
	status, err := bufio.NewReader(own).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1 200 OK\r\n", status, "the owner's same request is served")
}

// TestTapShowsWhereCancellationsAndSamplingGo: a tap shows a session's
// cancellation going up under the server's id of the call it cancels, a
// sampling request coming down to the session that caused it and that
// session's answer going up, each with both ids, a broadcast notification
// as every session's, and the error mcpmux answers when request_timeout
// passes, with the time it took.
func TestTapShowsWhereCancellationsAndSamplingGo(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, demo("demo", nil)+demo("tight", nil, `request_timeout = "300ms"`), "")
	tap := startTap(t, d, "--json")
	c := openSampling(t, d.socket("demo"))
	id := sessionIDs(t, d, "demo")["integration"]

	require.NoError(t, c.send(toolCall(`"slow-1"`, "slow", map[string]any{"ms": 20000})))
	call, _ := tap.await("the slow call", func(ev tapLine) bool { return ev.Kind == "request" && string(ev.ID) == `"slow-1"` })
	require.NoError(t, c.send(notification("notifications/cancelled", map[string]any{"requestId": "slow-1"})))
	cancel, _ := tap.await("the cancellation", func(ev tapLine) bool { return ev.Method == "notifications/cancelled" })
	assert.Equal(t, tapLine{Time: cancel.Time, Server: "demo", Session: id, Client: "integration", Dir: "up", Kind: "notification",
		Method: "notifications/cancelled", ID: json.RawMessage(`"slow-1"`), UpstreamID: call.UpstreamID, Bytes: cancel.Bytes,
		Shape: "{requestId:number}"}, cancel, "the cancellation reaches the server under its id of the call")

	require.NoError(t, c.send(toolCall(`"ask-1"`, "ask", map[string]any{"text": "a question"})))
	asked, err := nextRequest(c)
	require.NoError(t, err)
	require.Equal(t, "sampling/createMessage", asked.Method)
	require.NoError(t, answerSampling(c, asked.ID, "an answer"))
	_, _, err = c.await(`"ask-1"`)
	require.NoError(t, err)
	down, _ := tap.await("the sampling request", func(ev tapLine) bool { return ev.Kind == "request" && ev.Method == "sampling/createMessage" })
	assert.Equal(t, "down", down.Dir)
	assert.Equal(t, id, down.Session, "to the session whose call caused it")
	assert.Equal(t, string(asked.ID), string(down.ID), "under the id the session got")
	assert.NotEmpty(t, down.UpstreamID, "with the server's own id")
	back, _ := tap.await("the session's answer to it", func(ev tapLine) bool { return ev.Kind == "answer" && ev.Method == "sampling/createMessage" })
	assert.Equal(t, "up", back.Dir)
	assert.Equal(t, string(asked.ID), string(back.ID))
	assert.Equal(t, string(down.UpstreamID), string(back.UpstreamID), "back to the server under its id")
	require.NotNil(t, back.MS)

	require.NoError(t, c.send(toolCall(`"n-1"`, "notify", map[string]any{"method": "notifications/tools/list_changed"})))
	note, _ := tap.await("the broadcast", func(ev tapLine) bool { return ev.Method == "notifications/tools/list_changed" })
	assert.Equal(t, "down", note.Dir)
	assert.Zero(t, note.Session, "a broadcast is every session's")

	tight := openAs(t, d.socket("tight"), "impatient")
	require.NoError(t, tight.send(toolCall(`"late-1"`, "slow", map[string]any{"ms": 20000})))
	timedOut, _ := tap.await("the timeout", func(ev tapLine) bool {
		return ev.Server == "tight" && string(ev.ID) == `"late-1"` && ev.Kind == "error"
	})
	assert.Equal(t, "down", timedOut.Dir)
	assert.Equal(t, "tools/call", timedOut.Method)
	require.NotNil(t, timedOut.MS)
	assert.GreaterOrEqual(t, *timedOut.MS, 250.0, "answered when request_timeout passed")
}
