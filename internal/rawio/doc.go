// Package rawio reads and writes descriptors that are in the runtime's
// poller (sockets, and pipes made by os.Pipe) with system calls the
// scheduler is not told of, on Linux.
//
// An ordinary read or write of such a descriptor never blocks: it returns
// EAGAIN, and the caller waits in the poller. Yet the runtime treats every
// system call as one that might: entering one marks its processor as in a
// system call, wakes the monitor thread (sysmon) when it sleeps, and
// leaves the processor to be taken by another thread should the call take
// longer than the monitor's tick. A daemon relaying many small messages
// pays that at every read and write. Here a read or write that would block
// returns at once instead, and the wait is the poller's (syscall.RawConn),
// deadlines and Close included.
//
// Elsewhere than on Linux, and for a descriptor that is not in
// non-blocking mode, the ordinary calls are used.
//
// It starts no goroutines.
package rawio
