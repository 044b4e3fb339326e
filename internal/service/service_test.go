package service

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// serviceFixture is a home folder with a config, and an Env over it whose
// Run records commands instead of running them.
type serviceFixture struct {
	home, cfg string
	exe       string // the mcpmux the service runs
	env       Env
	ran       []string // "systemctl --user daemon-reload", ...
	fail      map[string]bool
}

func TestMain(m *testing.M) { testutil.Main(m) }

func newServiceFixture(t *testing.T, goos string, vars map[string]string) *serviceFixture {
	f := &serviceFixture{home: t.TempDir(), exe: "/opt/mcpmux/bin/mcpmux", fail: map[string]bool{}}
	f.cfg = filepath.Join(f.home, "conf", "mux.toml")
	require.NoError(t, os.MkdirAll(filepath.Dir(f.cfg), 0o700))
	require.NoError(t, os.WriteFile(f.cfg, []byte("[servers.memory]\ncommand = \"npx\"\n"), 0o600))
	all := map[string]string{"HOME": f.home, "PATH": "/home/me/.nvm/bin:/usr/bin"}
	for k, v := range vars {
		all[k] = strings.ReplaceAll(v, "$HOME", f.home)
	}
	f.env = Env{
		Getenv: func(k string) string { return all[k] },
		GOOS:   goos,
		UID:    501,
		Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
			line := strings.Join(append([]string{name}, args...), " ")
			f.ran = append(f.ran, line)
			if f.fail[line] {
				return []byte("Failed: " + line + "\n"), errors.New("exit status 5")
			}
			return nil, nil
		},
	}
	return f
}

// install runs Install for f's mcpmux and config, and returns what it
// printed.
func (f *serviceFixture) install(force, now bool) (string, error) {
	plan, err := NewPlan(f.env)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	err = plan.Install(context.Background(), &out, f.exe, f.cfg, force, now)
	return out.String(), err
}

// uninstall runs Uninstall, and returns what it printed.
func (f *serviceFixture) uninstall(now bool) (string, error) {
	plan, err := NewPlan(f.env)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	err = plan.Uninstall(context.Background(), &out, now)
	return out.String(), err
}

const wantUnit = `# Written by "mcpmux service install"; "mcpmux service uninstall" removes it.
[Unit]
Description=mcpmux: one shared process per MCP server
Documentation=https://github.com/mcpmux/mcpmux

[Service]
ExecStart=/opt/mcpmux/bin/mcpmux serve --config $CFG
Environment=PATH=/home/me/.nvm/bin:/usr/bin
KillMode=mixed
Restart=on-failure
RestartSec=2s

[Install]
WantedBy=default.target
`

// TestServiceSystemd installs, reinstalls and uninstalls the systemd unit.
func TestServiceSystemd(t *testing.T) {
	for _, tt := range []struct {
		name string
		vars map[string]string
		dir  string // where the unit goes, under $HOME
	}{
		{"HOME", nil, ".config/systemd/user"},
		{"XDG_CONFIG_HOME", map[string]string{"XDG_CONFIG_HOME": "$HOME/xdg"}, "xdg/systemd/user"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newServiceFixture(t, "linux", tt.vars)
			unit := filepath.Join(f.home, tt.dir, "mcpmux.service")
			unitText := strings.ReplaceAll(wantUnit, "$CFG", f.cfg)

			out, err := f.install(false, false)
			require.NoError(t, err)
			assert.Equal(t, "Wrote "+unit+": it runs /opt/mcpmux/bin/mcpmux serve --config "+f.cfg+"\n"+
				"Its servers' commands are looked up in this shell's PATH: /home/me/.nvm/bin:/usr/bin\n"+
				"(after changing it, run mcpmux service install --force again).\n"+
				"To start it now and at every login, run:\n"+
				"  systemctl --user daemon-reload && systemctl --user enable --now mcpmux\n"+
				"Its log: journalctl --user -u mcpmux -f\n", out)
			got, err := os.ReadFile(unit)
			require.NoError(t, err)
			assert.Equal(t, unitText, string(got))

			out, err = f.install(false, false)
			require.NoError(t, err, "installing again, unchanged")
			assert.Equal(t, unit+" is installed already, unchanged.\n"+
				"To start it now and at every login, run:\n"+
				"  systemctl --user daemon-reload && systemctl --user enable --now mcpmux\n"+
				"Its log: journalctl --user -u mcpmux -f\n", out)

			// The unit is enabled: systemctl made this link.
			link := filepath.Join(filepath.Dir(unit), "default.target.wants", "mcpmux.service")
			require.NoError(t, os.MkdirAll(filepath.Dir(link), 0o755))
			require.NoError(t, os.Symlink(unit, link))

			out, err = f.uninstall(false)
			require.NoError(t, err)
			assert.Equal(t, "Removed "+link+": the service no longer starts at login.\n"+
				"Removed "+unit+".\n"+
				"To stop the running daemon and disable the service, run:\n"+
				"  systemctl --user stop mcpmux; systemctl --user daemon-reload\n", out)
			assert.NoFileExists(t, unit)
			_, err = os.Lstat(link)
			assert.ErrorIs(t, err, os.ErrNotExist, "the enablement link")

			out, err = f.uninstall(false)
			require.NoError(t, err, "uninstalling again")
			assert.Equal(t, "Not installed: there is no "+unit+".\n", out)
			assert.Empty(t, f.ran, "commands run without --now")
		})
	}
}

// TestServiceRefusesToOverwrite checks that a different unit stays unless
// --force is given.
func TestServiceRefusesToOverwrite(t *testing.T) {
	f := newServiceFixture(t, "linux", nil)
	unit := filepath.Join(f.home, ".config", "systemd", "user", "mcpmux.service")
	require.NoError(t, os.MkdirAll(filepath.Dir(unit), 0o755))
	const theirs = "[Service]\nExecStart=/usr/bin/something-else\n"
	require.NoError(t, os.WriteFile(unit, []byte(theirs), 0o644))

	_, err := f.install(false, false)
	require.Error(t, err)
	assert.Equal(t, unit+" exists and differs from the service this would write; --force replaces it", err.Error())
	got, err := os.ReadFile(unit)
	require.NoError(t, err)
	assert.Equal(t, theirs, string(got), "the unit after a refused install")

	out, err := f.install(true, false)
	require.NoError(t, err)
	assert.Equal(t, "Wrote "+unit+": it runs /opt/mcpmux/bin/mcpmux serve --config "+f.cfg+"\n"+
		"Its servers' commands are looked up in this shell's PATH: /home/me/.nvm/bin:/usr/bin\n"+
		"(after changing it, run mcpmux service install --force again).\n"+
		"To start it now and at every login, run:\n"+
		"  systemctl --user daemon-reload && systemctl --user enable mcpmux && systemctl --user restart mcpmux\n"+
		"Its log: journalctl --user -u mcpmux -f\n", out)
	got, err = os.ReadFile(unit)
	require.NoError(t, err)
	assert.Equal(t, strings.ReplaceAll(wantUnit, "$CFG", f.cfg), string(got), "the unit after --force")
	entries, err := os.ReadDir(filepath.Dir(unit))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "temporary files left in %s: %v", filepath.Dir(unit), entries)
}

// TestServiceNow checks the commands --now runs, with a fake runner.
func TestServiceNow(t *testing.T) {
	f := newServiceFixture(t, "linux", nil)
	out, err := f.install(false, true)
	require.NoError(t, err)
	assert.Equal(t, []string{"systemctl --user daemon-reload", "systemctl --user enable --now mcpmux"}, f.ran)
	assert.True(t, strings.HasSuffix(out, "$ systemctl --user daemon-reload\n$ systemctl --user enable --now mcpmux\n"+
		"The service is running, and starts at every login. Its log: journalctl --user -u mcpmux -f\n"), "output:\n%s", out)

	// A failing systemctl fails the install, with its output shown.
	f.ran = nil
	f.fail["systemctl --user daemon-reload"] = true
	out, err = f.install(false, true)
	require.Error(t, err)
	assert.Equal(t, "systemctl --user daemon-reload: exit status 5", err.Error())
	assert.Contains(t, out, "$ systemctl --user daemon-reload\n  Failed: systemctl --user daemon-reload\n")
	assert.Equal(t, []string{"systemctl --user daemon-reload"}, f.ran)

	// Stopping a service that is not loaded fails; uninstall goes on.
	f.ran = nil
	f.fail["systemctl --user stop mcpmux"] = true
	f.fail["systemctl --user daemon-reload"] = false
	_, err = f.uninstall(true)
	require.NoError(t, err)
	assert.Equal(t, []string{"systemctl --user stop mcpmux", "systemctl --user daemon-reload"}, f.ran)
}

// TestServiceLaunchd installs and uninstalls the launchd agent.
func TestServiceLaunchd(t *testing.T) {
	f := newServiceFixture(t, "darwin", nil)
	plist := filepath.Join(f.home, "Library", "LaunchAgents", "dev.mcpmux.plist")
	logFile := filepath.Join(f.home, "Library", "Logs", "mcpmux.log")

	out, err := f.install(false, false)
	require.NoError(t, err)
	assert.Equal(t, "Wrote "+plist+": it runs /opt/mcpmux/bin/mcpmux serve --config "+f.cfg+"\n"+
		"Its servers' commands are looked up in this shell's PATH: /home/me/.nvm/bin:/usr/bin\n"+
		"(after changing it, run mcpmux service install --force again).\n"+
		"To start it now and at every login, run:\n"+
		"  launchctl bootstrap gui/501 "+plist+"; launchctl kickstart gui/501/dev.mcpmux\n"+
		"Its log: tail -f "+logFile+"\n", out)
	got, err := os.ReadFile(plist)
	require.NoError(t, err)
	assert.Equal(t, `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by "mcpmux service install"; "mcpmux service uninstall" removes it. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>dev.mcpmux</string>
	<key>ProgramArguments</key>
	<array>
		<string>/opt/mcpmux/bin/mcpmux</string>
		<string>serve</string>
		<string>--config</string>
		<string>`+f.cfg+`</string>
	</array>
	<key>EnvironmentVariables</key>
	<dict>
		<key>PATH</key>
		<string>/home/me/.nvm/bin:/usr/bin</string>
	</dict>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>StandardOutPath</key>
	<string>`+logFile+`</string>
	<key>StandardErrorPath</key>
	<string>`+logFile+`</string>
</dict>
</plist>
`, string(got))
	assert.DirExists(t, filepath.Dir(logFile))

	// Loaded already: bootstrap fails, kickstart finds it running.
	f.fail["launchctl bootstrap gui/501 "+plist] = true
	_, err = f.install(false, true)
	require.NoError(t, err, "installing again, unchanged")
	assert.Equal(t, []string{"launchctl bootstrap gui/501 " + plist, "launchctl kickstart gui/501/dev.mcpmux"}, f.ran)

	// A changed plist: the loaded agent is replaced.
	f.ran = nil
	f.exe = "/usr/local/bin/mcpmux"
	_, err = f.install(true, true)
	require.NoError(t, err, "installing a changed plist")
	assert.Equal(t, []string{"launchctl bootout gui/501/dev.mcpmux", "launchctl bootstrap gui/501 " + plist, "launchctl kickstart gui/501/dev.mcpmux"}, f.ran)

	f.ran = nil
	out, err = f.uninstall(true)
	require.NoError(t, err)
	assert.Equal(t, "Removed "+plist+".\n$ launchctl bootout gui/501/dev.mcpmux\n", out)
	assert.Equal(t, []string{"launchctl bootout gui/501/dev.mcpmux"}, f.ran)
	assert.NoFileExists(t, plist)
}

// TestServicePlistQuoting checks that odd paths stay well-formed XML.
func TestServicePlistQuoting(t *testing.T) {
	f := newServiceFixture(t, "darwin", map[string]string{"PATH": "/a&b:/<c>", "XDG_STATE_HOME": "/s&t"})
	content, err := Content(f.env, `/Apps/R&D "x"/mcpmux`, "/cfg/<mux>.toml")
	require.NoError(t, err)
	var plist struct {
		Dict struct {
			Strings []string `xml:"string"`
			Array   []string `xml:"array>string"`
			Env     []string `xml:"dict>string"`
		} `xml:"dict"`
	}
	require.NoError(t, xml.Unmarshal(content, &plist), "plist:\n%s", content)
	assert.Equal(t, []string{`/Apps/R&D "x"/mcpmux`, "serve", "--config", "/cfg/<mux>.toml"}, plist.Dict.Array)
	assert.Equal(t, []string{"/a&b:/<c>", "/s&t"}, plist.Dict.Env)
}

// TestEscapeXML: the plist's escaping writes what encoding/xml's EscapeText
// writes, for the markup characters, the whitespace XML keeps only as a
// reference, characters XML does not allow and bytes that are no UTF-8.
func TestEscapeXML(t *testing.T) {
	for _, s := range []string{"", "plain /usr/bin", `R&D "x" 'y' <z>`, "a\tb\nc\rd", "\x00\x01\x1f\x7f", "caf\u00e9 \u65e5\u672c \U0001F600",
		"\uFFFD", "\xff\xfe", "a\xc3", "\xed\xa0\x80", "\uFFFE\uFFFF", "\uE000\uD7FF", "x\u0085\u2028y"} {
		var want bytes.Buffer
		require.NoError(t, xml.EscapeText(&want, []byte(s)))
		assert.Equal(t, want.String(), escapeXML(s), "%q", s)
	}
}

// TestServiceStateFolder: the unit carries the shell's XDG_STATE_HOME, so
// that the service's daemon records itself where connect and status look.
func TestServiceStateFolder(t *testing.T) {
	f := newServiceFixture(t, "linux", map[string]string{"XDG_STATE_HOME": "/home/me/my state"})
	content, err := Content(f.env, "/usr/bin/mcpmux", "/cfg/mux.toml")
	require.NoError(t, err)
	assert.Contains(t, string(content), "Environment=PATH=/home/me/.nvm/bin:/usr/bin\nEnvironment=\"XDG_STATE_HOME=/home/me/my state\"\n")
}

// TestServiceSystemdQuoting checks ExecStart= and Environment= words.
func TestServiceSystemdQuoting(t *testing.T) {
	tests := []struct{ in, exec, env string }{
		{"/usr/bin/mcpmux", "/usr/bin/mcpmux", "/usr/bin/mcpmux"},
		{"/opt/my apps/mcpmux", `"/opt/my apps/mcpmux"`, `"/opt/my apps/mcpmux"`},
		{"/home/100%/mux.toml", "/home/100%%/mux.toml", "/home/100%%/mux.toml"},
		{"/cost$HOME/x", "/cost$$HOME/x", "/cost$HOME/x"},
		{`/a"b\c`, `"/a\"b\\c"`, `"/a\"b\\c"`},
		{"/semi;colon", `"/semi;colon"`, `"/semi;colon"`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.exec, systemdExecQuote(tt.in), "systemdExecQuote(%q)", tt.in)
		assert.Equal(t, tt.env, systemdQuote(tt.in), "systemdQuote(%q)", tt.in)
	}
}

// TestServiceErrors checks what install refuses.
func TestServiceErrors(t *testing.T) {
	t.Run("another system", func(t *testing.T) {
		f := newServiceFixture(t, "windows", nil)
		_, err := f.install(false, false)
		require.Error(t, err)
		assert.Equal(t, "mcpmux service knows Linux (systemd) and macOS (launchd), not windows", err.Error())
	})
	t.Run("no HOME", func(t *testing.T) {
		f := newServiceFixture(t, "linux", map[string]string{"HOME": ""})
		_, err := f.uninstall(false)
		require.Error(t, err)
		assert.Equal(t, "neither XDG_CONFIG_HOME nor HOME is set to an absolute path: cannot find the systemd user folder", err.Error())
	})
}

// TestServiceUnitVerifies runs systemd-analyze verify over the unit, where
// the tool exists, with ExecStart pointing at a real executable.
func TestServiceUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	f := newServiceFixture(t, "linux", nil)
	exe, err := exec.LookPath("true") // any real executable: verify checks ExecStart exists
	require.NoError(t, err)
	f.exe = exe
	_, err = f.install(false, false)
	require.NoError(t, err)
	unit := filepath.Join(f.home, ".config", "systemd", "user", "mcpmux.service")
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	assert.NoError(t, err, "systemd-analyze verify %s:\n%s", unit, out)
}
