package testutil_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mcpmux/mcpmux/internal/testutil"
)

// childEnv, when set, makes the test binary a child that shows what Run or
// Watchdog do to a run: "leak" or "hang".
const childEnv = "TESTUTIL_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "leak":
		os.Exit(testutil.Run(m)) // TestChildLeaks passes, and leaves a goroutine behind
	case "hang":
		testutil.Watchdog(100*time.Millisecond, "child run", func() { fmt.Fprintln(os.Stderr, "also: called") })
		select {} // the watchdog must end this
	}
	testutil.Main(m)
}

// stuck is closed never: the goroutine TestChildLeaks starts waits on it.
var stuck = make(chan struct{})

func TestChildLeaks(t *testing.T) {
	if os.Getenv(childEnv) != "leak" {
		t.Skip("runs only as the child of TestRunFailsOnLeakedGoroutines")
	}
	go func() { <-stuck }()
}

// child runs this test binary with mode and returns its exit code and output.
func child(t *testing.T, mode string, args ...string) (int, string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err, "run the child")
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

func TestRunFailsOnLeakedGoroutines(t *testing.T) {
	code, out := child(t, "leak", "-test.run", "^TestChildLeaks$", "-test.v")
	assert.Equal(t, 1, code, "exit code of a passing run that leaked; output:\n%s", out)
	assert.Contains(t, out, "--- PASS: TestChildLeaks", "the test itself passed")
	assert.Contains(t, out, "left goroutines running", "the leak is reported")
	assert.Contains(t, out, "TestChildLeaks.func1", "the leaked goroutine is named")
}

func TestRunPassesWithoutLeak(t *testing.T) {
	code, out := child(t, "leak", "-test.run", "^TestDocNamesPackage$")
	assert.Equal(t, 0, code, "exit code of a run that leaked nothing; output:\n%s", out)
}

func TestWatchdogDumpsAndExits(t *testing.T) {
	start := time.Now()
	code, out := child(t, "hang")
	assert.Equal(t, 2, code, "exit code of a hung run; output:\n%s", out)
	assert.Contains(t, out, "child run: no end after 100ms; goroutines:")
	assert.Contains(t, out, "goroutine ", "the stacks are printed")
	assert.Contains(t, out, "also: called", "the extra dump ran")
	assert.Less(t, time.Since(start), time.Minute, "the watchdog ended the child")
}

func TestWatchdogStopped(t *testing.T) {
	stop := testutil.Watchdog(time.Hour, "never", nil)
	assert.True(t, stop(), "stop before it fired")
	assert.False(t, stop(), "a second stop has nothing to stop")
}

// TestShortDir checks that the folder is short, empty, private to the test,
// and gone after it.
func TestShortDir(t *testing.T) {
	var dir string
	t.Run("use", func(t *testing.T) {
		dir = testutil.ShortDir(t)
		assert.True(t, strings.HasPrefix(dir, os.TempDir()), "%s is under %s", dir, os.TempDir())
		assert.Less(t, len(dir), len(os.TempDir())+20, "%s is short", dir)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries)
		require.NoError(t, os.WriteFile(dir+"/f", []byte("x"), 0o600))
		assert.NotEqual(t, dir, testutil.ShortDir(t), "a new folder each call")
	})
	_, err := os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "removed after the test, contents and all")
}
