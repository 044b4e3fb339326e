package upstream

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A server started as "docker run ..." or "podman run ..." runs in a
// container that the engine's daemon owns: it is not in the server's process
// group, nor under the reaper, so killing the CLI leaves it running. For
// such a command Start adds a --cidfile naming a file in a private folder
// of its own, and the container is killed ("ENGINE kill ID") once the CLI
// has exited, whether it was stopped or crashed, before Done. With a
// reaper the reaper does it, so that it is done when mcpmux dies too; else
// waitLoop. A --cidfile the command already has is used as it is.

// containerKillTimeout bounds one "ENGINE kill": an engine that does not
// answer must not hold up the server's end for long.
const containerKillTimeout = 10 * time.Second

// container is what it takes to kill a server's container: the engine's
// executable, the environment and folder the server ran with, and the
// file where the engine writes the container's id.
type container struct {
	engine  string // the resolved path of docker or podman
	cidfile string
	ownDir  string // the private folder of a cidfile we chose; "" for the command's own
	env     []string
	dir     string
}

// engineValueFlags are the global options of docker and podman that take
// a value as the next argument ("--context NAME"), so that the subcommand
// can be found after them.
var engineValueFlags = []string{
	"-c", "--config", "--context", "-H", "--host", "-l", "--log-level",
	"--tlscacert", "--tlscert", "--tlskey", "--connection", "--url",
	"--identity", "--root", "--runroot", "--runtime", "--storage-driver",
	"--storage-opt", "--tmpdir", "--cgroup-manager", "--events-backend",
	"--hooks-dir", "--module", "--network-cmd-path", "--network-config-dir",
	"--volumepath", "--imagestore", "--conmon", "--runtime-flag", "--ssh", "--db-backend",
}

// runIndex reports where the "run" of "ENGINE [GLOBAL OPTIONS] run" or
// "ENGINE [GLOBAL OPTIONS] container run" is in args, for a command whose
// base name is docker or podman; -1 when the command starts no container.
func runIndex(command string, args []string) int {
	switch filepath.Base(command) {
	case "docker", "podman":
	default:
		return -1
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "run":
			return i
		case a == "container" && i+1 < len(args) && args[i+1] == "run":
			return i + 1
		case slices.Contains(engineValueFlags, a):
			i++ // the option's value
		case strings.HasPrefix(a, "-"):
		default:
			return -1 // another subcommand
		}
	}
	return -1
}

// cidfileArg returns the value of a --cidfile option in run's arguments.
// One after the image would be the server's own argument, but telling
// where the image is takes every run option's arity, and no server is
// known to take a --cidfile: any one counts as the engine's.
func cidfileArg(args []string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--cidfile="); ok {
			return v, true
		}
		if a == "--cidfile" && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// prepareContainer returns cfg's arguments with a --cidfile added after
// "run", and what it takes to kill the container; nil when the command
// starts none.
func prepareContainer(cfg Config, engine string, env []string) ([]string, *container, error) {
	at := runIndex(cfg.Command, cfg.Args)
	if at < 0 {
		return cfg.Args, nil, nil
	}
	c := &container{engine: engine, env: env, dir: cfg.Dir}
	if f, ok := cidfileArg(cfg.Args[at+1:]); ok {
		if !filepath.IsAbs(f) && cfg.Dir != "" {
			f = filepath.Join(cfg.Dir, f)
		}
		c.cidfile = f
		return cfg.Args, c, nil
	}
	dir, err := os.MkdirTemp("", "mcpmux-container-")
	if err != nil {
		return nil, nil, fmt.Errorf("a folder for the container's id file: %w", err)
	}
	c.ownDir, c.cidfile = dir, filepath.Join(dir, "cid")
	args := slices.Concat(cfg.Args[:at+1], []string{"--cidfile=" + c.cidfile}, cfg.Args[at+1:])
	return args, c, nil
}

// id is the container's id, "" when the engine never wrote one (the CLI
// died before it created the container, or could not create it).
func (c *container) id() string {
	b, err := os.ReadFile(c.cidfile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// kill kills the container, if it was created and still runs. It says
// what happened, for the log; gone reports a container that had already
// stopped or been removed.
func (c *container) kill() (id string, gone bool, err error) {
	id = c.id()
	if id == "" {
		return "", true, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), containerKillTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.engine, "kill", id)
	cmd.Env, cmd.Dir = c.env, c.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		low := strings.ToLower(msg)
		if strings.Contains(low, "no such container") || strings.Contains(low, "not running") {
			return id, true, nil
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (no answer within %v)", err, containerKillTimeout)
		}
		return id, false, fmt.Errorf("%s kill %s: %w: %s", filepath.Base(c.engine), id, err, msg)
	}
	return id, false, nil
}

// cleanup removes the id file and folder of our own making; a file the
// command named stays where it is.
func (c *container) cleanup() {
	if c.ownDir != "" {
		os.RemoveAll(c.ownDir)
	}
}

// containerOutcome is how a container kill went, as the reaper reports it.
type containerOutcome int

const (
	containerKilled containerOutcome = iota
	containerNone                    // never created, or already stopped or removed
	containerFailed                  // the engine refused or did not answer
)

func outcomeOf(id string, gone bool, err error) containerOutcome {
	switch {
	case err != nil:
		return containerFailed
	case id == "" || gone:
		return containerNone
	}
	return containerKilled
}

// reaperArgs are the reaper's arguments that hand it the container.
func (c *container) reaperArgs() []string {
	if c == nil {
		return nil
	}
	return []string{"--container", c.engine, c.cidfile, c.ownDir}
}
