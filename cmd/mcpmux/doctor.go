package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/internal/doctor"
)

// `mcpmux doctor` looks at everything that commonly goes wrong between a
// config file, a daemon and the editors (package doctor), and says what it
// finds in one plain line each, with what to do. It changes nothing. It
// exits non-zero when a line needs attention (warn or fail).

// doctorEnv is what doctor looks at besides the config: the machine
// (setupEnv), the folder it runs in (for the editors' project files), and
// the folders where a daemon of this user may serve.
type doctorEnv struct {
	setupEnv
	cwd        string
	socketDirs func() []string
}

func hostDoctorEnv() doctorEnv {
	env := doctorEnv{setupEnv: hostSetupEnv()}
	env.cwd, _ = os.Getwd()
	env.socketDirs = func() []string { return doctor.SocketDirs(env.getenv, env.uid) }
	return env
}

func newDoctorCmd() *cobra.Command { return newDoctorCmdWith(hostDoctorEnv()) }

func newDoctorCmdWith(env doctorEnv) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the config, the daemon, its socket folder, its servers and the editors' configs, and say what needs attention",
		Long: `Checks what commonly goes wrong and prints one line for each finding:
the config file loads (or where it does not), which daemon serves it (where,
since when, with which config file), the socket folder's owner and mode,
other daemons of this user serving the same config from another folder, each
server's state and last exit with a hint, and which editors' config files
start "mcpmux connect" for which servers. It changes nothing.

Each line starts with ok, note, warn or fail. The exit status is 1 when a
line says warn or fail.`,
		Args: cobra.NoArgs,
	}
	configPath := configPathFlag(cmd, env.getenv)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		path, _, err := configPath()
		if err != nil {
			return err
		}
		report := doctor.Run(cmd.Context(), doctor.Input{
			Config: path, Getenv: env.getenv, GOOS: env.goos, UID: env.uid,
			Cwd: env.cwd, Dirs: env.socketDirs(), Version: mcpmuxVersion(),
		})
		out := cmd.OutOrStdout()
		fmt.Fprint(out, report)
		if err := report.Err(); err != nil {
			return err
		}
		fmt.Fprintln(out, "all is well")
		return nil
	}
	return cmd
}
