//go:build !unix

package main

import "io"

// pollableStdin leaves stdin as it is where there is no poller for it.
func pollableStdin(in io.Reader) (io.Reader, func()) { return in, func() {} }
