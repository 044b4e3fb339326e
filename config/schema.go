package config

import (
	"bytes"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// The file's schema, as go-toml decodes it in strict mode: a key that no
// field names is an unknown key, a value the field cannot hold is a wrong
// type. A pointer tells an absent key from a zero value. Durations are
// strings (want:"duration" words their type errors); sizes and roots take
// more than one TOML type, so they are decoded as any and checked after.

type fileDoc struct {
	Daemon  *fileDaemon            `toml:"daemon"`
	Listen  *fileListen            `toml:"listen"`
	Servers map[string]*fileServer `toml:"servers"`
}

type fileDaemon struct {
	LogLevel  *string `toml:"log_level"`
	LogFormat *string `toml:"log_format"`
	Autostart *bool   `toml:"autostart"`
	IdleExit  *string `toml:"idle_exit" want:"duration"`

	FirstByteTimeout *string `toml:"first_byte_timeout" want:"duration"`
	LineTimeout      *string `toml:"line_timeout" want:"duration"`
	MaxQueuedBytes   any     `toml:"max_queued_bytes"`
	MaxHTTPSessions  *int    `toml:"max_http_sessions"`
}

type fileListen struct {
	SocketDir         *string  `toml:"socket_dir"`
	HTTP              *string  `toml:"http"`
	HTTPToken         *string  `toml:"http_token"`
	HTTPOrigins       []string `toml:"http_origins"`
	MaxInflight       *int     `toml:"max_inflight"`
	OutboxHighWater   any      `toml:"outbox_high_water"`
	OutboxMax         any      `toml:"outbox_max"`
	HTTPAllowRemote   *bool    `toml:"http_allow_remote"`
	MaxStreamsPerConn *int     `toml:"max_streams_per_conn"`
	HTTPSessionIdle   *string  `toml:"http_session_idle" want:"duration"`
	DrainTimeout      *string  `toml:"drain_timeout" want:"duration"`

	HTTPMaxConnections *int `toml:"http_max_connections"`
	HTTPMaxStreams     *int `toml:"http_max_streams"`
	HTTPMaxListens     *int `toml:"http_max_listens"`
}

type fileServer struct {
	Command         *string           `toml:"command"`
	Args            []string          `toml:"args"`
	Env             map[string]string `toml:"env"`
	InheritEnv      []string          `toml:"inherit_env"`
	Cwd             *string           `toml:"cwd"`
	Stderr          *string           `toml:"stderr"`
	StdinGrace      *string           `toml:"stdin_grace" want:"duration"`
	TermGrace       *string           `toml:"term_grace" want:"duration"`
	StartTimeout    *string           `toml:"start_timeout" want:"duration"`
	InitTimeout     *string           `toml:"initialize_timeout" want:"duration"`
	Protocol        *string           `toml:"protocol"`
	UpstreamCaps    map[string]any    `toml:"upstream_capabilities"`
	MaxMessageBytes any               `toml:"max_message_bytes"`
	MaxJunkLines    *int              `toml:"max_junk_lines"`
	WriteQueueBytes any               `toml:"write_queue_bytes"`

	RestartBackoff    *string `toml:"restart_backoff" want:"duration"`
	RestartBackoffMax *string `toml:"restart_backoff_max" want:"duration"`
	RestartWindow     *string `toml:"restart_window" want:"duration"`
	MaxRestarts       *int    `toml:"max_restarts"`
	WriteStallTimeout *string `toml:"write_stall_timeout" want:"duration"`
	PingInterval      *string `toml:"ping_interval" want:"duration"`
	PingFailures      *int    `toml:"ping_failures"`
	RequestTimeout    *string `toml:"request_timeout" want:"duration"`
	Start             *string `toml:"start"`
	IdleTimeout       *string `toml:"idle_timeout" want:"duration"`

	MaxSessions          *int     `toml:"max_sessions"`
	MaxConcurrency       *int     `toml:"max_concurrency"`
	ServerRequests       *string  `toml:"server_requests"`
	ServerRequestTimeout *string  `toml:"server_request_timeout" want:"duration"`
	Roots                any      `toml:"roots"`
	DefaultLogLevel      *string  `toml:"default_log_level"`
	Share                *string  `toml:"share"`
	ProjectMarkers       []string `toml:"project_markers"`
}

// decodeFile decodes data strictly into a fileDoc. doc is the same file
// decoded into generic values, which says what a wrong-typed value is.
// The problems go-toml finds are recorded on d: every unknown key, or the
// first wrong type.
func (d *decoder) decodeFile(data []byte, doc map[string]any) *fileDoc {
	var f fileDoc
	err := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields().Decode(&f)
	var missing *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case err == nil:
	case errors.As(err, &missing):
		for _, e := range missing.Errors {
			d.unknown(d.keyAt(&e))
		}
	case errors.As(err, &de):
		d.wrongType(keyPath(de.Key()), doc)
		return nil
	default:
		d.errorf(nil, "%v", err)
		return nil
	}
	return &f
}

// keyAt is the full path of the key an unknown-key error points at. go-toml
// gives the path of a key inside an inline table without the inline
// table's own key; the key found at the error's position has it.
func (d *decoder) keyAt(e *toml.DecodeError) keyPath {
	key := keyPath(e.Key())
	line, col := e.Position()
	if at, ok := d.idx.at(line, col); ok && len(key) > 0 && len(at) > len(key) && at[len(at)-1] == key[len(key)-1] {
		return at
	}
	return key
}

// wrongType records the value at path as not of the type its key takes,
// naming both. In an array of strings it names the first element that is
// not one; in a table of strings, the entry.
func (d *decoder) wrongType(path keyPath, doc map[string]any) {
	v := valueAt(doc, path)
	want := expectation(path)
	switch v := v.(type) {
	case []any:
		if want == "an array of strings" {
			for i, e := range v {
				if _, ok := e.(string); !ok {
					d.errorf(path, "must be %s (element %d is %s)", want, i, tomlType(e))
					return
				}
			}
		}
	case map[string]any:
		if want == "a table" && len(path) == 3 && path[2] == "env" {
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if _, ok := v[k].(string); !ok {
					d.errorf(path.with(k), "must be a string (got %s)", tomlType(v[k]))
					return
				}
			}
		}
	}
	d.errorf(path, "must be %s (got %s)", want, tomlType(v))
}

// valueAt finds the generic value at path; nil when there is none.
func valueAt(doc map[string]any, path keyPath) any {
	var v any = doc
	for _, k := range path {
		t, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = t[k]
	}
	return v
}

// expectation words what the key at path takes, from the schema's type.
func expectation(path keyPath) string {
	t := reflect.TypeFor[fileDoc]()
	var tag reflect.StructTag
	for i, k := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByKey(t, k)
			if !ok {
				return "known"
			}
			t, tag = f.Type, f.Tag
		case reflect.Map:
			if t.Elem() == reflect.TypeFor[*fileServer]() && i == len(path)-1 {
				return "a [servers.NAME] table"
			}
			t, tag = t.Elem(), ""
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case tag.Get("want") == "duration":
		return `a duration string such as "2s" or "250ms"`
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.Int:
		return "an integer"
	case t.Kind() == reflect.Slice:
		return "an array of strings"
	}
	return "a table"
}

// fieldByKey finds the field of struct type t that decodes key.
func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("toml"), ","); name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// keyHomes maps each key of the [daemon], [listen] and [servers.NAME]
// tables to its table, for the message about a key in the wrong one.
func keyHomes() map[string]string {
	homes := map[string]string{}
	for home, t := range map[string]reflect.Type{
		"[daemon]":       reflect.TypeFor[fileDaemon](),
		"[listen]":       reflect.TypeFor[fileListen](),
		"[servers.NAME]": reflect.TypeFor[fileServer](),
	} {
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			homes[name] = home
		}
	}
	return homes
}

// unknown records a key that has no place where it is, naming the table
// it belongs to when it is a key of another table.
func (d *decoder) unknown(path keyPath) {
	if len(path) == 0 {
		d.errorf(path, "unknown key")
		return
	}
	switch home := keyHomes()[path[len(path)-1]]; {
	case home != "":
		d.errorf(path, "unknown key here (it belongs in %s)", home)
	case len(path) == 1:
		d.errorf(path, "unknown key (the file has [daemon], [listen] and [servers.NAME] tables)")
	default:
		d.errorf(path, "unknown key")
	}
}
