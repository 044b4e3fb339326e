package socket

import (
	"errors"
	"fmt"
)

// refusal is an error whose text stands on its own (it names what was
// refused and why) and that matches one of the package's sentinels under
// errors.Is, so callers can branch on the kind without parsing the text.
type refusal struct {
	kind error
	msg  string
}

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return r.kind }

// refuse builds a refusal of the given kind.
func refuse(kind error, format string, args ...any) error {
	return &refusal{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Refusal returns the error Dial refused with when it refused because the
// socket folder or the listener is not this user's (ErrUnsafeDir,
// ErrForeignPeer): its text names the folder and what is wrong with it,
// without the layers of wrapping around it. nil when err is no such
// refusal.
func Refusal(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if k := errors.Unwrap(e); k == ErrUnsafeDir || k == ErrForeignPeer {
			return e
		}
	}
	return nil
}
