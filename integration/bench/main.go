// Command bench measures, in one run and against the same demo server, echo
// latency, pipelined calls per second and huge-result throughput over five
// paths: direct stdio, a plain byte relay on a Unix socket, mcpmux's Unix
// socket, `mcpmux connect` and mcpmux's WebSocket.
//
//	go run ./integration/bench [-short] [-write]
//
// With -write it also writes BENCHMARKS.md at the repository root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/integration/benchkit"
)

func main() {
	short := flag.Bool("short", false, "a few iterations: only check that every path works")
	write := flag.Bool("write", false, "write BENCHMARKS.md at the repository root")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := benchkit.Run(ctx, benchkit.Options{Short: *short, Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Print(rep.Table())
	fmt.Println()
	fmt.Print(rep.Ratios())
	if !*write {
		return
	}
	root, err := repoRoot()
	if err == nil {
		err = os.WriteFile(filepath.Join(root, "BENCHMARKS.md"), []byte(markdown(rep, *short)), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "wrote", filepath.Join(root, "BENCHMARKS.md"))
}

// repoRoot is the folder of the main module's go.mod.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a module")
	}
	return filepath.Dir(gomod), nil
}

func markdown(rep *benchkit.Report, short bool) string {
	uname, err := exec.Command("uname", "-a").Output()
	if err != nil {
		uname = []byte("unknown")
	}
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("Written by `go run ./integration/bench -write`: the same demo server (`integration/demoserver`)\n")
	b.WriteString("reached five ways, one after the other, in one run.\n\n")
	b.WriteString("- **direct stdio**: the client runs the demo server and talks on its stdin/stdout.\n")
	b.WriteString("- **byte relay (unix)**: the floor: a Unix socket whose accepted connection is joined to a demo server's pipes by two `io.Copy` loops, nothing parsed.\n")
	b.WriteString("- **mcpmux unix socket**: `<socket_dir>/demo.sock` of `mcpmux serve`.\n")
	b.WriteString("- **mcpmux connect**: the stdio bridge `mcpmux connect demo` to that socket.\n")
	b.WriteString("- **mcpmux websocket**: `ws://127.0.0.1:PORT/servers/demo`.\n\n")
	fmt.Fprintf(&b, "Echo: %d sequential `tools/call echo` after a warm-up, round-trip percentiles. ", rep.EchoCalls)
	fmt.Fprintf(&b, "Pipelined: %d echo calls with %d in flight. ", rep.Pipelined, rep.InFlight)
	fmt.Fprintf(&b, "Huge: `tools/call huge` of 1 MB (%d times) and 10 MB (%d times), one at a time; MB/s of answer bytes received.\n\n", rep.Huge1Reps, rep.Huge10Reps)
	if short {
		b.WriteString("**Short run (`-short`): these figures only show that every path works.**\n\n")
	}
	b.WriteString("## Machine\n\n")
	fmt.Fprintf(&b, "- `uname -a`: `%s`\n", strings.TrimSpace(string(uname)))
	fmt.Fprintf(&b, "- CPUs: %d\n", runtime.NumCPU())
	fmt.Fprintf(&b, "- Go: %s\n", runtime.Version())
	fmt.Fprintf(&b, "- Date: %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString("## Results\n\n")
	b.WriteString(rep.Table())
	b.WriteString("\n## Ratios\n\nFor p50 lower is better; for calls/s higher is better.\n\n")
	b.WriteString(rep.Ratios())
	return b.String()
}
