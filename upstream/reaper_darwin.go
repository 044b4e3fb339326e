package upstream

import (
	"time"

	"golang.org/x/sys/unix"
)

// watchParent returns a channel closed when the process parent exits, from
// a kqueue NOTE_EXIT watch; nil (the getppid poll alone) if kqueue fails.
// The watch is set before the caller checks getppid, so it cannot be on a
// stranger that took a dead parent's pid: NOTE_EXIT is no mere hint here.
func watchParent(parent int) <-chan struct{} {
	kq, err := unix.Kqueue()
	if err != nil {
		return nil
	}
	gone := make(chan struct{})
	var ev unix.Kevent_t
	unix.SetKevent(&ev, parent, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev.Fflags = unix.NOTE_EXIT
	if _, err := unix.Kevent(kq, []unix.Kevent_t{ev}, nil, nil); err != nil {
		unix.Close(kq)
		if err == unix.ESRCH {
			close(gone)
			return gone
		}
		return nil
	}
	// Lives as long as the reaper, which is a process of its own.
	go func() {
		defer unix.Close(kq)
		out := make([]unix.Kevent_t, 1)
		for {
			n, err := unix.Kevent(kq, nil, out, nil)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			if n > 0 {
				close(gone)
				return
			}
		}
	}()
	return gone
}

// sweep does nothing: macOS has no subreaper, so the server's orphans go to
// launchd and only those left in the group die with it.
func sweep(time.Time) {}

// dupOnto makes fd to a copy of fd from.
func dupOnto(from, to int) error { return unix.Dup2(from, to) }
