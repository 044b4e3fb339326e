// Command echoserver is the Go backend of the benchmarks (go run
// ./integration/bench): a minimal stdio MCP server, so that what the
// figures show is the cost of the path to it, not of the server.
//
// It reads one JSON-RPC message per line and answers in order, one request
// at a time. Answers are buffered and flushed when no more input is waiting,
// so pipelined requests are answered in batches. It answers initialize
// (with the client's protocol version), ping, tools/list and two tools:
//
//	echo {message}   returns "Echo: " + message, as server-everything does
//	huge {bytes}     returns that many 'x' bytes of text
//
// It serves both eras on one stdio connection, per request, as the go-sdk
// does: server/discover is answered with a 2026-07-28 discover result, and
// a request whose params carry the 2026-07-28 _meta envelope gets its
// result marked "resultType":"complete"; no initialize is needed first. So
// the same program is the floor of a legacy server (mcpmux's default
// protocol, which initializes) and of a modern one (protocol = "modern").
//
// Notifications and responses are ignored; other methods get -32601. It
// exits 0 when stdin closes.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

func main() {
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "echoserver:", err)
		os.Exit(1)
	}
}

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string `json:"protocolVersion"`
		Meta            struct {
			Version string `json:"io.modelcontextprotocol/protocolVersion"`
		} `json:"_meta"`
		Name      string `json:"name"`
		Arguments struct {
			Message string `json:"message"`
			Bytes   int    `json:"bytes"`
		} `json:"arguments"`
	} `json:"params"`
}

// tools is the members of tools/list's result.
const tools = `"tools":[` +
	`{"name":"echo","description":"Echoes back the input string","inputSchema":{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}},` +
	`{"name":"huge","description":"Returns that many x bytes of text","inputSchema":{"type":"object","properties":{"bytes":{"type":"integer"}},"required":["bytes"]}}]`

// serve answers the requests read from r on w until r ends.
func serve(r io.Reader, w io.Writer) error {
	in := bufio.NewReaderSize(r, 64<<10)
	out := bufio.NewWriterSize(w, 64<<10)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 1 {
			if werr := answer(out, line); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out.Flush()
			}
			return err
		}
		if in.Buffered() == 0 {
			if err := out.Flush(); err != nil {
				return err
			}
		}
	}
}

// modern is the revision whose _meta envelope makes a request modern.
const modern = "2026-07-28"

// discover is the answer to server/discover.
const discover = `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete",` +
	`"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"echoserver","version":"1"}}}`

// answer writes the answer to one line, if it is a request.
func answer(out *bufio.Writer, line []byte) error {
	var req request
	if json.Unmarshal(line, &req) != nil || len(req.ID) == 0 || req.Method == "" {
		return nil // not a request: a notification, a response or junk
	}
	// head opens the result object; its members follow.
	head := `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{`
	if req.Params.Meta.Version == modern {
		head += `"resultType":"complete",`
	}
	switch req.Method {
	case "server/discover":
		_, err := out.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + discover + "}\n")
		return err
	case "initialize":
		v := req.Params.ProtocolVersion
		if v == "" {
			v = "2025-06-18"
		}
		_, err := out.WriteString(head + `"protocolVersion":` + strconv.Quote(v) +
			`,"capabilities":{"tools":{}},"serverInfo":{"name":"echoserver","version":"1"}}}` + "\n")
		return err
	case "ping":
		_, err := out.WriteString(strings.TrimSuffix(head, ",") + "}}\n")
		return err
	case "tools/list":
		_, err := out.WriteString(head + tools + "}}\n")
		return err
	case "tools/call":
		return call(out, head, &req)
	}
	_, err := out.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32601,"message":"method not found"}}` + "\n")
	return err
}

// call answers a tools/call; head opens its result.
func call(out *bufio.Writer, head string, req *request) error {
	switch req.Params.Name {
	case "echo":
		text, _ := json.Marshal("Echo: " + req.Params.Arguments.Message)
		_, err := out.WriteString(head + `"content":[{"type":"text","text":` + string(text) + `}]}}` + "\n")
		return err
	case "huge":
		return writeHuge(out, head, req.Params.Arguments.Bytes)
	}
	_, err := out.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32602,"message":"unknown tool"}}` + "\n")
	return err
}

func writeHuge(out *bufio.Writer, head string, n int) error {
	if _, err := out.WriteString(head + `"content":[{"type":"text","text":"`); err != nil {
		return err
	}
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'x'
	}
	for n > 0 {
		k := min(n, len(chunk))
		if _, err := out.Write(chunk[:k]); err != nil {
			return err
		}
		n -= k
	}
	_, err := out.WriteString(`"}]}}` + "\n")
	return err
}
