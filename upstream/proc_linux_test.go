package upstream

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitExitNoReap must leave the exited leader a zombie, so that its pid (and
// group id) stay taken until Wait reaps it.
func TestWaitExitNoReapLeavesZombie(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = []string{"MCPMUX_TEST_SERVER=exit-3", "GORACE=atexit_sleep_ms=0"}
	require.NoError(t, cmd.Start())

	require.True(t, waitExitNoReap(cmd.Process.Pid))
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	require.NoError(t, err, "the pid is still taken")
	i := bytes.LastIndexByte(stat, ')')
	require.Positive(t, i)
	assert.Equal(t, "Z", string(stat[i+2]), "state in %q", stat)

	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 3, ee.ExitCode())
}
