package rawio

import (
	"io"
	"os"
	"syscall"
)

// Reader reads a descriptor in the runtime's poller without telling the
// scheduler of its system calls. Like the reads of a net.Conn or an
// os.File, it waits in the poller while there is nothing to read, and
// honours the descriptor's read deadline and Close (net.ErrClosed for a
// connection; for an os.File, the poller's "use of closed file", which
// os.File.Read would turn into os.ErrClosed). One goroutine reads
// it at a time.
type Reader struct {
	rc    syscall.RawConn
	p     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool // r.read, bound once
}

// NewReader returns a Reader of r when r is a descriptor in non-blocking
// mode and raw reads are available here; otherwise r itself.
func NewReader(r io.Reader) io.Reader {
	rc := rawConn(r)
	if rc == nil {
		return r
	}
	rr := &Reader{rc: rc}
	rr.fn = rr.read
	return rr
}

// rawConn is r's RawConn when r is a descriptor in non-blocking mode and
// raw system calls are available here; nil otherwise.
func rawConn(r any) syscall.RawConn {
	if !available {
		return nil
	}
	sc, ok := r.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	nonblocking := false
	if err := rc.Control(func(fd uintptr) { nonblocking = isNonblocking(fd) }); err != nil || !nonblocking {
		return nil
	}
	return rc
}

// Read reads into p what the descriptor has, waiting until it has some.
// It returns io.EOF at the end of the stream.
func (r *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.errno = p, 0, 0
	err := r.rc.Read(r.fn)
	n, errno := r.n, r.errno
	r.p = nil // hold no reference to the caller's buffer
	switch {
	case err != nil:
		return 0, err // a deadline, or Close
	case errno != 0:
		return 0, os.NewSyscallError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// read reads once into r.p; false: nothing to read yet, wait.
func (r *Reader) read(fd uintptr) bool {
	for {
		n, errno := read(fd, r.p)
		switch errno {
		case 0:
			r.n = n
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.errno = errno
		return true
	}
}

// Write writes p to fd, a descriptor in non-blocking mode, as far as it
// takes it without blocking; the error is the system call's (EAGAIN: it
// takes no more now). It is for the function a syscall.RawConn's Write
// is given.
func Write(fd uintptr, p []byte) (int, syscall.Errno) {
	return write(fd, p)
}

// Writer writes a descriptor in the runtime's poller without telling the
// scheduler of its system calls. Like the writes of a net.Conn, a Write
// waits in the poller while the descriptor takes no more, until all of p
// is written, and honours the write deadline and Close. One goroutine
// writes it at a time.
type Writer struct {
	rc    syscall.RawConn
	p     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool // w.write, bound once
}

// NewWriter returns a Writer of w when w is a descriptor in non-blocking
// mode and raw writes are available here; otherwise w itself.
func NewWriter(w io.Writer) io.Writer {
	rc := rawConn(w)
	if rc == nil {
		return w
	}
	rw := &Writer{rc: rc}
	rw.fn = rw.write
	return rw
}

// Write writes all of p, or returns why it could not, with how much it
// wrote.
func (w *Writer) Write(p []byte) (int, error) {
	w.p, w.n, w.errno = p, 0, 0
	err := w.rc.Write(w.fn)
	n, errno := w.n, w.errno
	w.p = nil
	switch {
	case err != nil:
		return n, err
	case errno != 0:
		return n, os.NewSyscallError("write", errno)
	}
	return n, nil
}

// write writes what is left of w.p; false: the descriptor takes no more
// now, wait.
func (w *Writer) write(fd uintptr) bool {
	for w.n < len(w.p) {
		n, errno := write(fd, w.p[w.n:])
		switch errno {
		case 0:
			w.n += n
			continue
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		w.errno = errno
		return true
	}
	return true
}
