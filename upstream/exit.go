package upstream

import (
	"errors"
	"strconv"
)

// Reasons a process ended, as Exit.Reason reports them. Kill may add others:
// its argument becomes the reason.
const (
	ReasonExited       = "exited"        // the server ended on its own
	ReasonStopped      = "stopped"       // Stop was called
	ReasonJunkOutput   = "junk_output"   // more than MaxJunkLines junk lines in a row on stdout
	ReasonStalled      = "stalled"       // bytes waiting, none accepted for WriteStallTimeout
	ReasonStdoutClosed = "stdout_closed" // stdout reached EOF and the server did not exit within StdinGrace
	ReasonStdinClosed  = "stdin_closed"  // stdin refused writes and the server did not exit within StdinGrace
	ReasonKilled       = "killed"        // Kill was called with an empty reason
)

var (
	// ErrClosed is returned by Send and WaitWritable once the process is
	// on its way out: stopped, killed, exited, or no longer taking input.
	ErrClosed = errors.New("upstream: process has exited")
	// ErrQueueFull is returned by Send when the frame would take the write
	// queue past twice WriteQueueBytes. The frame is not queued; the caller
	// answers its sender with an error.
	ErrQueueFull = errors.New("upstream: write queue full")
	// ErrStopped is returned by SendLaterWait when its caller stopped
	// waiting for room (its session ended).
	ErrStopped = errors.New("upstream: stopped waiting for room in the write queue")
)

// Exit says why a process ended.
type Exit struct {
	Code   int    // exit code, -1 if signalled
	Signal string // the signal that ended it, e.g. "killed", "terminated"; "" if it exited
	Reason string // ReasonExited, ReasonStopped, ReasonStalled, ...
	Detail string // what made mcpmux end it, in words, naming the config key; "" when the reason says it all
	Err    error  // a failure of wait itself; a non-zero exit status is not one
}

// String reads like os/exec's errors, with the reason added when mcpmux
// ended the process: "exit status 3", "signal: killed (stalled)".
func (e Exit) String() string {
	var s string
	if e.Signal != "" {
		s = "signal: " + e.Signal
	} else {
		s = "exit status " + strconv.Itoa(e.Code)
	}
	if e.Reason != "" && e.Reason != ReasonExited {
		if e.Detail != "" {
			s += " (" + e.Reason + ": " + e.Detail + ")"
		} else {
			s += " (" + e.Reason + ")"
		}
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}
