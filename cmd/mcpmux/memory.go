package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mcpmux/mcpmux/mux"
)

// serverMemory is what mcpmux remembers of a server started a given way
// (command, arguments, folder), across runs of the daemon: a folder of the
// state folder, servers/KEY, KEY a digest of how it starts. It is a plain
// value, so that a reload sees two of the same server as equal.
type serverMemory struct {
	dir string
}

// sendsRequestsFile says the server was seen sending requests of its own.
const sendsRequestsFile = "sends-requests"

func (m serverMemory) SendsRequests() bool {
	_, err := os.Stat(filepath.Join(m.dir, sendsRequestsFile))
	return err == nil
}

func (m serverMemory) RememberRequests() error {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	err := os.WriteFile(filepath.Join(m.dir, sendsRequestsFile), nil, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}

// startKey names how a server starts: the same command, arguments and
// folder give the same key.
func startKey(sc serverConfig) string {
	h := sha256.New()
	for _, part := range append([]string{sc.Command, sc.Cwd}, sc.Args...) {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// memory is the router's memory of sc; nil without a state folder.
func (env daemonEnv) memory(sc serverConfig) mux.Memory {
	if env.state == "" {
		return nil
	}
	return serverMemory{dir: filepath.Join(env.state, "servers", startKey(sc))}
}
