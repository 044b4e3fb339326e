// Command bench measures, in one run: each mcpmux path against its floor,
// interleaved in one client call by call, in three rounds (issue #32's rows,
// with the endpoint all and the 2026-07-28 paths); echo latency and
// pipelined throughput over every path (direct stdio, the byte relay and
// bridge, mcpmux's socket, connect, WebSocket and Streamable HTTP, and the
// peers supergateway and mcp-proxy) for two backends (a minimal Go echo
// server and server-everything); large results; aggregate throughput with
// up to 10,000 sessions; the daemon's memory with 10,000 idle sessions and
// its peak under eight large results at once; how soon one more client is
// served; and the memory of one shared server against one per client; then
// the targets, met or missed.
//
//	cd integration && go run ./bench [-quick] [-write [-to DIR]]
//
// -quick (or -short) runs every row with tiny counts, in about a minute: it
// shows that every path and figure works, not what they are.
//
// With -ab OLD it instead compares two mcpmux binaries, OLD and -new (this
// checkout's, built, when -new is not given): the Go echo server behind a
// daemon of each, echo calls over the socket, connect and WebSocket paths
// interleaved call by call, three rounds, the median of the paired
// differences against OLD's median.
//
//	cd integration && go run ./bench -ab /tmp/mcpmux-old [-new BIN] [-quick]
//
// It needs node and the npm packages of integration/node (npm ci there, as
// ./scripts/test does). With -write it writes BENCHMARKS.md and its chart,
// BENCHMARKS.png, at the repository root. It never fails on a figure.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mcpmux/mcpmux/integration/benchkit"
)

const (
	mdFile    = "BENCHMARKS.md"
	chartFile = "BENCHMARKS.png"
)

func main() {
	quick := flag.Bool("quick", false, "tiny counts: only check that every path and figure works")
	short := flag.Bool("short", false, "the same as -quick")
	write := flag.Bool("write", false, "write "+mdFile+" and "+chartFile+" at the repository root (or in -to)")
	to := flag.String("to", "", "with -write: the `folder` to write them in, instead of the repository root (a preview)")
	old := flag.String("ab", "", "compare the mcpmux binary `OLD` with -new, call by call, instead")
	newBin := flag.String("new", "", "with -ab: the new mcpmux `binary`; empty: this checkout's, built")
	flag.Parse()
	*short = *short || *quick
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if *old != "" {
		err = ab(ctx, *old, *newBin, *short)
	} else {
		err = run(ctx, *short, *write, *to)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, short, write bool, to string) error {
	root, err := benchkit.RepoRoot(ctx)
	if err != nil {
		return err
	}
	out := root
	if to != "" {
		out = to
	}
	rep, err := benchkit.Run(ctx, benchkit.Options{Short: short, NodeDir: filepath.Join(root, "integration", "node"), Progress: os.Stderr})
	if err != nil {
		return err
	}
	rep.Machine.Commit = commit(root)
	fmt.Print(rep.Summary())
	if !write {
		return nil
	}
	png, err := os.Create(filepath.Join(out, chartFile))
	if err != nil {
		return err
	}
	err = rep.WriteChart(png)
	if cerr := png.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(out, mdFile), []byte(markdown(rep)), 0o644)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote", filepath.Join(out, mdFile), "and", filepath.Join(out, chartFile))
	return nil
}

// ab compares the mcpmux binaries old and newBin (built from this checkout
// when empty) and prints the table.
func ab(ctx context.Context, old, newBin string, short bool) error {
	if newBin == "" {
		root, err := benchkit.RepoRoot(ctx)
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "mxab")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		newBin = filepath.Join(dir, "mcpmux")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", newBin, "./cmd/mcpmux")
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0") // as the README installs it
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/mcpmux: %w\n%s", err, out)
		}
	}
	rep, err := benchkit.AB(ctx, benchkit.ABOptions{Old: old, New: newBin, Short: short, Progress: os.Stderr})
	if err != nil {
		return err
	}
	fmt.Print(rep.Summary())
	return nil
}

// commit names the checkout measured: the commit, and whether tracked
// files differ from it.
func commit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += ", with local changes"
	}
	return c
}
