package benchkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// httpPeer is a Streamable HTTP front run for the harness: the floor
// (integration/bench/httprelay), supergateway in its stateful
// streamableHttp mode, or mcp-proxy; each runs its own server processes.
type httpPeer struct {
	name    string
	p       *proc
	url     string
	drained chan struct{} // closed when its stdout has ended
	gw      *gateway      // the node peers are stopped as supergateway is
}

// startHTTPRelay runs the floor, which prints its address first.
func startHTTPRelay(ctx context.Context, bin string, argv []string) (*httpPeer, error) {
	p, err := spawn(append([]string{bin}, argv...), nil, os.Stderr)
	if err != nil {
		return nil, err
	}
	addr := make(chan string, 1)
	hp := &httpPeer{name: "the http relay", p: p, drained: make(chan struct{})}
	go func() { // waited for by stop, through drained
		defer close(hp.drained)
		r := bufio.NewReader(p.stdout)
		line, _ := r.ReadString('\n')
		addr <- strings.TrimSpace(line)
		io.Copy(io.Discard, r)
	}()
	select {
	case a := <-addr:
		hp.url = "http://" + a + "/mcp"
	case <-time.After(readyTimeout):
	case <-ctx.Done():
	}
	if hp.url == "http://" || hp.url == "" {
		return nil, errors.Join(errors.New("the http relay printed no address"), hp.stop())
	}
	return hp, nil
}

// startNodeHTTP runs a node peer (args after the entry point) on a free
// port and waits until it accepts connections.
func startNodeHTTP(ctx context.Context, name, node, entry string, args func(port int) []string, path string) (*httpPeer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := spawn(append([]string{node, entry}, args(port)...), nil, nil)
	if err != nil {
		return nil, err
	}
	hp := &httpPeer{name: name, p: p, url: fmt.Sprintf("http://127.0.0.1:%d%s", port, path), drained: make(chan struct{})}
	hp.gw = &gateway{name: name, p: p, drained: hp.drained}
	go func() { // waited for by stop, through drained
		io.Copy(io.Discard, p.stdout)
		close(hp.drained)
	}()
	err = poll(ctx, name, p.exited, func() (bool, error) {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return false, nil
		}
		return true, c.Close()
	})
	if err != nil {
		return nil, errors.Join(err, hp.stop())
	}
	return hp, nil
}

// startGatewayHTTP is supergateway's stdio→Streamable HTTP mode, stateful
// (a server process per session; its stateless mode starts one per
// request).
func startGatewayHTTP(ctx context.Context, node, entry string, argv []string) (*httpPeer, error) {
	return startNodeHTTP(ctx, "supergateway (streamableHttp)", node, entry, func(port int) []string {
		return []string{"--stdio", shellCommand(argv), "--outputTransport", "streamableHttp", "--stateful",
			"--port", strconv.Itoa(port), "--logLevel", "none"}
	}, "/mcp")
}

// startMcpProxy is mcp-proxy, which shares one server process among its
// HTTP clients.
func startMcpProxy(ctx context.Context, node, entry string, argv []string) (*httpPeer, error) {
	return startNodeHTTP(ctx, "mcp-proxy", node, entry, func(port int) []string {
		return append([]string{"--port", strconv.Itoa(port), "--host", "127.0.0.1", "--server", "stream", "--"}, argv...)
	}, "/mcp")
}

func shellCommand(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// stop stops the peer: the floor by closing its stdin, the node peers as
// supergateway is stopped.
func (hp *httpPeer) stop() error {
	if hp.gw != nil {
		return hp.gw.stop()
	}
	err := hp.p.stop(5 * time.Second)
	<-hp.drained
	return err
}
