package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/jsonrpc"
	"github.com/mcpmux/mcpmux/outbox"
	"github.com/mcpmux/mcpmux/session"
)

// The lobby. A client on the web listener (WebSocket, Streamable HTTP) has
// no folder mcpmux can see, so for share = "project" its project is told by
// the roots it declares: the lobby answers its initialize from the server's
// description (as the hub would), waits for notifications/initialized, asks
// the client for roots/list, and takes the first file:// root as the
// client's folder. The session then goes to its project's hub as if
// nothing had happened: the hub reads the frames the lobby read, in order,
// and its answer to the replayed initialize, which the client already has,
// is dropped. A client that declares no roots, a 2026-07-28 one, one that
// does not answer in time, or a server mcpmux cannot describe yet goes to
// the project of the daemon's folder, as before.

// lobbyRootsID is the id of the lobby's roots/list request.
const lobbyRootsID = `"mcpmux-project-roots"`

// lobbyMaxFrames bounds what the lobby holds for the hub: a client that
// sends more before it answers roots/list is not waited for further.
const lobbyMaxFrames = 64

// lobbyWait bounds each wait of the lobby (for notifications/initialized,
// then for the roots).
var lobbyWait = 5 * time.Second

// lobbyRead is one ReadFrame's outcome.
type lobbyRead struct {
	frame []byte
	tag   uint64
	err   error
}

// lobby is a session's transport while its project is told, and after: it
// gives the session what the lobby read first. Its read side is used by one
// goroutine at a time (the lobby, then the session's read loop); its write
// side only by the session's outbox.
type lobby struct {
	session.Transport
	reads    chan lobbyRead // the outcome of the read in flight; capacity 1
	inflight bool           // a read runs in the lobby's goroutine
	held     []lobbyRead    // read, not yet handed to the session
	wg       sync.WaitGroup // the read goroutine

	drop    json.RawMessage // the replayed initialize's id
	dropped atomic.Bool     // its answer was dropped
}

func newLobby(t session.Transport) *lobby {
	return &lobby{Transport: t, reads: make(chan lobbyRead, 1)}
}

// next is the next frame the client sends, within wait; false when none
// came (the read goes on and its outcome is kept for the session).
func (l *lobby) next(ctx context.Context, wait time.Duration) (lobbyRead, bool) {
	if !l.inflight {
		l.inflight = true
		l.wg.Go(func() {
			f, tag, err := l.Transport.ReadFrame()
			// The transport may reuse its buffer on the next read.
			l.reads <- lobbyRead{frame: bytes.Clone(f), tag: tag, err: err}
		})
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case r := <-l.reads:
		l.inflight = false
		return r, true
	case <-timer.C:
	case <-ctx.Done():
	}
	return lobbyRead{}, false
}

// ReadFrame gives the frames the lobby held, then the transport's.
func (l *lobby) ReadFrame() ([]byte, uint64, error) {
	if len(l.held) > 0 {
		r := l.held[0]
		l.held = l.held[1:]
		return r.frame, r.tag, r.err
	}
	if l.inflight {
		r := <-l.reads
		l.inflight = false
		return r.frame, r.tag, r.err
	}
	return l.Transport.ReadFrame()
}

// Buffered reports a held frame, or one the transport has at hand.
func (l *lobby) Buffered() bool {
	switch {
	case len(l.held) > 0:
		return true
	case l.inflight:
		return len(l.reads) > 0
	}
	return l.Transport.Buffered()
}

// Close closes the transport and waits for the lobby's read, which it ends.
func (l *lobby) Close() error {
	err := l.Transport.Close()
	l.wg.Wait()
	return err
}

// WriteFrames writes frames, less the hub's answer to the replayed
// initialize.
func (l *lobby) WriteFrames(frames []outbox.Frame) error {
	return l.Transport.WriteFrames(l.filter(frames))
}

// TryWrite is WriteFrames without blocking.
func (l *lobby) TryWrite(frames []outbox.Frame) (ok, more bool) {
	frames = l.filter(frames)
	if len(frames) == 0 {
		return true, false
	}
	return l.Transport.TryWrite(frames)
}

func (l *lobby) filter(frames []outbox.Frame) []outbox.Frame {
	if l.drop == nil || l.dropped.Load() {
		return frames
	}
	for i, f := range frames {
		if f.Data != nil && bytes.Equal(jsonrpc.ResponseID(f.Data), l.drop) {
			l.dropped.Store(true)
			return slices.Delete(slices.Clone(frames), i, i+1)
		}
	}
	return frames
}

// hold keeps r for the session; false when the lobby holds too much.
func (l *lobby) hold(r lobbyRead) bool {
	l.held = append(l.held, r)
	return len(l.held) < lobbyMaxFrames
}

// clientDir tells a web client's folder from its roots, with lobby as the
// transport to serve it on. dir is "" when it cannot be told.
func (p *Projects) clientDir(ctx context.Context, t session.Transport) (dir string, l *lobby) {
	l = newLobby(t)
	r, ok := l.next(ctx, lobbyWait)
	if !ok {
		return "", l
	}
	l.hold(r)
	if r.err != nil {
		return "", l
	}
	m, err := jsonrpc.Parse(r.frame)
	if err != nil || m.Kind != jsonrpc.KindRequest || m.Method != "initialize" || !declaresRoots(m.Params) {
		return "", l
	}
	info := p.description()
	if info == nil {
		return "", l
	}
	if !p.answerInitialize(l, m, r.tag, info) {
		return "", l
	}
	return p.askRoots(ctx, l), l
}

// declaresRoots: an initialize's params declare the roots capability.
func declaresRoots(params json.RawMessage) bool {
	var p struct {
		Capabilities struct {
			Roots json.RawMessage `json:"roots"`
		} `json:"capabilities"`
	}
	return json.Unmarshal(params, &p) == nil && p.Capabilities.Roots != nil && string(p.Capabilities.Roots) != "null"
}

// description is what any of the instances, or Memory, says of the server.
func (p *Projects) description() *serverInfo {
	for _, h := range p.hubs() {
		if info, ok := h.life.describedNow(); ok {
			return info
		}
	}
	if p.cfg.Memory == nil {
		return nil
	}
	era, raw := p.cfg.Memory.Description()
	if raw == nil {
		return nil
	}
	info, err := parseRemembered(era, raw)
	if err != nil || !protocolAllows(p.cfg.Protocol, info.era) {
		return nil
	}
	return info
}

// hubs are the instances' hubs now.
func (p *Projects) hubs() []*Hub {
	p.mu.Lock()
	defer p.mu.Unlock()
	hubs := make([]*Hub, 0, len(p.instances))
	for _, in := range p.instances {
		hubs = append(hubs, in.hub)
	}
	return hubs
}

// answerInitialize answers the client's initialize as the hub would, and
// arranges for the hub's answer to the replay to be dropped.
func (p *Projects) answerInitialize(l *lobby, m *jsonrpc.Message, tag uint64, info *serverInfo) bool {
	var params struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(m.Params, &params) != nil {
		return false
	}
	body, err := info.forSession(info.negotiate(params.ProtocolVersion))
	if err != nil {
		return false
	}
	l.drop = m.ID
	if err := l.Transport.WriteFrames([]outbox.Frame{{Data: jsonrpc.Response(m.ID, body), Tag: tag, Last: true}}); err != nil {
		l.drop = nil
		return false
	}
	return true
}

// askRoots waits for notifications/initialized, asks the client for its
// roots and returns the folder of the first file:// one ("" if none).
// Everything else the client sends meanwhile is held for the hub.
func (p *Projects) askRoots(ctx context.Context, l *lobby) string {
	for asked := false; ; {
		r, ok := l.next(ctx, lobbyWait)
		if !ok {
			p.log.Info("a project session did not tell its roots in time; serving it in the daemon's folder", "wait", lobbyWait)
			return ""
		}
		m, err := jsonrpc.Parse(r.frame)
		if r.err == nil && err == nil && asked && (m.Kind == jsonrpc.KindResult || m.Kind == jsonrpc.KindError) && string(m.ID) == lobbyRootsID {
			return rootsFolder(m.Result)
		}
		if !l.hold(r) || r.err != nil {
			return ""
		}
		if !asked && err == nil && m.Method == "notifications/initialized" {
			req, _ := jsonrpc.Request(json.RawMessage(lobbyRootsID), "roots/list", nil)
			if l.Transport.WriteFrames([]outbox.Frame{{Data: req}}) != nil {
				return ""
			}
			asked = true
		}
	}
}

// rootsFolder is the folder of the first file:// root of a roots/list
// result, if it is one.
func rootsFolder(result json.RawMessage) string {
	var res struct {
		Roots []struct {
			URI string `json:"uri"`
		} `json:"roots"`
	}
	if json.Unmarshal(result, &res) != nil {
		return ""
	}
	for _, r := range res.Roots {
		u, err := url.Parse(r.URI)
		if err != nil || u.Scheme != "file" || !localHost(u.Host) || !filepath.IsAbs(u.Path) {
			continue
		}
		dir := filepath.Clean(u.Path)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return dir
		}
	}
	return ""
}

// localHost: a file URI's host names this machine (RFC 8089: none, or
// "localhost"); file://other/x is a folder of another machine.
func localHost(host string) bool { return host == "" || strings.EqualFold(host, "localhost") }
