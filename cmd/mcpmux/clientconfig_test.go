package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeSetupEnv is a setupEnv over a map of variables, with mcpmux at exe
// and a run that fails the test: tests never run systemctl or launchctl.
func fakeSetupEnv(t *testing.T, vars map[string]string, exe string) setupEnv {
	return setupEnv{
		getenv:     func(k string) string { return vars[k] },
		executable: func() (string, error) { return exe, nil },
		goos:       "linux",
		uid:        501,
		run: func(_ context.Context, name string, args ...string) ([]byte, error) {
			t.Errorf("ran %s %v", name, args)
			return nil, errors.New("not in tests")
		},
	}
}

const clientConfigToml = `[listen]
http = "127.0.0.1:7878"

[servers.memory]
command = "npx"

[servers.time]
command = "uvx"
`

// TestClientConfig checks the snippet for each editor, with mcpmux connect
// and with --http.
func TestClientConfig(t *testing.T) {
	home := t.TempDir()
	defaultCfg := filepath.Join(home, ".config", "mcpmux", "mux.toml")
	otherCfg := filepath.Join(home, "elsewhere", "my mux.toml")
	noHTTPCfg := filepath.Join(home, "nohttp.toml")
	withTokenCfg := filepath.Join(home, "token.toml")
	for path, content := range map[string]string{
		defaultCfg:   clientConfigToml,
		otherCfg:     clientConfigToml,
		noHTTPCfg:    "[servers.memory]\ncommand = \"npx\"\n",
		withTokenCfg: "[listen]\nhttp = \"0.0.0.0:9000\"\nhttp_token = \"from-config\"\n\n[servers.memory]\ncommand = \"npx\"\n",
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	}
	state := filepath.Join(home, "state")
	require.NoError(t, os.MkdirAll(filepath.Join(state, "mcpmux"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(state, "mcpmux", "http.token"), []byte("tok-from-file\n"), 0o600))

	const exe = "/opt/mcp mux/bin/mcpmux"
	homeOnly := map[string]string{"HOME": home}
	withState := map[string]string{"HOME": home, "XDG_STATE_HOME": state}
	quotedOther := `'` + otherCfg + `'`

	tests := []struct {
		name     string
		vars     map[string]string
		args     []string
		want     string
		wantHint string
	}{
		{
			name: "claude", vars: homeOnly, args: []string{"memory", "--for", "claude"},
			want: `# Claude Code: run this (add --scope user to have it in every project)
claude mcp add memory -- '/opt/mcp mux/bin/mcpmux' connect memory

# or put this in the project's .mcp.json:
{
  "mcpServers": {
    "memory": {
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "memory"
      ]
    }
  }
}
`,
		},
		{
			name: "claude-desktop", vars: homeOnly, args: []string{"time", "--for", "claude-desktop"},
			want: `{
  "mcpServers": {
    "time": {
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "time"
      ]
    }
  }
}
`,
			wantHint: "# put this in claude_desktop_config.json (Claude Desktop: Settings > Developer > Edit Config), merged into \"mcpServers\"\n",
		},
		{
			name: "cursor", vars: homeOnly, args: []string{"memory", "--for", "cursor"},
			want: `{
  "mcpServers": {
    "memory": {
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "memory"
      ]
    }
  }
}
`,
			wantHint: "# put this in ~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project), merged into \"mcpServers\"\n",
		},
		{
			name: "no name: the one entry of the endpoint all", vars: homeOnly, args: []string{"--for", "cursor"},
			want: `{
  "mcpServers": {
    "mcpmux": {
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect"
      ]
    }
  }
}
`,
			wantHint: "# put this in ~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project), merged into \"mcpServers\"\n",
		},
		{
			name: "an endpoint by name", vars: homeOnly, args: []string{"all", "--for", "cursor"},
			want: `{
  "mcpServers": {
    "all": {
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "all"
      ]
    }
  }
}
`,
			wantHint: "# put this in ~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project), merged into \"mcpServers\"\n",
		},
		{
			name: "vscode", vars: homeOnly, args: []string{"memory", "--for", "vscode"},
			want: `{
  "servers": {
    "memory": {
      "type": "stdio",
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "memory"
      ]
    }
  }
}
`,
			wantHint: "# put this in .vscode/mcp.json (one workspace) or the user mcp.json (command \"MCP: Open User Configuration\"), merged into \"servers\"\n",
		},
		{
			name: "codex", vars: homeOnly, args: []string{"memory", "--for", "codex"},
			want: `# Codex: run this
codex mcp add memory -- '/opt/mcp mux/bin/mcpmux' connect memory

# or put this in ~/.codex/config.toml:
[mcp_servers.memory]
command = "/opt/mcp mux/bin/mcpmux"
args = ["connect", "memory"]
`,
		},
		{
			name: "opencode", vars: homeOnly, args: []string{"memory", "--for", "opencode"},
			want: `{
  "mcp": {
    "memory": {
      "type": "local",
      "command": [
        "/opt/mcp mux/bin/mcpmux",
        "connect",
        "memory"
      ],
      "enabled": true
    }
  }
}
`,
			wantHint: "# put this in opencode.json in the project (one project) or ~/.config/opencode/opencode.json (every project), merged into \"mcp\"\n",
		},
		{
			name: "zed", vars: homeOnly, args: []string{"memory", "--for", "zed"},
			want: `{
  "context_servers": {
    "memory": {
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "memory"
      ]
    }
  }
}
`,
			wantHint: "# put this in Zed's settings.json (~/.config/zed/settings.json; command \"zed: open settings file\"), merged into \"context_servers\"\n",
		},
		{
			name: "codex with another config", vars: homeOnly, args: []string{"time", "--for", "codex", "--config", otherCfg},
			want: `# Codex: run this
codex mcp add time -- '/opt/mcp mux/bin/mcpmux' connect --config ` + quotedOther + ` time

# or put this in ~/.codex/config.toml:
[mcp_servers.time]
command = "/opt/mcp mux/bin/mcpmux"
args = ["connect", "--config", "` + otherCfg + `", "time"]
`,
		},
		{
			name: "gemini", vars: homeOnly, args: []string{"memory", "--for", "gemini"},
			want: `{
  "mcpServers": {
    "memory": {
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "memory"
      ]
    }
  }
}
`,
			wantHint: "# put this in ~/.gemini/settings.json (every project) or .gemini/settings.json (one project), merged into \"mcpServers\"\n",
		},
		{
			name: "windsurf", vars: homeOnly, args: []string{"memory", "--for", "windsurf"},
			want: `{
  "mcpServers": {
    "memory": {
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "memory"
      ]
    }
  }
}
`,
			wantHint: "# put this in ~/.codeium/windsurf/mcp_config.json (Windsurf: Cascade > MCP servers > View raw config), merged into \"mcpServers\"\n",
		},
		{
			name: "jetbrains", vars: homeOnly, args: []string{"memory", "--for", "jetbrains"},
			want: `{
  "mcpServers": {
    "memory": {
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "memory"
      ]
    }
  }
}
`,
			wantHint: "# put this in ~/.junie/mcp/mcp.json (Junie, every project) or .junie/mcp/mcp.json (one project), merged into \"mcpServers\"; " +
				"or, for AI Assistant, in Settings > Tools > AI Assistant > Model Context Protocol (MCP) > Add > As JSON\n",
		},
		{
			name: "default config named with --config", vars: homeOnly, args: []string{"memory", "--for", "cursor", "--config", defaultCfg},
			want: `{
  "mcpServers": {
    "memory": {
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "memory"
      ]
    }
  }
}
`,
			wantHint: "# put this in ~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project), merged into \"mcpServers\"\n",
		},
		{
			name: "claude with another config", vars: homeOnly, args: []string{"memory", "--for", "claude", "--config", otherCfg},
			want: `# Claude Code: run this (add --scope user to have it in every project)
claude mcp add memory -- '/opt/mcp mux/bin/mcpmux' connect --config ` + quotedOther + ` memory

# or put this in the project's .mcp.json:
{
  "mcpServers": {
    "memory": {
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "--config",
        "` + otherCfg + `",
        "memory"
      ]
    }
  }
}
`,
		},
		{
			name: "config from MCPMUX_CONFIG", vars: map[string]string{"HOME": home, "MCPMUX_CONFIG": otherCfg}, args: []string{"memory", "--for", "vscode"},
			want: `{
  "servers": {
    "memory": {
      "type": "stdio",
      "command": "/opt/mcp mux/bin/mcpmux",
      "args": [
        "connect",
        "--config",
        "` + otherCfg + `",
        "memory"
      ]
    }
  }
}
`,
			wantHint: "# put this in .vscode/mcp.json (one workspace) or the user mcp.json (command \"MCP: Open User Configuration\"), merged into \"servers\"\n",
		},
		{
			name: "claude --http", vars: withState, args: []string{"memory", "--for", "claude-code", "--http"},
			want: `{
  "mcpServers": {
    "memory": {
      "type": "http",
      "url": "http://127.0.0.1:7878/servers/memory",
      "headers": {
        "Authorization": "Bearer tok-from-file"
      }
    }
  }
}
`,
			wantHint: "# this holds the daemon's token: keep the file it goes in private\n" +
				"# put this in the project's .mcp.json, merged into \"mcpServers\" (a command line would show the token to every user)\n",
		},
		{
			name: "cursor --http", vars: withState, args: []string{"time", "--for", "cursor", "--http"},
			want: `{
  "mcpServers": {
    "time": {
      "url": "http://127.0.0.1:7878/servers/time",
      "headers": {
        "Authorization": "Bearer tok-from-file"
      }
    }
  }
}
`,
			wantHint: "# this holds the daemon's token: keep the file it goes in private\n" +
				"# put this in ~/.cursor/mcp.json (every project) or .cursor/mcp.json (one project), merged into \"mcpServers\"\n",
		},
		{
			name: "codex --http", vars: withState, args: []string{"memory", "--for", "codex", "--http"},
			want: `[mcp_servers.memory]
url = "http://127.0.0.1:7878/servers/memory"
http_headers = { Authorization = "Bearer tok-from-file" }
`,
			wantHint: "# this holds the daemon's token: keep the file it goes in private\n" +
				"# put this in ~/.codex/config.toml (every project) or a trusted project's .codex/config.toml\n",
		},
		{
			name: "opencode --http", vars: withState, args: []string{"memory", "--for", "opencode", "--http"},
			want: `{
  "mcp": {
    "memory": {
      "type": "remote",
      "url": "http://127.0.0.1:7878/servers/memory",
      "enabled": true,
      "headers": {
        "Authorization": "Bearer tok-from-file"
      }
    }
  }
}
`,
			wantHint: "# this holds the daemon's token: keep the file it goes in private\n" +
				"# put this in opencode.json in the project (one project) or ~/.config/opencode/opencode.json (every project), merged into \"mcp\"\n",
		},
		{
			name: "zed --http", vars: withState, args: []string{"memory", "--for", "zed", "--http"},
			want: `{
  "context_servers": {
    "memory": {
      "url": "http://127.0.0.1:7878/servers/memory",
      "headers": {
        "Authorization": "Bearer tok-from-file"
      }
    }
  }
}
`,
			wantHint: "# this holds the daemon's token: keep the file it goes in private\n" +
				"# put this in Zed's settings.json (~/.config/zed/settings.json; command \"zed: open settings file\"), merged into \"context_servers\"\n",
		},
		{
			name: "gemini --http", vars: withState, args: []string{"memory", "--for", "gemini", "--http"},
			want: `{
  "mcpServers": {
    "memory": {
      "httpUrl": "http://127.0.0.1:7878/servers/memory",
      "headers": {
        "Authorization": "Bearer tok-from-file"
      }
    }
  }
}
`,
			wantHint: "# this holds the daemon's token: keep the file it goes in private\n" +
				"# put this in ~/.gemini/settings.json (every project) or .gemini/settings.json (one project), merged into \"mcpServers\"\n",
		},
		{
			name: "windsurf --http", vars: withState, args: []string{"memory", "--for", "windsurf", "--http"},
			want: `{
  "mcpServers": {
    "memory": {
      "serverUrl": "http://127.0.0.1:7878/servers/memory",
      "headers": {
        "Authorization": "Bearer tok-from-file"
      }
    }
  }
}
`,
			wantHint: "# this holds the daemon's token: keep the file it goes in private\n" +
				"# put this in ~/.codeium/windsurf/mcp_config.json (Windsurf: Cascade > MCP servers > View raw config), merged into \"mcpServers\"\n",
		},
		{
			name: "vscode --http with http_token, listening on every address", vars: homeOnly, args: []string{"memory", "--for", "vscode", "--http", "--config", withTokenCfg},
			want: `{
  "servers": {
    "memory": {
      "type": "http",
      "url": "http://127.0.0.1:9000/servers/memory",
      "headers": {
        "Authorization": "Bearer from-config"
      }
    }
  }
}
`,
			wantHint: "# this holds the daemon's token: keep the file it goes in private\n" +
				"# put this in .vscode/mcp.json (one workspace) or the user mcp.json (command \"MCP: Open User Configuration\"), merged into \"servers\"\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, hint bytes.Buffer
			cmd := newClientConfigCmdWith(fakeSetupEnv(t, tt.vars, exe))
			cmd.SetArgs(tt.args)
			cmd.SetOut(&out)
			cmd.SetErr(&hint)
			require.NoError(t, cmd.Execute(), "client-config %v", tt.args)
			assert.Equal(t, tt.want, out.String(), "client-config %v: stdout", tt.args)
			assert.Equal(t, tt.wantHint, hint.String(), "client-config %v: stderr", tt.args)
			for _, line := range strings.Split(out.String(), "\n") {
				if strings.Contains(line, "tok-from-file") || strings.Contains(line, "from-config") {
					assert.True(t, strings.HasPrefix(strings.TrimSpace(line), `"`) || strings.HasPrefix(line, "http_headers = "),
						"the token only ever in a config file, never on a command line: %q", line)
				}
			}
		})
	}

	errTests := []struct {
		name    string
		vars    map[string]string
		exe     string
		args    []string
		wantErr string
	}{
		{"unknown server", homeOnly, exe, []string{"github", "--for", "cursor"},
			`no server named "github" in ` + defaultCfg + `; configured: memory, time`},
		{"unknown editor", homeOnly, exe, []string{"memory", "--for", "emacs"},
			`--for "emacs": want claude (Claude Code), claude-desktop, cursor, vscode, codex, opencode, gemini, zed, windsurf or jetbrains`},
		{"no --for", homeOnly, exe, []string{"memory"},
			`missing --for: claude (Claude Code), claude-desktop, cursor, vscode, codex, opencode, gemini, zed, windsurf or jetbrains`},
		{"two names", homeOnly, exe, []string{"memory", "time", "--for", "cursor"}, "accepts at most 1 arg(s), received 2"},
		{"missing config", homeOnly, exe, []string{"memory", "--for", "cursor", "--config", filepath.Join(home, "none.toml")},
			"config " + filepath.Join(home, "none.toml") + " does not exist: write one (the README's quick start has one), or pass --config FILE"},
		{"a go run build", homeOnly, "/tmp/go-build123/b001/exe/mcpmux", []string{"memory", "--for", "cursor"},
			"/tmp/go-build123/b001/exe/mcpmux is a temporary build (go run): install mcpmux"},
		{"--http without a web listener", withState, exe, []string{"memory", "--for", "cursor", "--http", "--config", noHTTPCfg},
			`--http: the daemon has no web listener: set http = "127.0.0.1:7878" in [listen] of ` + noHTTPCfg},
		{"--http without a token", map[string]string{"HOME": home}, exe, []string{"memory", "--for", "vscode", "--http"},
			"no token: [listen] http_token is not set and " + filepath.Join(home, ".local", "state", "mcpmux", "http.token") +
				" does not exist; the daemon creates it on its first start"},
		{"--http for Claude Desktop", withState, exe, []string{"memory", "--for", "claude-desktop", "--http"},
			"--http: Claude Desktop's config file takes commands only"},
		{"--http for JetBrains", withState, exe, []string{"memory", "--for", "jetbrains", "--http"},
			"--http: Junie's mcp.json takes commands only"},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			var out, hint bytes.Buffer
			cmd := newClientConfigCmdWith(fakeSetupEnv(t, tt.vars, tt.exe))
			cmd.SetArgs(tt.args)
			cmd.SetOut(&out)
			cmd.SetErr(&hint)
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			err := cmd.Execute()
			require.Error(t, err, "client-config %v", tt.args)
			assert.True(t, strings.HasPrefix(err.Error(), tt.wantErr), "client-config %v\nerror: %s\nwant:  %s...", tt.args, err, tt.wantErr)
			assert.Empty(t, out.String(), "client-config %v: stdout", tt.args)
		})
	}
}
