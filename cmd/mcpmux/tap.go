package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/daemon"
	"github.com/mcpmux/mcpmux/mux"
)

// tapLineCap bounds a line of tap --full.
const tapLineCap = 4096

func newTapCmd() *cobra.Command {
	var asJSON, full bool
	var session uint64
	cmd := &cobra.Command{
		Use:   "tap [NAME...]",
		Short: "Follow the messages of the named servers (or all) live, both ways, redacted unless --full",
	}
	find := daemonFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object a line")
	cmd.Flags().BoolVar(&full, "full", false, "show whole messages (cut at 4 KiB a line) rather than their shape")
	cmd.Flags().Uint64Var(&session, "session", 0, "only this session's messages")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		t, err := find(cmd.Context(), cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		body, err := daemon.NewClient(t.dir).Tap(cmd.Context(), args, session, full)
		if err != nil {
			return err
		}
		defer body.Close()
		err = copyTap(cmd.OutOrStdout(), body, asJSON)
		if cmd.Context().Err() != nil {
			return nil // interrupted while following
		}
		return err
	}
	return cmd
}

// copyTap prints the daemon's tap lines as they come, as JSON or as text.
func copyTap(w io.Writer, r io.Reader, asJSON bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if asJSON {
			fmt.Fprintln(w, sc.Text())
			continue
		}
		var ev mux.TapEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("the daemon sent a tap line that is not JSON: %w", err)
		}
		fmt.Fprintln(w, tapLine(ev))
	}
	return sc.Err()
}

// tapLine is one event as a line: time, server, session (client), direction,
// what it is, size, time taken, shape or message.
func tapLine(ev mux.TapEvent) string {
	ts := ev.Time.Local().Format("15:04:05.000")
	if ev.Lost > 0 {
		return fmt.Sprintf("%s ... %d lines dropped", ts, ev.Lost)
	}
	who := fmt.Sprintf("#%d", ev.Session)
	if ev.Client != "" {
		who += "(" + ev.Client + ")"
	}
	arrow := "->"
	if ev.Dir == "down" {
		arrow = "<-"
	}
	what := ev.Method
	if ev.Kind == "answer" || ev.Kind == "error" {
		what = fmt.Sprintf("%s to %s id %s/up %d", ev.Kind, ev.Method, ev.ID, ev.UpstreamID)
	} else if len(ev.ID) > 0 {
		what = fmt.Sprintf("%s id %s/up %d", ev.Method, ev.ID, ev.UpstreamID)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %s %s %dB", ts, ev.Server, who, arrow, what, ev.Bytes)
	if ev.MS != nil {
		fmt.Fprintf(&b, " %.1fms", *ev.MS)
	}
	body := ev.Shape
	if len(ev.Message) > 0 {
		body = string(ev.Message)
		if len(body) > tapLineCap {
			body = body[:tapLineCap] + "…"
		}
	}
	if body != "" {
		b.WriteString(" " + body)
	}
	return b.String()
}
