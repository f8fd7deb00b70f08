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
	// anchors[i] is the offset in pairs[i].Sent of its least common byte,
	// the one searched for first.
	anchors []int
	buf     []byte // read buffer
	in      []byte // read but not yet decided
	out     []byte // decided, not yet returned
	eof     bool
	err     error
}

// NewScrubber scrubs src of pairs.
func NewScrubber(src io.Reader, pairs []Pair) *Scrubber {
	s := &Scrubber{src: src}
	for _, p := range pairs {
		if p.Sent != "" {
			s.pairs = append(s.pairs, p)
			s.anchors = append(s.anchors, anchor(p.Sent))
		}
	}
	return s
}

// Read returns scrubbed bytes. It reads from the source only when it has
// nothing decided to return, and returns as soon as it has something.
func (s *Scrubber) Read(b []byte) (int, error) {
	if len(s.out) == 0 && len(s.in) == 0 && !s.eof && len(b) > 0 {
		return s.readDirect(b)
	}
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

// readDirect reads straight into b when nothing is held back: a read that
// holds no value and does not end in the start of one, the usual case, is
// returned as it is without a copy. Anything else goes the buffered way.
func (s *Scrubber) readDirect(b []byte) (int, error) {
	n, err := s.src.Read(b)
	if err != nil {
		s.eof, s.err = true, err
	}
	if n == 0 {
		if s.eof {
			return 0, s.err
		}
		return 0, nil
	}
	if at, _ := s.next(b[:n]); at < 0 {
		hold := 0
		if !s.eof {
			hold = partialTail(b[:n], s.pairs)
		}
		if hold == 0 {
			return n, nil
		}
		s.in = append(s.in, b[n-hold:n]...)
		if n > hold {
			return n - hold, nil
		}
		return s.Read(b)
	}
	s.in = append(s.in, b[:n]...)
	s.decide(s.eof)
	return s.Read(b)
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
func (s *Scrubber) partialTail() int { return partialTail(s.in, s.pairs) }

func partialTail(b []byte, pairs []Pair) int {
	best := 0
	for _, p := range pairs {
		for k := min(len(p.Sent)-1, len(b)); k > best; k-- {
			if bytes.HasSuffix(b, []byte(p.Sent[:k])) {
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
	for k, p := range s.pairs {
		i := indexAnchored(b, p.Sent, s.anchors[k])
		if i >= 0 && (best < 0 || i < best || i == best && len(p.Sent) > len(bp.Sent)) {
			best, bp = i, p
		}
	}
	return best, bp
}

// indexAnchored is bytes.Index(b, sent) that scans for sent's byte at
// offset a: a byte rare in ordinary text makes for few false starts.
func indexAnchored(b []byte, sent string, a int) int {
	c := sent[a]
	for pos := 0; pos+len(sent) <= len(b); {
		i := bytes.IndexByte(b[pos+a:len(b)-len(sent)+a+1], c)
		if i < 0 {
			return -1
		}
		start := pos + i
		if string(b[start:start+len(sent)]) == sent {
			return start
		}
		pos = start + 1
	}
	return -1
}

// anchor picks the offset of sent's least common byte in text: lowercase
// letters, digits and spaces are common; capitals less so; the rest rare.
func anchor(sent string) int {
	rank := func(c byte) int {
		switch {
		case c >= 'a' && c <= 'z' || c == ' ' || c == '\n' || c >= '0' && c <= '9':
			return 3
		case c >= 'A' && c <= 'Z' || c == '"' || c == ',' || c == '.' || c == ':' || c == '/':
			return 2
		}
		return 1
	}
	best := 0
	for i := 1; i < len(sent); i++ {
		if rank(sent[i]) < rank(sent[best]) {
			best = i
		}
	}
	return best
}

// Close closes the source when it is a Closer.
func (s *Scrubber) Close() error {
	if c, ok := s.src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
