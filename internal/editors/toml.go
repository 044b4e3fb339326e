package editors

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mcpmux/mcpmux/config"
)

// TOML writes the result as a TOML document of [servers.NAME] tables, with
// what was not imported in comments at the end.
func (r *Result) TOML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# mcpmux import %s (%s): %d %s.\n", tomlComment(r.File), strings.Join(r.Kinds, ", "),
		len(r.Servers), plural(len(r.Servers), "server", "servers"))
	b.WriteString("# Append to mux.toml; read the \"check:\" comments first.\n")
	for i := range r.Servers {
		b.WriteString("\n")
		b.WriteString(r.Servers[i].TOML())
	}
	if len(r.Skipped) > 0 {
		b.WriteString("\n")
		for _, s := range r.Skipped {
			b.WriteString("# not imported: " + tomlComment(s) + "\n")
		}
	}
	return b.String()
}

// TOML writes the server as one [servers.NAME] table.
func (s *Server) TOML() string {
	var b strings.Builder
	checks := func(key string) {
		for _, c := range s.Checks[key] {
			b.WriteString("# check: " + tomlComment(c) + "\n")
		}
	}
	for _, n := range s.Notes {
		b.WriteString("# " + tomlComment(n) + "\n")
	}
	table := "servers." + tomlKey(s.Name)
	b.WriteString("[" + table + "]\n")
	checks("command")
	b.WriteString("command = " + tomlString(s.Command) + "\n")
	if len(s.Args) > 0 {
		checks("args")
		b.WriteString("args = " + tomlStrings(s.Args) + "\n")
	}
	if s.Share != "" {
		b.WriteString("share = " + tomlString(s.Share) + "\n")
	}
	checks("cwd")
	switch {
	case s.Cwd != "":
		b.WriteString("cwd = " + tomlString(s.Cwd) + "\n")
	case s.CwdNote != "":
		b.WriteString("# " + tomlComment(s.CwdNote) + "\n")
	}
	if len(s.InheritEnv) > 0 {
		b.WriteString("inherit_env = " + tomlStrings(s.InheritEnv) + "\n")
	}
	if s.StartTimeout != "" {
		b.WriteString("start_timeout = " + tomlString(s.StartTimeout) + "\n")
	}
	if s.RequestTimeout != "" {
		b.WriteString("request_timeout = " + tomlString(s.RequestTimeout) + "\n")
	}
	if s.MaxConcurrency > 0 {
		fmt.Fprintf(&b, "max_concurrency = %d\n", s.MaxConcurrency)
	}
	if len(s.Env) > 0 {
		b.WriteString("\n[" + table + ".env]\n")
		keys := make([]string, 0, len(s.Env))
		for k := range s.Env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			checks("env." + k)
			b.WriteString(tomlKey(k) + " = " + tomlString(s.Env[k]) + "\n")
		}
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// tomlStrings writes list as a TOML array of strings, on one line.
func tomlStrings(list []string) string {
	quoted := make([]string, len(list))
	for i, a := range list {
		quoted[i] = tomlString(a)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// tomlKey writes k as a TOML key: bare when it can be, else quoted.
func tomlKey(k string) string {
	if config.IsBareKey(k) {
		return k
	}
	return tomlString(k)
}

// tomlString writes s as a TOML basic string. s must be valid UTF-8 (JSON
// strings are); invalid bytes become U+FFFD.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r) // utf8.RuneError for invalid bytes, written as U+FFFD
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlComment makes s safe inside a one-line TOML comment, where control
// characters other than tab are not allowed.
func tomlComment(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
}
