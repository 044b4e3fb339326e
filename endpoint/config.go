package endpoint

import "github.com/mcpmux/mcpmux/mux"

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
// view: deny wins over allow, with the matching of a server's own view.
func (c *Config) Visible(name string) bool {
	return mux.ToolView{Allow: c.AllowTools, Deny: c.DenyTools}.Visible(name)
}
