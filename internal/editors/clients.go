package editors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
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

	// How its files are written when not in JSON (comments and trailing
	// commas allowed): a file whose name ends in Ext is read by Decode,
	// which returns its top table as JSON members; Expected says what
	// import looks for in such a file.
	Ext      string
	Decode   func(data []byte) (map[string]json.RawMessage, error)
	Expected string

	// Timeouts are the keys of its entries that hold timeouts. Editors
	// give one key different meanings, so these are read only in the
	// editor's own files and shapes.
	Timeouts []Timeout

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
	// StdioEntry and HTTPEntry, when not nil, make the entry that runs
	// command, or reaches url with headers, in the editor's own shape;
	// nil writes "command" and "args" with StdioType, or "url" and
	// "headers" with HTTPType.
	StdioEntry func(command []string) any
	HTTPEntry  func(url string, headers map[string]string) any
	// Print, when not nil, writes the editor's object of servers holding
	// entry as name, in the editor's own format; nil writes JSON.
	Print func(w io.Writer, name string, entry any) error
	// Rewrite, when not nil, replaces entries of a file by one, in the
	// editor's own format (adopt); nil rewrites the file as JSON.
	Rewrite func(data []byte, g GroupRewrite) ([]byte, error)
}

// Timeout is a key of an editor's entries that holds a timeout, and the
// key of mcpmux's [servers.NAME] it becomes.
type Timeout struct {
	Key  string        // the editor's key: "startup_timeout_sec"
	Unit time.Duration // what its number counts
	As   string        // "start_timeout" or "request_timeout"
}

// Folder is a folder user files are found in.
type Folder int

const (
	Home      Folder = iota // $HOME
	AppData                 // the platform's folder for application settings
	XDGConfig               // $XDG_CONFIG_HOME, else ~/.config, on macOS too
)

// UserFile is one of an editor's files that holds a user's servers, for
// every project.
type UserFile struct {
	In   Folder
	Path string // below In, with '/' between folders
	// Var, when it holds an absolute folder, is the folder of the file
	// instead of In and the first folder of Path ($CODEX_HOME for
	// ~/.codex/config.toml).
	Var string
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
	// Accept, when not nil, says whether an object of servers at Path is
	// this editor's. Such shapes are looked for first; an object one
	// refuses is left to the other shapes at the same path.
	Accept func(entries map[string]json.RawMessage) bool
	// Normalize, when not nil, rewrites one of its entries into the shape
	// most editors share ("command" and "args", "env", "type"); skip, when
	// not "", ends a sentence saying why the entry is not imported.
	Normalize func(e map[string]json.RawMessage) (skip string)
}

// mcpServers is the shape most editors share.
var mcpServers = Shape{Path: []string{"mcpServers"}, Kind: "mcpServers"}

// Clients are the editors mcpmux knows, in the order it lists them.
var Clients = []*Client{
	{
		Name: "Claude Code", For: "claude", Aliases: []string{"claude-code"}, Listed: "claude (Claude Code)",
		Help: "Claude Code: a \"claude mcp add\" command line, or .mcp.json\n" +
			"(with --http, .mcp.json only: no command line carries the token)",
		UserFiles:    []UserFile{{In: Home, Path: ".claude.json"}},
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
		UserFiles: []UserFile{{In: AppData, Path: "Claude/claude_desktop_config.json"}},
		Shapes:    []Shape{mcpServers},
		Key:       "mcpServers",
		NoHTTP:    "Claude Desktop's config file takes commands only; leave out --http (mcpmux connect reaches the same server)",
		Where:     `claude_desktop_config.json (Claude Desktop: Settings > Developer > Edit Config), merged into "mcpServers"`,
	},
	{
		Name: "Cursor", For: "cursor",
		Help:         "Cursor's mcp.json",
		UserFiles:    []UserFile{{In: Home, Path: ".cursor/mcp.json"}},
		ProjectFiles: []ProjectFile{{Path: ".cursor/mcp.json", Is: "a Cursor project's mcp.json"}},
		Shapes:       []Shape{mcpServers},
		Key:          "mcpServers",
		Where:        `~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project), merged into "mcpServers"`,
	},
	{
		Name: "VS Code", For: "vscode",
		Help:      "VS Code's mcp.json",
		UserFiles: []UserFile{{In: AppData, Path: "Code/User/mcp.json"}, {In: AppData, Path: "Code/User/settings.json"}},
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
	{
		Name: "Codex", For: "codex",
		Help: "Codex: a \"codex mcp add\" command line, or ~/.codex/config.toml\n" +
			"(with --http, config.toml only: no command line carries the token)",
		UserFiles:    []UserFile{{In: Home, Path: ".codex/config.toml", Var: "CODEX_HOME"}},
		ProjectFiles: []ProjectFile{{Path: ".codex/config.toml", Is: "a project's .codex/config.toml"}},
		Shapes:       []Shape{{Path: []string{"mcp_servers"}, Kind: "Codex mcp_servers"}},
		Ext:          ".toml",
		Decode:       decodeCodex,
		Expected:     "[mcp_servers.NAME] tables (Codex's config.toml)",
		Timeouts: []Timeout{
			{Key: "startup_timeout_sec", Unit: time.Second, As: "start_timeout"},
			{Key: "startup_timeout_ms", Unit: time.Millisecond, As: "start_timeout"},
			{Key: "tool_timeout_sec", Unit: time.Second, As: "request_timeout"},
		},
		Key: "mcp_servers",
		AddLine: func(name string, command []string) []string {
			return append([]string{"codex", "mcp", "add", name, "--"}, command...)
		},
		AddNote:    "# Codex: run this",
		OrNote:     "\n# or put this in ~/.codex/config.toml:",
		StdioEntry: func(command []string) any { return codexStdio{command} },
		HTTPEntry:  func(url string, headers map[string]string) any { return codexHTTP{url, headers} },
		Print:      printCodex,
		Rewrite:    rewriteCodex,
		Where:      "~/.codex/config.toml (every project) or a trusted project's .codex/config.toml",
	},
	{
		Name: "opencode", For: "opencode",
		Help: "opencode's opencode.json",
		UserFiles: []UserFile{
			{In: XDGConfig, Path: "opencode/opencode.json"},
			{In: XDGConfig, Path: "opencode/opencode.jsonc"},
		},
		ProjectFiles: []ProjectFile{
			{Path: "opencode.json", Is: "a project's opencode.json"},
			{Path: "opencode.jsonc", Is: "a project's opencode.jsonc"},
		},
		Shapes: []Shape{
			{Path: []string{"mcp"}, Kind: "opencode mcp", Accept: opencodeServers, Normalize: opencodeEntry},
			{Path: []string{"mcp", "servers"}, Kind: "opencode mcp.servers", Accept: opencodeServers, Normalize: opencodeEntry},
		},
		// Its "timeout" bounds the wait for a server's tools, which is
		// the wait for it to start.
		Timeouts: []Timeout{{Key: "timeout", Unit: time.Millisecond, As: "start_timeout"}},
		Key:      "mcp",
		StdioEntry: func(command []string) any {
			return opencodeStdio{Type: "local", Command: command, Enabled: true}
		},
		HTTPEntry: func(url string, headers map[string]string) any {
			return opencodeHTTP{Type: "remote", URL: url, Enabled: true, Headers: headers}
		},
		Where: `opencode.json in the project (one project) or ~/.config/opencode/opencode.json (every project), merged into "mcp"`,
	},
	{
		Name: "Gemini CLI", For: "gemini",
		Help:         "Gemini CLI's settings.json",
		UserFiles:    []UserFile{{In: Home, Path: ".gemini/settings.json"}},
		ProjectFiles: []ProjectFile{{Path: ".gemini/settings.json", Is: "a project's .gemini/settings.json"}},
		Shapes:       []Shape{mcpServers},
		Timeouts:     []Timeout{{Key: "timeout", Unit: time.Millisecond, As: "request_timeout"}},
		Key:          "mcpServers",
		HTTPEntry: func(url string, headers map[string]string) any {
			return struct {
				URL     string            `json:"httpUrl"`
				Headers map[string]string `json:"headers"`
			}{url, headers}
		},
		Where: `~/.gemini/settings.json (every project) or .gemini/settings.json (one project), merged into "mcpServers"`,
	},
	{
		Name: "Zed", For: "zed",
		Help:      "Zed's settings.json",
		UserFiles: []UserFile{{In: XDGConfig, Path: "zed/settings.json"}},
		Shapes:    []Shape{{Path: []string{"context_servers"}, Kind: "Zed context_servers", Normalize: zedEntry}},
		Key:       "context_servers",
		Where:     `Zed's settings.json (~/.config/zed/settings.json; command "zed: open settings file"), merged into "context_servers"`,
	},
	{
		Name: "Windsurf", For: "windsurf",
		Help:      "Windsurf's mcp_config.json",
		UserFiles: []UserFile{{In: Home, Path: ".codeium/windsurf/mcp_config.json"}},
		Shapes:    []Shape{mcpServers},
		Key:       "mcpServers",
		HTTPEntry: func(url string, headers map[string]string) any {
			return struct {
				URL     string            `json:"serverUrl"`
				Headers map[string]string `json:"headers"`
			}{url, headers}
		},
		Where: `~/.codeium/windsurf/mcp_config.json (Windsurf: Cascade > MCP servers > View raw config), merged into "mcpServers"`,
	},
	{
		// Junie keeps its servers in mcp.json files; AI Assistant keeps
		// them in the IDE's own settings, which take the same JSON pasted
		// in (Add > As JSON) and are not read here.
		Name: "JetBrains", For: "jetbrains",
		Help:         "JetBrains: Junie's mcp.json, or AI Assistant's MCP settings (Add > As JSON)",
		UserFiles:    []UserFile{{In: Home, Path: ".junie/mcp/mcp.json"}},
		ProjectFiles: []ProjectFile{{Path: ".junie/mcp/mcp.json", Is: "a project's .junie/mcp/mcp.json"}},
		Shapes:       []Shape{mcpServers},
		Key:          "mcpServers",
		NoHTTP:       "Junie's mcp.json takes commands only; leave out --http (mcpmux connect reaches the same server)",
		Where: `~/.junie/mcp/mcp.json (Junie, every project) or .junie/mcp/mcp.json (one project), merged into "mcpServers"; ` +
			`or, for AI Assistant, in Settings > Tools > AI Assistant > Model Context Protocol (MCP) > Add > As JSON`,
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
	Client  *Client
	Path    string
	Project string // what makes it a project's file (ProjectFile.Is); "" for a user's
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
	xdgConfig := filepath.Join(home, ".config")
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		xdgConfig = x
	}
	var files []File
	add := func(c *Client, base, rel string, project string) {
		if filepath.IsAbs(base) {
			files = append(files, File{c, filepath.Join(base, filepath.FromSlash(rel)), project})
		}
	}
	for _, c := range Clients {
		for _, f := range c.UserFiles {
			switch dir := getenv(f.Var); {
			case f.Var != "" && filepath.IsAbs(dir):
				_, rel, _ := strings.Cut(f.Path, "/")
				add(c, dir, rel, "")
			case f.In == Home:
				add(c, home, f.Path, "")
			case !filepath.IsAbs(home) && f.In != XDGConfig:
			case f.In == AppData:
				add(c, appData, f.Path, "")
			default:
				add(c, xdgConfig, f.Path, "")
			}
		}
		for _, f := range c.ProjectFiles {
			if !f.ImportOnly {
				add(c, cwd, f.Path, f.Is)
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
// user's file is the user's.
func projectFile(file string) string {
	home, _ := os.UserHomeDir()
	for _, c := range Clients {
		for _, f := range c.ProjectFiles {
			if !endsWith(file, f.Path) {
				continue
			}
			user := slices.ContainsFunc(c.UserFiles, func(u UserFile) bool {
				if u.In == Home {
					return filepath.Join(home, filepath.FromSlash(u.Path)) == file
				}
				return endsWith(file, u.Path)
			})
			if !user {
				return f.Is
			}
		}
	}
	return ""
}

// fileClient is the editor whose file file is, by its name and folders;
// nil when the name is none of theirs.
func fileClient(file string) *Client {
	for _, c := range Clients {
		for _, u := range c.UserFiles {
			if endsWith(file, u.Path) {
				return c
			}
		}
		for _, p := range c.ProjectFiles {
			if endsWith(file, p.Path) {
				return c
			}
		}
	}
	return nil
}

// endsWith reports whether file is rel, or ends in a folder holding rel
// ('/' between its folders).
func endsWith(file, rel string) bool {
	rel = filepath.FromSlash(rel)
	return file == rel || strings.HasSuffix(file, string(filepath.Separator)+rel)
}
