package upstream

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mcpmux/mcpmux/internal/rawio"
	"github.com/mcpmux/mcpmux/jsonrpc"
)

// previewBytes bounds how much of a junk line goes into the log.
const previewBytes = 200

// readLoop is the only reader of the server's stdout. Bad lines are values,
// not endings: a too-large line is reported and skipped, a junk line logged
// and counted; only EOF, a read error or a junk flood end the loop.
func (p *Process) readLoop() {
	flood := p.readFrames()
	close(p.readDone)
	if !flood {
		// Usually the server has exited and this returns at once.
		p.expectExit(ReasonStdoutClosed)
	}
}

// readFrames hands each frame to the Handler until stdout ends; it reports
// whether it stopped because of a junk flood (the process is then killed).
func (p *Process) readFrames() (flood bool) {
	r := jsonrpc.NewReaderSize(rawio.NewReader(p.stdout), p.cfg.MaxMessageBytes, stdoutBufferSize)
	r.CheckLargeFrames()
	// Whatever ends the reading (EOF, a junk flood), what the handler held
	// back goes out.
	defer p.h.Flush()
	junk := 0                   // junk lines in a row
	banner := p.cfg.BannerBytes // what is left of the banner allowance, until the first message
	for {
		if !r.HasLine() {
			// The run of messages read so far is handled; the next read
			// may wait, so what the handler held back goes now.
			p.h.Flush()
		}
		frame, err := r.Read()
		if tooLarge := (*jsonrpc.TooLargeError)(nil); errors.As(err, &tooLarge) {
			p.log.Warn("message from server over the size limit, skipped",
				"size", tooLarge.Size, "limit", tooLarge.Limit, "id", string(tooLarge.ID))
			p.h.HandleTooLarge(tooLarge.ID, tooLarge.Size)
			continue
		}
		if err != nil {
			return false // io.EOF, or the pipe closed under us after the reap
		}
		m, err := parse(r, frame)
		if err == nil {
			junk, banner = 0, 0
			p.h.HandleMessage(m)
			continue
		}
		if len(frame) <= banner {
			// Before its first message a server may print a banner (a
			// version, a greeting, what it serves): not junk, up to a bound.
			banner -= len(frame)
			p.log.Info("startup banner on server stdout, dropped", "preview", preview(frame))
			continue
		}
		banner = 0
		if id := jsonrpc.ResponseID(frame); id != nil && p.h.HandleInvalidAnswer(id, err) {
			// An answer, if a broken one: the server speaks the protocol,
			// so this is no junk (and no reason to restart it).
			p.log.Warn("invalid answer from the server; its request fails with invalid_answer",
				"id", string(id), "preview", preview(frame), "error", err)
			continue
		}
		junk++
		p.log.Warn("junk on server stdout, dropped", "preview", preview(frame), "error", err, "in_a_row", junk)
		if junk > p.cfg.MaxJunkLines {
			detail := fmt.Sprintf("more than max_junk_lines = %d stdout lines in a row were not JSON-RPC", p.cfg.MaxJunkLines)
			p.log.Warn("too many junk lines in a row; killing the server", "max_junk_lines", p.cfg.MaxJunkLines)
			p.setDetail(detail)
			p.Kill(ReasonJunkOutput)
			return true
		}
	}
}

// parse parses a frame that r just read, without checking again what r
// checked as it read it (a large frame, checked a buffer-full at a time).
func parse(r *jsonrpc.Reader, frame []byte) (*jsonrpc.Message, error) {
	if r.Checked() {
		return jsonrpc.ParseChecked(frame)
	}
	return jsonrpc.Parse(frame)
}

// preview is the start of a junk line, made safe to log.
func preview(frame []byte) string {
	if len(frame) <= previewBytes {
		return strings.ToValidUTF8(string(frame), "\uFFFD")
	}
	return strings.ToValidUTF8(string(frame[:previewBytes]), "\uFFFD") + "…"
}

// stdoutBufferSize is the read buffer of a server's stdout: one per server,
// so it can be large, and large answers cost fewer reads.
const stdoutBufferSize = 256 << 10
