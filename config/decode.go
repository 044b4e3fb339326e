package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// decoder decodes a document's generic values into a Config, recording one
// fileError per problem rather than stopping at the first: a value of the
// wrong type, a bad value, an unknown key.
type decoder struct {
	file string // for messages
	dir  string // absolute; relative paths resolve against it
	idx  *keyIndex
	errs []*fileError
	// bad counts the problems with values, not unknown keys: the checks
	// that compare two keys run only when neither has a problem.
	bad int
}

// line returns the line of path, or of its nearest ancestor that has one.
func (d *decoder) line(path keyPath) int {
	for p := path; len(p) > 0; p = p[:len(p)-1] {
		if n, ok := d.idx.lines[p.id()]; ok {
			return n
		}
	}
	return 0
}

// errorf records a problem with the value at path.
func (d *decoder) errorf(path keyPath, format string, args ...any) {
	d.bad++
	d.record(path, fmt.Sprintf(format, args...))
}

// record records a problem with the key at path.
func (d *decoder) record(path keyPath, msg string) {
	d.errs = append(d.errs, &fileError{File: d.file, Line: d.line(path), Key: path.String(), Msg: msg})
}

// failed reports whether a problem was recorded with the key at path.
func (d *decoder) failed(path keyPath) bool {
	key := path.String()
	return slices.ContainsFunc(d.errs, func(e *fileError) bool { return e.Key == key })
}

// A key is one key of a table: its name, and how a value is checked and
// stored. The tables' keys are listed in tables.go.
type key struct {
	name   string
	decode func(d *decoder, p keyPath, v any)
}

// names are the names of keys.
func names(keys []key) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.name
	}
	return out
}

// decodeTable decodes the table t, found at path, with keys; a key that is
// not among them is unknown.
func (d *decoder) decodeTable(path keyPath, t map[string]any, keys []key) {
	for _, name := range slices.Sorted(maps.Keys(t)) {
		i := slices.IndexFunc(keys, func(k key) bool { return k.name == name })
		if i < 0 {
			d.unknown(path.with(name), t[name], names(keys))
			continue
		}
		keys[i].decode(d, path.with(name), t[name])
	}
}

// unknown records a key that has no place where it is, v its value, and
// known the keys of the table it is in. The message names the table the
// key belongs to when it is a key of another table, else the known key
// it is likely a misspelling of (see nearest). A table made on the way to
// keys written further down (a in a.b = 1, or in [a.b]) is not itself
// written: the keys written are recorded instead.
func (d *decoder) unknown(path keyPath, v any, known []string) {
	if t, ok := v.(map[string]any); ok && !d.idx.written[path.id()] {
		for _, k := range slices.Sorted(maps.Keys(t)) {
			d.unknown(path.with(k), t[k], nil)
		}
		return
	}
	name := path[len(path)-1]
	switch home, near := keyHomes()[name], nearest(name, known); {
	case home != "":
		d.record(path, "unknown key here (it belongs in "+home+")")
	case near != "":
		d.record(path, "unknown key (did you mean "+near+"?)")
	case len(path) == 1:
		d.record(path, "unknown key (the file has [daemon], [listen] and [servers.NAME] tables)")
	default:
		d.record(path, "unknown key")
	}
}

// nearest is the key of known that name likely misspells: the one fewest
// edits away (a letter added, left out, changed, or two swapped), at most
// two (one for names of four letters or fewer); else the one key that has
// name as a whole part (level, of log_level). "" when there is none, or
// more than one.
func nearest(name string, known []string) string {
	limit := 2
	if len(name) <= 4 {
		limit = 1
	}
	var best []string
	for n := 1; n <= limit && len(best) == 0; n++ {
		for _, k := range known {
			if editDistance(name, k) == n {
				best = append(best, k)
			}
		}
	}
	if len(best) == 0 {
		for _, k := range known {
			if strings.Contains("_"+k+"_", "_"+name+"_") {
				best = append(best, k)
			}
		}
	}
	if len(best) != 1 {
		return ""
	}
	return best[0]
}

// editDistance counts the edits that turn a into b: bytes inserted,
// deleted or replaced, and neighbours swapped (the optimal string
// alignment distance).
func editDistance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// as takes v as a T, the TOML type want words; else it records that the
// value at p must be one.
func as[T any](d *decoder, p keyPath, v any, want string) (T, bool) {
	t, ok := v.(T)
	if !ok {
		d.errorf(p, "must be %s (got %s)", want, tomlType(v))
	}
	return t, ok
}

// text is a key that takes a string, checked by set.
func text(name string, set func(d *decoder, p keyPath, s string)) key {
	return key{name, func(d *decoder, p keyPath, v any) {
		if s, ok := as[string](d, p, v, "a string"); ok {
			set(d, p, s)
		}
	}}
}

// flag is a key that takes true or false.
func flag(name string, dst *bool) key {
	return key{name, func(d *decoder, p keyPath, v any) {
		if b, ok := as[bool](d, p, v, "true or false"); ok {
			*dst = b
		}
	}}
}

// choice is a key whose string is one of values, stored in dst.
func choice(name string, dst *string, values ...string) key {
	return text(name, func(d *decoder, p keyPath, v string) {
		if slices.Contains(values, v) {
			*dst = v
			return
		}
		quoted := make([]string, len(values))
		for i, w := range values {
			quoted[i] = strconv.Quote(w)
		}
		d.errorf(p, "invalid value %q: want %s or %s", v, strings.Join(quoted[:len(quoted)-1], ", "), quoted[len(quoted)-1])
	})
}

// list is a key that takes an array of strings, checked by set.
func list(name string, set func(d *decoder, p keyPath, l []string)) key {
	return key{name, func(d *decoder, p keyPath, v any) {
		if l, ok := d.strs(p, v); ok {
			set(d, p, l)
		}
	}}
}

// table is a key that takes a table, checked by set.
func table(name string, set func(d *decoder, p keyPath, t map[string]any)) key {
	return key{name, func(d *decoder, p keyPath, v any) {
		if t, ok := as[map[string]any](d, p, v, "a table"); ok {
			set(d, p, t)
		}
	}}
}

// count is a key that takes an integer of at least least (0 or 1).
func count(name string, dst *int, least int) key {
	return key{name, func(d *decoder, p keyPath, v any) {
		n, ok := as[int64](d, p, v, "an integer")
		switch {
		case !ok:
		case n < int64(least) && least == 0:
			d.errorf(p, "must not be negative (got %d)", n)
		case n < int64(least):
			d.errorf(p, "must be at least %d (got %d)", least, n)
		default:
			*dst = int(n)
		}
	}}
}

// countOr is count with least 0, where the file's 0 is none: the value the
// library gives that meaning, its own zero being its default.
func countOr(name string, dst *int, none int) key {
	k := count(name, dst, 0)
	return key{name, func(d *decoder, p keyPath, v any) {
		if k.decode(d, p, v); v == int64(0) {
			*dst = none
		}
	}}
}

// The durations a key takes: any, or only longer than zero.
const (
	anyDuration = false
	positive    = true
)

// duration is a key that takes a duration string, not negative; positive
// refuses zero.
func duration(name string, dst *time.Duration, positive bool) key {
	return key{name, func(d *decoder, p keyPath, v any) {
		s, ok := as[string](d, p, v, `a duration string such as "2s" or "250ms"`)
		if !ok {
			return
		}
		dur, ok := d.duration(p, s)
		switch {
		case !ok:
		case positive && dur == 0:
			d.errorf(p, "must be longer than zero")
		default:
			*dst = dur
		}
	}}
}

// durationOr is duration where the file's zero is none: the value the
// library gives that meaning, its own zero being its default.
func durationOr(name string, dst *time.Duration, none time.Duration) key {
	k := duration(name, dst, anyDuration)
	return key{name, func(d *decoder, p keyPath, v any) {
		before := d.bad
		if k.decode(d, p, v); d.bad == before && *dst == 0 {
			*dst = none
		}
	}}
}

// size is a key that takes a byte count (see decoder.size).
func size(name string, dst *int) key {
	return key{name, func(d *decoder, p keyPath, v any) {
		if n, ok := d.size(p, v); ok {
			*dst = n
		}
	}}
}

// sizeOr is size where the file's 0 is none: the value the library gives
// that meaning, its own zero being its default.
func sizeOr(name string, dst *int, none int) key {
	k := size(name, dst)
	return key{name, func(d *decoder, p keyPath, v any) {
		before := d.bad
		if k.decode(d, p, v); d.bad == before && *dst == 0 {
			*dst = none
		}
	}}
}

// strs accepts an array of strings.
func (d *decoder) strs(p keyPath, v any) ([]string, bool) {
	a, ok := as[[]any](d, p, v, "an array of strings")
	if !ok {
		return nil, false
	}
	list := make([]string, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			d.errorf(p, "must be an array of strings (element %d is %s)", i, tomlType(e))
			return nil, false
		}
		list[i] = s
	}
	return list, true
}

// duration accepts a string in time.ParseDuration's syntax, not negative.
func (d *decoder) duration(p keyPath, s string) (time.Duration, bool) {
	dur, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.errorf(p, "invalid duration %q", s)
		return 0, false
	case dur < 0:
		d.errorf(p, "negative duration %q", s)
		return 0, false
	}
	return dur, true
}

// size accepts a byte count: an integer, or a string of digits with an
// optional unit (see parseSize).
func (d *decoder) size(p keyPath, v any) (int, bool) {
	var n int64
	switch v := v.(type) {
	case int64:
		n = v
		if n < 0 {
			d.errorf(p, "negative size %d", n)
			return 0, false
		}
	case string:
		var err error
		if n, err = parseSize(v); err != nil {
			d.errorf(p, "%v", err)
			return 0, false
		}
	default:
		d.errorf(p, `must be a size: an integer number of bytes or a string such as "16MiB" (got %s)`, tomlType(v))
		return 0, false
	}
	if n > math.MaxInt {
		d.errorf(p, "size %d is too large", n)
		return 0, false
	}
	return int(n), true
}
