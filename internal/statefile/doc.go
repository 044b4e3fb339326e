// Package statefile owns the rules by which mcpmux touches its state
// folder (the web token, the auto-started daemon's log, the daemons'
// records, the HTTP session records, what it remembers of servers), so
// that no other local user can steer what the daemon reads or where it
// writes:
//
//   - a folder is used only when it is a real directory owned by this
//     user; one that is ours but open to others is repaired (chmod 0700)
//     and the repair is reported; any other is refused, by name (PrepareDir;
//     ExamineDir is the classification package socket's folder checks share);
//   - a file is opened without following a symlink, without blocking on a
//     FIFO, and used only when it is a regular file of this user that group
//     and others cannot write (Open, ReadFile, OpenAppend, OpenLog, Stat);
//   - a file is read with a size bound, checked before a byte is read and
//     enforced while reading (ReadFile: ErrTooLarge);
//   - a file is replaced whole through a temporary file created exclusively
//     under an unpredictable name in the same folder, then renamed (WriteFile).
//
// A refusal matches ErrUnsafe (or ErrTooLarge) and names the path, its
// owner and its mode; callers log it and decide whether to repair (remove
// the file in their own folder) or do without it. It is written for Linux
// and macOS.
package statefile
