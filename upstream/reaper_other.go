//go:build unix && !linux && !darwin

package upstream

import (
	"time"

	"golang.org/x/sys/unix"
)

// watchParent: the getppid poll alone.
func watchParent(int) <-chan struct{} { return nil }

// sweep does nothing: no subreaper here.
func sweep(time.Time) {}

// dupOnto makes fd to a copy of fd from.
func dupOnto(from, to int) error { return unix.Dup2(from, to) }
