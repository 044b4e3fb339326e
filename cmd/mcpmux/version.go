package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/mcpmux/mcpmux/internal/buildinfo"
)

// version and commit are stamped at link time by scripts/release:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=<sha>" ./cmd/mcpmux
//
// Without them the version comes from the build info: the module version
// that `go install ...@v1.2.3` records (or that go build derives from the
// checkout's tags), else the VCS revision that go build records in a
// checkout (unless built with -buildvcs=false).
var (
	version = ""
	commit  = ""
)

// readVersion reads this binary's version.
func readVersion() buildinfo.Build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return buildinfo.From(version, commit, bi)
}

// mcpmuxVersion is the short version: status reports it, and the servers
// are told it in clientInfo.
func mcpmuxVersion() string { return readVersion().Version }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version (as --version does)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "mcpmux", readVersion())
			return err
		},
	}
}

// setVersionFlag gives root a --version flag that prints what `mcpmux
// version` prints.
func setVersionFlag(root *cobra.Command) {
	root.Version = readVersion().String()
	root.SetVersionTemplate("mcpmux {{.Version}}\n")
}
