package inject

import (
	"bytes"
	"io"
)

// Scrubber is a reader that replaces every Sent of its pairs with the Guest
// form in a stream, also across read boundaries. It holds back only a tail
// that may be the start of a value, so streamed responses (SSE, chunked)
// flow as they arrive.
type Scrubber struct {
	src   io.Reader
	pairs []Pair
	buf   []byte // read buffer
	in    []byte // read but not yet decided
	out   []byte // decided, not yet returned
	eof   bool
	err   error
}

// NewScrubber scrubs src of pairs.
func NewScrubber(src io.Reader, pairs []Pair) *Scrubber {
	s := &Scrubber{src: src}
	for _, p := range pairs {
		if p.Sent != "" {
			s.pairs = append(s.pairs, p)
		}
	}
	return s
}

// Read returns scrubbed bytes. It reads from the source only when it has
// nothing decided to return, and returns as soon as it has something.
func (s *Scrubber) Read(b []byte) (int, error) {
	for len(s.out) == 0 {
		if s.eof {
			if len(s.in) > 0 {
				s.decide(true)
				continue
			}
			return 0, s.err
		}
		if s.buf == nil {
			s.buf = make([]byte, 32<<10)
		}
		n, err := s.src.Read(s.buf)
		s.in = append(s.in, s.buf[:n]...)
		if err != nil {
			s.eof, s.err = true, err
		}
		s.decide(s.eof)
	}
	n := copy(b, s.out)
	s.out = s.out[n:]
	return n, nil
}

// decide moves to out every byte of in that no Sent can still begin at:
// all but a tail that is the start of some Sent, or everything at the end
// of the stream.
func (s *Scrubber) decide(final bool) {
	limit := len(s.in)
	if !final {
		limit -= s.partialTail()
	}
	pos := 0
	for pos < limit {
		at, p := s.next(s.in[pos:])
		if at < 0 || pos+at >= limit {
			break
		}
		s.out = append(s.out, s.in[pos:pos+at]...)
		s.out = append(s.out, p.Guest...)
		pos += at + len(p.Sent)
	}
	if pos < limit {
		s.out = append(s.out, s.in[pos:limit]...)
		pos = limit
	}
	s.in = append(s.in[:0], s.in[pos:]...)
}

// partialTail is the length of the longest end of in that is a proper
// prefix of some Sent: only those bytes may still become a value.
func (s *Scrubber) partialTail() int {
	best := 0
	for _, p := range s.pairs {
		for k := min(len(p.Sent)-1, len(s.in)); k > best; k-- {
			if bytes.HasSuffix(s.in, []byte(p.Sent[:k])) {
				best = k
				break
			}
		}
	}
	return best
}

// next finds the earliest complete Sent in b (the longest on a tie).
func (s *Scrubber) next(b []byte) (int, Pair) {
	best, bp := -1, Pair{}
	for _, p := range s.pairs {
		i := bytes.Index(b, []byte(p.Sent))
		if i >= 0 && (best < 0 || i < best || i == best && len(p.Sent) > len(bp.Sent)) {
			best, bp = i, p
		}
	}
	return best, bp
}

// Close closes the source when it is a Closer.
func (s *Scrubber) Close() error {
	if c, ok := s.src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
