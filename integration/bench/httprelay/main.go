// Command httprelay is the floor of the Streamable HTTP paths of the
// side-by-side benchmark: the least an HTTP front to a stdio server does.
// An initialize POST starts a server process of its own for a new session
// (its id in Mcp-Session-Id); each later POST writes its message to that
// server's stdin, and a request's answer, matched by its id, comes back as
// one SSE event in one write; a notification or response gets 202. DELETE
// ends the session. Nothing is validated. It prints its address on stdout
// and runs until its stdin closes, then stops its servers and waits for them.
//
//	httprelay SERVER [ARGS...]
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: httprelay SERVER [ARGS...]")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "httprelay:", err)
		os.Exit(1)
	}
	rl := &relay{argv: os.Args[1:], sessions: map[string]*server{}}
	srv := &http.Server{Handler: rl}
	fmt.Println(ln.Addr().String())
	go func() { // returns with the process; it only closes things
		io.Copy(io.Discard, os.Stdin)
		srv.Close()
	}()
	srv.Serve(ln)
	rl.stopAll()
}

type relay struct {
	argv     []string
	mu       sync.Mutex
	sessions map[string]*server
}

// server is one session's process and the requests waiting for answers.
type server struct {
	cmd   *exec.Cmd
	wmu   sync.Mutex
	stdin io.WriteCloser
	mu    sync.Mutex
	wait  map[string]chan []byte // by the request's id, as sent
	done  chan struct{}          // closed when its stdout has ended
}

func (rl *relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	rl.mu.Lock()
	s := rl.sessions[id]
	rl.mu.Unlock()
	switch r.Method {
	case http.MethodDelete:
		if s != nil {
			rl.drop(id, s)
		}
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		http.Error(w, "POST or DELETE", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if s == nil {
		if id != "" {
			http.Error(w, "no such session", http.StatusNotFound)
			return
		}
		if id, s, err = rl.start(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Mcp-Session-Id", id)
	}
	s.post(w, r, body)
}

// start runs a server for a new session.
func (rl *relay) start() (string, *server, error) {
	b := make([]byte, 16)
	rand.Read(b)
	id := hex.EncodeToString(b)
	cmd := exec.Command(rl.argv[0], rl.argv[1:]...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	s := &server{cmd: cmd, stdin: stdin, wait: map[string]chan []byte{}, done: make(chan struct{})}
	go s.read(stdout) // ends when the server's stdout does; waited for in drop
	rl.mu.Lock()
	rl.sessions[id] = s
	rl.mu.Unlock()
	return id, s, nil
}

// post writes body to the server and answers the POST.
func (s *server) post(w http.ResponseWriter, r *http.Request, body []byte) {
	id := requestID(body)
	var ch chan []byte
	if id != "" {
		ch = make(chan []byte, 1)
		s.mu.Lock()
		s.wait[id] = ch
		s.mu.Unlock()
	}
	s.wmu.Lock()
	_, err := s.stdin.Write(append(body, '\n'))
	s.wmu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if ch == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	select {
	case answer := <-ch:
		w.Header().Set("Content-Type", "text/event-stream")
		event := make([]byte, 0, len(answer)+32)
		event = append(event, "event: message\ndata: "...)
		event = append(append(event, answer...), "\n\n"...)
		w.Write(event)
	case <-s.done:
		http.Error(w, "the server exited", http.StatusBadGateway)
	case <-r.Context().Done():
		s.mu.Lock()
		delete(s.wait, id)
		s.mu.Unlock()
	}
}

// read hands each answer line to the POST waiting for its id.
func (s *server) read(stdout io.Reader) {
	defer close(s.done)
	r := bufio.NewReaderSize(stdout, 256<<10)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		id := answerID(line)
		s.mu.Lock()
		ch := s.wait[id]
		delete(s.wait, id)
		s.mu.Unlock()
		if ch != nil {
			ch <- line
		}
	}
}

// requestID is the id of a request ("" for anything else). Requests are
// small: they are decoded.
func requestID(body []byte) string {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method == "" || len(m.ID) == 0 {
		return ""
	}
	return string(m.ID)
}

// answerID finds an answer's id without decoding a large result: the Go
// echo server writes "id" near the head, the TypeScript SDK at the tail.
func answerID(line []byte) string {
	for _, part := range [][]byte{line[max(0, len(line)-48):], line[:min(len(line), 48)]} {
		if i := bytes.Index(part, []byte(`"id":`)); i >= 0 {
			rest := part[i+5:]
			if j := bytes.IndexAny(rest, ",}"); j > 0 {
				return string(bytes.TrimSpace(rest[:j]))
			}
		}
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(line, &m)
	return string(m.ID)
}

func (rl *relay) drop(id string, s *server) {
	rl.mu.Lock()
	delete(rl.sessions, id)
	rl.mu.Unlock()
	s.stdin.Close()
	<-s.done
	s.cmd.Wait()
}

func (rl *relay) stopAll() {
	rl.mu.Lock()
	all := rl.sessions
	rl.sessions = map[string]*server{}
	rl.mu.Unlock()
	for id, s := range all {
		rl.drop(id, s)
	}
}
