package socket

import (
	"crypto/sha256"
	"crypto/subtle"
	"sync"
	"time"
)

// DefaultTokenGrace is how long a web listener still takes a token that
// was rotated out of its token file.
const DefaultTokenGrace = time.Minute

// tokenRecheck is how often at most a web listener reads its token file
// again, however many requests present a token it does not know.
const tokenRecheck = time.Second

// webTokens is the token a web listener takes: the configured one, or the
// one in WebConfig.TokenFile, followed across `mcpmux token rotate`. A
// request with a token it does not know makes it read the file again (at
// most once a tokenRecheck, whoever asks); a new token there replaces the
// current one, which is still taken for the grace time, so that clients
// given the new token are served at once and those with the old one have
// time to be given the new one.
type webTokens struct {
	file  string
	grace time.Duration

	mu       sync.Mutex
	cur, old [sha256.Size]byte
	oldUntil time.Time
	readAt   time.Time // when the file was last read again
}

func newWebTokens(cfg WebConfig) *webTokens {
	t := &webTokens{file: cfg.TokenFile, grace: cfg.TokenGrace, cur: sha256.Sum256([]byte(cfg.Token))}
	if t.grace == 0 {
		t.grace = DefaultTokenGrace
	}
	return t
}

// take reports whether one of candidates is a token the listener takes,
// reading the token file again when none is and the file may have
// changed.
func (t *webTokens) take(candidates []string) bool {
	sums := make([][sha256.Size]byte, len(candidates))
	for i, c := range candidates {
		// Hashing first makes the comparison constant-time in the length too.
		sums[i] = sha256.Sum256([]byte(c))
	}
	now := time.Now()
	if t.match(sums, now) {
		return true
	}
	return t.reread(now) && t.match(sums, now)
}

// match compares sums with the current token and, within its grace, the
// one before it.
func (t *webTokens) match(sums [][sha256.Size]byte, now time.Time) bool {
	cur, old, oldTaken := t.snapshot(now)
	ok := 0
	for _, s := range sums {
		ok |= subtle.ConstantTimeCompare(s[:], cur[:])
		if oldTaken {
			ok |= subtle.ConstantTimeCompare(s[:], old[:])
		}
	}
	return ok == 1
}

func (t *webTokens) snapshot(now time.Time) (cur, old [sha256.Size]byte, oldTaken bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur, t.old, now.Before(t.oldUntil)
}

// reread reads the token file again, unless there is none or it was read
// less than tokenRecheck ago, and reports whether the token changed. A
// file that cannot be read leaves the current token as it is.
func (t *webTokens) reread(now time.Time) bool {
	if t.file == "" || !t.claimRead(now) {
		return false
	}
	tok, err := readToken(t.file)
	if err != nil {
		return false
	}
	return t.replace(sha256.Sum256([]byte(tok)), now)
}

func (t *webTokens) claimRead(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.readAt) < tokenRecheck {
		return false
	}
	t.readAt = now
	return true
}

func (t *webTokens) replace(sum [sha256.Size]byte, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sum == t.cur {
		return false
	}
	t.old, t.oldUntil, t.cur = t.cur, now.Add(t.grace), sum
	return true
}
