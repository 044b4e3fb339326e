package editors

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpmux/mcpmux/internal/shell"
)

// stdioEntry is a server entry that runs a command.
type stdioEntry struct {
	Type    string   `json:"type,omitempty"`
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// httpEntry is a server entry reached by URL.
type httpEntry struct {
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// PrintStdio writes the entry that makes the editor run command (mcpmux
// and its arguments) as the server name: the text to paste to out, and
// where it goes to hint.
func (c *Client) PrintStdio(out, hint io.Writer, name string, command []string) error {
	if c.AddLine != nil {
		fmt.Fprintln(out, c.AddNote)
		fmt.Fprintln(out, shell.Join(c.AddLine(name, command)))
		fmt.Fprintln(out, c.OrNote)
	} else {
		fmt.Fprintln(hint, "# put this in "+c.Where)
	}
	var entry any = stdioEntry{Type: c.StdioType, Command: command[0], Args: command[1:]}
	if c.StdioEntry != nil {
		entry = c.StdioEntry(command)
	}
	return c.print(out, name, entry)
}

// TakesHTTP says why the editor cannot reach a server by URL, if it
// cannot.
func (c *Client) TakesHTTP() error {
	if c.NoHTTP != "" {
		return errors.New("--http: " + c.NoHTTP)
	}
	return nil
}

// PrintHTTP writes the entry that makes the editor reach the server name
// at url with token: the text to paste to out, and where it goes to hint.
func (c *Client) PrintHTTP(out, hint io.Writer, name, url, token string) error {
	if err := c.TakesHTTP(); err != nil {
		return err
	}
	fmt.Fprintln(hint, "# this holds the daemon's token: keep the file it goes in private")
	fmt.Fprintln(hint, "# put this in "+cmp.Or(c.HTTPWhere, c.Where))
	headers := map[string]string{"Authorization": "Bearer " + token}
	var entry any = httpEntry{Type: c.HTTPType, URL: url, Headers: headers}
	if c.HTTPEntry != nil {
		entry = c.HTTPEntry(url, headers)
	}
	return c.print(out, name, entry)
}

// print writes the editor's object of servers holding entry as name: in
// its own format, else in JSON, indented, without HTML escaping.
func (c *Client) print(w io.Writer, name string, entry any) error {
	if c.Print != nil {
		return c.Print(w, name, entry)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{c.Key: map[string]any{name: entry}}); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// ServerURL is the address of server name on the web listener at listen
// (host:port). A listener on every address is reached over loopback.
func ServerURL(listen, name string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("[listen] http %q: %w", listen, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/servers/" + name, nil
}

// Token returns the web listener's token: configured ([listen]
// http_token), else the one the daemon keeps in its state folder.
func Token(configured string, getenv func(string) string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	path, err := TokenPath(getenv)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("no token: [listen] http_token is not set and %s does not exist; "+
			"the daemon creates it on its first start with [listen] http set: start it (mcpmux serve), then run this again", path)
	case err != nil:
		return "", fmt.Errorf("read the token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("token file %s does not hold a token (one line of text); delete it and restart the daemon for a new one", path)
	}
	return token, nil
}

// TokenPath is where the daemon keeps a generated token:
// $XDG_STATE_HOME/mcpmux/http.token, else ~/.local/state/mcpmux/http.token.
// A relative XDG_STATE_HOME is ignored, as the XDG spec asks.
func TokenPath(getenv func(string) string) (string, error) {
	if dir := getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "mcpmux", "http.token"), nil
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "state", "mcpmux", "http.token"), nil
	}
	return "", errors.New("no token file: set XDG_STATE_HOME or HOME, or http_token in [listen]")
}
