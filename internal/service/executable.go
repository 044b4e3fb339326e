package service

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Executable returns the absolute path of the running mcpmux. When
// the mcpmux found in PATH is the same file, that path wins: it is the one
// that survives upgrades (/opt/homebrew/bin/mcpmux rather than the
// versioned file it links to).
func Executable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the mcpmux executable: %w", err)
	}
	if p, err := exec.LookPath("mcpmux"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			a, errA := os.Stat(abs)
			b, errB := os.Stat(exe)
			if errA == nil && errB == nil && os.SameFile(a, b) {
				return abs, nil
			}
		}
	}
	return exe, nil
}

// Stable refuses an executable that will not be there tomorrow:
// one built by go run, in a temporary folder deleted when it exits.
func Stable(exe string) error {
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return fmt.Errorf("%s is a temporary build (go run): install mcpmux (go install ./cmd/mcpmux) and run that one", exe)
	}
	return nil
}
