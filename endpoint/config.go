package endpoint

import "slices"

// All is the name of the endpoint that holds every configured server when
// the configuration does not define it.
const All = "all"

// DefaultSeparator joins a server's name and its own tool or prompt name.
const DefaultSeparator = "__"

// Config is one endpoint: a named set of servers reached as one.
type Config struct {
	Name    string
	Servers []string // the member servers, by name, in the order they are listed
	// AllowTools and DenyTools are globs ('*' any run of characters, '?'
	// any one) over the prefixed tool names. A tool is visible when it
	// matches no deny glob and, if AllowTools is not empty, an allow glob.
	AllowTools []string
	DenyTools  []string
	Separator  string // "" means DefaultSeparator
	// MaxMessageBytes bounds a message from the endpoint's client; 0
	// means the largest of the members' (set by the daemon).
	MaxMessageBytes int
}

// separator is Separator or its default.
func (c *Config) separator() string {
	if c.Separator == "" {
		return DefaultSeparator
	}
	return c.Separator
}

// Visible reports whether the tool of prefixed name is in the endpoint's
// view: deny wins over allow.
func (c *Config) Visible(name string) bool {
	match := func(g string) bool { return Glob(g, name) }
	if slices.ContainsFunc(c.DenyTools, match) {
		return false
	}
	return len(c.AllowTools) == 0 || slices.ContainsFunc(c.AllowTools, match)
}

// Glob reports whether name matches pattern, where '*' stands for any run
// of characters (none included) and '?' for any one character.
func Glob(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	// The last '*' seen, and where in name its run would end next.
	star, next := -1, 0
	i, j := 0, 0
	for j < len(n) {
		switch {
		case i < len(p) && (p[i] == '?' || p[i] == n[j]):
			i++
			j++
		case i < len(p) && p[i] == '*':
			star, next = i, j
			i++
		case star >= 0:
			next++
			i, j = star+1, next
		default:
			return false
		}
	}
	for i < len(p) && p[i] == '*' {
		i++
	}
	return i == len(p)
}
