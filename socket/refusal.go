package socket

import "fmt"

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
