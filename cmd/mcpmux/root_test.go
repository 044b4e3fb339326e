package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestRootForOneCommand: a tree built for one command's args holds that
// command alone, and answers its help, a wrong flag and wrong arguments
// byte for byte as the whole tree does; the table of commands names each
// command as it names itself.
func TestRootForOneCommand(t *testing.T) {
	whole := newRootCmd()
	for _, c := range commands {
		found, _, err := whole.Find([]string{c.name})
		require.NoError(t, err)
		require.Equal(t, c.name, found.Name())
	}
	for _, c := range commands {
		only := newRootFor([]string{c.name})
		require.Len(t, only.Commands(), 1, c.name)
		require.Equal(t, c.name, only.Commands()[0].Name())
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {c.name, "--no-such-flag"}, {c.name, "--version"}} {
			wantOut, wantErr, wantE := runRoot(newRootCmd(), args)
			gotOut, gotErr, gotE := runRoot(newRootFor(args), args)
			require.Equal(t, wantOut, gotOut, "%q", args)
			require.Equal(t, wantErr, gotErr, "%q", args)
			require.Equal(t, errString(wantE), errString(gotE), "%q", args)
		}
	}
	for _, args := range [][]string{nil, {"--help"}, {"help", "connect"}, {"conect"}, {"__complete", "con"}} {
		require.Len(t, newRootFor(args).Commands(), len(newRootCmd().Commands()), "%q", args)
	}
}

// runRoot runs root with args in-process and returns its stdout, its
// stderr and its error.
func runRoot(root *cobra.Command, args []string) (string, string, error) {
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
