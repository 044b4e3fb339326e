package editors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Client is one editor's MCP config format: where its files are, where in
// them its servers are, and how an entry that reaches mcpmux is written
// for it. Adding an editor is adding one to Clients.
type Client struct {
	Name    string   // as its users say it: "Claude Code"
	For     string   // the value of client-config --for that names it
	Aliases []string // other values --for takes for it
	Listed  string   // how messages list it among the --for values; For when ""
	Help    string   // client-config's help for it: lines after the first are indented below it

	// Where it keeps its servers.
	UserFiles    []UserFile    // the user's own files, in the order doctor reads them
	ProjectFiles []ProjectFile // a project's files, relative to the project's folder
	Shapes       []Shape       // where in a file its servers are: import looks for each

	// The entry client-config writes.
	Key       string // the member of the file holding the object of servers
	StdioType string // the "type" of an entry that runs a command; "" writes none
	HTTPType  string // the "type" of an entry reached by URL; "" writes none
	NoHTTP    string // why --http is refused for it; "" when it takes URLs
	Where     string // where the entry goes, said on stderr: "put this in " + Where
	HTTPWhere string // the same for an entry reached by URL, when it differs
	// AddLine, when not nil, is the editor's own command line that adds an
	// entry running command: it is printed first, after AddNote, and the
	// JSON after OrNote, all on stdout. Never with a token: a command line
	// is in every user's ps and in the shell's history.
	AddLine         func(name string, command []string) []string
	AddNote, OrNote string
}

// Folder is a folder user files are found in.
type Folder int

const (
	Home    Folder = iota // $HOME
	AppData               // the platform's folder for application settings
)

// UserFile is one of an editor's files that holds a user's servers, for
// every project.
type UserFile struct {
	In   Folder
	Path string // below In, with '/' between folders
}

// ProjectFile is one of an editor's files that holds a project's servers.
// The editor runs them in the project's folder, which the file does not
// name: import gives them share = "project".
type ProjectFile struct {
	Path       string // below the project's folder, with '/' between folders
	Is         string // what it is, for import's notes: "a project's .mcp.json"
	ImportOnly bool   // doctor does not read it in the folder it runs in
}

// Shape is where in an editor's file an object of servers is.
type Shape struct {
	Path []string // the members leading to it from the top
	Kind string   // what import calls it in its output
	// Each, when not "", makes Path lead to an object of projects, each a
	// folder with its servers in its member Each.
	Each string
}

// mcpServers is the shape most editors share.
var mcpServers = Shape{Path: []string{"mcpServers"}, Kind: "mcpServers"}

// Clients are the editors mcpmux knows, in the order it lists them.
var Clients = []*Client{
	{
		Name: "Claude Code", For: "claude", Aliases: []string{"claude-code"}, Listed: "claude (Claude Code)",
		Help: "Claude Code: a \"claude mcp add\" command line, or .mcp.json\n" +
			"(with --http, .mcp.json only: no command line carries the token)",
		UserFiles:    []UserFile{{Home, ".claude.json"}},
		ProjectFiles: []ProjectFile{{Path: ".mcp.json", Is: "a project's .mcp.json"}},
		Shapes:       []Shape{mcpServers, {Path: []string{"projects"}, Kind: "Claude Code projects", Each: "mcpServers"}},
		Key:          "mcpServers",
		HTTPType:     "http",
		HTTPWhere:    `the project's .mcp.json, merged into "mcpServers" (a command line would show the token to every user)`,
		AddLine: func(name string, command []string) []string {
			return append([]string{"claude", "mcp", "add", name, "--"}, command...)
		},
		AddNote: "# Claude Code: run this (add --scope user to have it in every project)",
		OrNote:  "\n# or put this in the project's .mcp.json:",
	},
	{
		Name: "Claude Desktop", For: "claude-desktop",
		Help:      "Claude Desktop's claude_desktop_config.json",
		UserFiles: []UserFile{{AppData, "Claude/claude_desktop_config.json"}},
		Shapes:    []Shape{mcpServers},
		Key:       "mcpServers",
		NoHTTP:    "Claude Desktop's config file takes commands only; leave out --http (mcpmux connect reaches the same server)",
		Where:     `claude_desktop_config.json (Claude Desktop: Settings > Developer > Edit Config), merged into "mcpServers"`,
	},
	{
		Name: "Cursor", For: "cursor",
		Help:         "Cursor's mcp.json",
		UserFiles:    []UserFile{{Home, ".cursor/mcp.json"}},
		ProjectFiles: []ProjectFile{{Path: ".cursor/mcp.json", Is: "a Cursor project's mcp.json"}},
		Shapes:       []Shape{mcpServers},
		Key:          "mcpServers",
		Where:        `~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project), merged into "mcpServers"`,
	},
	{
		Name: "VS Code", For: "vscode",
		Help:      "VS Code's mcp.json",
		UserFiles: []UserFile{{AppData, "Code/User/mcp.json"}, {AppData, "Code/User/settings.json"}},
		ProjectFiles: []ProjectFile{
			{Path: ".vscode/mcp.json", Is: "a VS Code workspace's mcp.json"},
			{Path: ".vscode/settings.json", Is: "a VS Code workspace's settings.json", ImportOnly: true},
		},
		Shapes: []Shape{
			{Path: []string{"servers"}, Kind: "VS Code servers"},
			{Path: []string{"mcp", "servers"}, Kind: "VS Code settings mcp.servers"},
		},
		Key:       "servers",
		StdioType: "stdio",
		HTTPType:  "http",
		Where:     `.vscode/mcp.json (one workspace) or the user mcp.json (command "MCP: Open User Configuration"), merged into "servers"`,
	},
}

// Lookup finds the client that client-config --for names.
func Lookup(target string) (*Client, error) {
	if target == "" {
		return nil, errors.New("missing --for: " + orList(Clients, (*Client).listed))
	}
	for _, c := range Clients {
		if c.For == target || slices.Contains(c.Aliases, target) {
			return c, nil
		}
	}
	return nil, fmt.Errorf("--for %q: want %s", target, orList(Clients, (*Client).listed))
}

func (c *Client) listed() string {
	if c.Listed != "" {
		return c.Listed
	}
	return c.For
}

// ForValues are the values of --for, as the flag's help lists them.
func ForValues() string { return orList(Clients, func(c *Client) string { return c.For }) }

// ForChoices are the values of --for, as a command's usage lists them.
func ForChoices() string {
	values := make([]string, len(Clients))
	for i, c := range Clients {
		values[i] = c.For
	}
	return strings.Join(values, "|")
}

// ForHelp is client-config's help for each value of --for, one block each.
func ForHelp() string {
	var b strings.Builder
	for i, c := range Clients {
		if i > 0 {
			b.WriteString("\n")
		}
		lines := strings.Split(c.Help, "\n")
		fmt.Fprintf(&b, "  --for %-16s%s", c.For, lines[0])
		for _, l := range lines[1:] {
			b.WriteString("\n" + strings.Repeat(" ", 24) + l)
		}
	}
	return b.String()
}

// orList lists the items as "a, b, c or d".
func orList[T any](items []T, text func(T) string) string {
	var b strings.Builder
	for i, it := range items {
		switch {
		case i == 0:
		case i == len(items)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(text(it))
	}
	return b.String()
}

// File is one editor file where doctor looks.
type File struct {
	Client *Client
	Path   string
}

// Files are the places the editors keep their MCP servers for a user whose
// environment getenv reads, on goos: per user, and per project in the
// folder cwd.
func Files(getenv func(string) string, goos, cwd string) []File {
	home := getenv("HOME")
	// Some editors keep their user files in the platform's folder for
	// application settings.
	appData := filepath.Join(home, "Library", "Application Support")
	if goos != "darwin" {
		appData = filepath.Join(home, ".config")
		if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
			appData = x
		}
	}
	var files []File
	add := func(c *Client, base, rel string) {
		if filepath.IsAbs(base) {
			files = append(files, File{c, filepath.Join(base, filepath.FromSlash(rel))})
		}
	}
	for _, c := range Clients {
		for _, f := range c.UserFiles {
			switch {
			case f.In == Home:
				add(c, home, f.Path)
			case filepath.IsAbs(home):
				add(c, appData, f.Path)
			}
		}
		for _, f := range c.ProjectFiles {
			if !f.ImportOnly {
				add(c, cwd, f.Path)
			}
		}
	}
	seen := map[string]bool{} // a project folder may be the home folder
	return slices.DeleteFunc(files, func(f File) bool {
		dup := seen[f.Path]
		seen[f.Path] = true
		return dup
	})
}

// projectFile says what makes file a project's config (its servers run in
// the project's folder, which the file does not name), or "" for a user's
// or an application's config. A file in a project's place that is also a
// user's file in the home folder is the user's.
func projectFile(file string) string {
	home, _ := os.UserHomeDir()
	for _, c := range Clients {
		for _, f := range c.ProjectFiles {
			rel := filepath.FromSlash(f.Path)
			if !strings.HasSuffix(file, string(filepath.Separator)+rel) && file != rel {
				continue
			}
			user := slices.ContainsFunc(c.UserFiles, func(u UserFile) bool {
				return u.In == Home && filepath.Join(home, filepath.FromSlash(u.Path)) == file
			})
			if !user {
				return f.Is
			}
		}
	}
	return ""
}
