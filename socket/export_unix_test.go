//go:build unix

package socket

// CheckPeer exposes the peer check Dial makes, so tests can run it on a
// connection they dialled themselves.
var CheckPeer = checkPeer

// DefaultDirIn is DefaultDir with runUser and tmp standing for /run/user and
// /tmp.
var DefaultDirIn = defaultDir
