package socket

// Peer describes the process at the other end of a Unix connection, as the
// kernel recorded it when that process connected.
type Peer struct {
	UID int
	PID int // 0 when the system does not say
}
