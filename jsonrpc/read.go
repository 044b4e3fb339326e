package jsonrpc

import (
	"io"
)

// ReadMessage reads all of r as one message, for transports that frame
// messages themselves (a WebSocket text frame). A message longer than limit
// is read through to its end without being held, by the same scan that
// skips an oversized line, and reported as a *TooLargeError that carries its
// top-level id when the scan found one; r is then fully consumed. Any other
// error is r's.
func ReadMessage(r io.Reader, limit int) ([]byte, error) {
	msg, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(msg) <= limit {
		return msg, nil
	}
	scan := new(idScanner)
	scan.feed(msg)
	size := int64(len(msg))
	msg = nil
	n, err := io.CopyBuffer(scanWriter{scan}, r, make([]byte, readBufferSize))
	if err != nil {
		return nil, err
	}
	return nil, &TooLargeError{Size: size + n, Limit: limit, ID: scan.id()}
}

// scanWriter feeds what is written to it to an idScanner.
type scanWriter struct{ s *idScanner }

func (w scanWriter) Write(p []byte) (int, error) {
	w.s.feed(p)
	return len(p), nil
}
