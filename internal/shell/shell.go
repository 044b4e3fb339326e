// Package shell writes command lines that a POSIX shell reads back as the
// same words: the lines mcpmux prints for a user to run (a "claude mcp add"
// line, the systemctl and launchctl commands of a service).
package shell

import "strings"

// Join writes args as a POSIX shell command line.
func Join(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = Quote(a)
	}
	return strings.Join(quoted, " ")
}

// Quote quotes a for a POSIX shell when it needs it.
func Quote(a string) string {
	safe := a != "" && !strings.ContainsFunc(a, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
	})
	if safe {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
