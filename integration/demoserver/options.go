package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// modeEnv names the environment variable that selects misbehaviour without
// touching the command line: comma-separated flag names without their dashes,
// with "=value" where the flag takes one.
const modeEnv = "DEMO_MODE"

// defaultMaxLine is the longest stdin line the server accepts.
const defaultMaxLine = 64 << 20

// options is what the flags and DEMO_MODE ask for.
type options struct {
	banner         int           // junk lines printed to stdout before reading
	ignoreEOF      bool          // stay up after stdin ends
	ignoreSigterm  bool          // signal.Ignore(SIGTERM)
	grandchild     bool          // spawn a grandchild process at start
	grandchildOnly bool          // be that grandchild: ignore SIGTERM, sleep forever
	noRead         bool          // never read stdin
	crashAfter     int           // exit(3) after this many answers; 0 means never
	crashIfExists  string        // exit(3) at start while this file exists
	stderrNoise    bool          // one stderr line per request
	maxLine        int           // longest stdin line accepted, in bytes
	startDelay     time.Duration // sleep this long before the first read, as a slow start does
}

// parseOptions reads the words of mode (the value of DEMO_MODE) and then
// args, so that a flag given on the command line overrides the same word in
// the environment. Usage and errors are written to stderr.
func parseOptions(args []string, mode string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("demoserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.banner, "banner", 0, "print `N` junk lines to stdout before reading stdin")
	fs.BoolVar(&o.ignoreEOF, "ignore-eof", false, "keep running when stdin reaches EOF")
	fs.BoolVar(&o.ignoreSigterm, "ignore-sigterm", false, "ignore SIGTERM")
	fs.BoolVar(&o.grandchild, "grandchild", false, "spawn a grandchild that ignores SIGTERM and sleeps forever")
	fs.BoolVar(&o.grandchildOnly, "grandchild-only", false, "be that grandchild (used by --grandchild)")
	fs.BoolVar(&o.noRead, "no-read", false, "never read stdin, but stay alive")
	fs.IntVar(&o.crashAfter, "crash-after", 0, "exit with code 3 after answering `N` requests")
	fs.BoolVar(&o.stderrNoise, "stderr-noise", false, "write a stderr line for every request")
	fs.StringVar(&o.crashIfExists, "crash-if-exists", "", "exit with code 3 at start while the file at `PATH` exists")
	fs.IntVar(&o.maxLine, "max-line", defaultMaxLine, "longest stdin line accepted, in `bytes`")
	fs.DurationVar(&o.startDelay, "start-delay", 0, "sleep `DURATION` before reading stdin, as a server slow to start")

	var envArgs []string
	for _, word := range strings.Split(mode, ",") {
		word = strings.TrimLeft(strings.TrimSpace(word), "-")
		if word != "" {
			envArgs = append(envArgs, "--"+word)
		}
	}
	if err := fs.Parse(envArgs); err != nil {
		return options{}, fmt.Errorf("%s=%q: %w", modeEnv, mode, err)
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("%s=%q: unexpected %q", modeEnv, mode, fs.Arg(0))
	}
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case o.banner < 0, o.crashAfter < 0:
		return options{}, fmt.Errorf("--banner and --crash-after must not be negative")
	case o.maxLine <= 0:
		return options{}, fmt.Errorf("--max-line must be positive")
	}
	return o, nil
}
