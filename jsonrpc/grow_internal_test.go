package jsonrpc

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// sized returns a JSON object of exactly n bytes (n >= 8).
func sized(n int) string { return `{"s":"` + strings.Repeat("x", n-8) + `"}` }

// TestReaderGrowsForLargeFrame: a Reader starts with a 512-byte buffer,
// takes a grown one only for a frame that does not fit, reads frames larger
// than its start size and exactly at the limit intact, and is back on its
// small buffer once the large frame's bytes are used up.
func TestReaderGrowsForLargeFrame(t *testing.T) {
	const limit = 1 << 20
	frames := []string{sized(100), sized(readBufferSize + 1), sized(3 * grownBufferSize), sized(limit), sized(40)}
	in := strings.Join(frames, "\n") + "\n" + sized(limit+1) + "\n" + sized(20) + "\n"
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole": func(r io.Reader) io.Reader { return r }, "one-byte": iotest.OneByteReader, "half": iotest.HalfReader,
	} {
		t.Run(name, func(t *testing.T) {
			r := NewReader(wrap(strings.NewReader(in)), limit)
			if got := r.small.Size(); got != 512 {
				t.Fatalf("start buffer %d bytes, want 512", got)
			}
			for i, want := range frames {
				f, err := r.Read()
				if err != nil || string(f) != want {
					t.Fatalf("frame %d (%d bytes): got %d bytes, err %v", i, len(want), len(f), err)
				}
			}
			_, err := r.Read()
			var tl *TooLargeError
			if !errors.As(err, &tl) || tl.Size != limit+1 {
				t.Fatalf("frame over the limit: err %v", err)
			}
			if f, err := r.Read(); err != nil || string(f) != sized(20) {
				t.Fatalf("frame after the oversized one: %q, %v", f, err)
			}
			if _, err := r.Read(); !errors.Is(err, io.EOF) {
				t.Fatalf("end: %v", err)
			}
			if r.br != r.small {
				t.Fatalf("reader still on a %d-byte buffer after the large frames", r.br.Size())
			}
		})
	}
}

// TestReaderShrinksWhenIdle: after a large frame the Reader is on its small
// buffer again before it waits for the next one.
func TestReaderShrinksWhenIdle(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr, 1<<20)
	big := sized(200 << 10)
	go func() {
		pw.Write([]byte(big + "\n"))
		pw.Write([]byte(sized(30) + "\n"))
		pw.Close()
	}()
	if f, err := r.Read(); err != nil || string(f) != big {
		t.Fatalf("large frame: %d bytes, %v", len(f), err)
	}
	if r.br == r.small {
		t.Fatalf("a 200 KiB frame was read through the 512-byte buffer")
	}
	if f, err := r.Read(); err != nil || string(f) != sized(30) {
		t.Fatalf("next frame: %q, %v", f, err)
	}
	if r.br != r.small || r.br.Size() != readBufferSize {
		t.Fatalf("after the large frame the reader is on a %d-byte buffer", r.br.Size())
	}
}

// countingReader counts the reads that reach it.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// TestReaderGrowsForRun: a run of small frames that comes in one read (a
// pipelining client) is read on in a grown buffer, in a few reads rather
// than one per 512 bytes; every frame arrives intact, the frame split by
// the small buffer's end too, and the Reader is back on its small buffer
// once the run is used up.
func TestReaderGrowsForRun(t *testing.T) {
	var frames []string
	for i := range 400 {
		frames = append(frames, sized(100+i%50))
	}
	in := strings.Join(frames, "\n") + "\n"
	src := &countingReader{r: strings.NewReader(in)}
	r := NewReader(src, 1<<20)
	for i, want := range frames {
		f, err := r.Read()
		if err != nil || string(f) != want {
			t.Fatalf("frame %d: got %q, err %v", i, f, err)
		}
		if i == 0 && r.br == r.small {
			t.Fatalf("the first of a run that came in one read left the reader on its small buffer")
		}
	}
	if _, err := r.Read(); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
	// 400 frames of about 130 bytes: 100 reads through 512 bytes; the run
	// takes the small buffer's one, then a 64 KiB buffer's.
	if src.reads > 5 {
		t.Errorf("%d reads for %d bytes", src.reads, len(in))
	}
	if r.br != r.small {
		t.Fatalf("reader still on a %d-byte buffer after the run", r.br.Size())
	}
}

// TestReaderSingleFramesStaySmall: frames that come one per read (an
// editor's requests, each answered before the next) never grow the buffer.
func TestReaderSingleFramesStaySmall(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr, 1<<20)
	go func() {
		for range 20 {
			pw.Write([]byte(sized(200) + "\n"))
		}
		pw.Close()
	}()
	for range 20 {
		if _, err := r.Read(); err != nil {
			t.Fatal(err)
		}
		if r.br != r.small {
			t.Fatalf("a frame read alone grew the buffer")
		}
	}
}
