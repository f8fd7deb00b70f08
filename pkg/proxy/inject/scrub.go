package inject

import (
	"bytes"
	"io"
	"strings"
)

// Scrubber is a reader that replaces every Sent of its pairs with the Guest
// form in a stream, also across read boundaries.
//
// What it holds back never depends on whether the bytes are the start of a
// value: a guest that has an upstream echo chosen bytes and pause would
// otherwise learn from the delay whether they begin the value, one
// character at a time. It holds the last longest-Sent-minus-one bytes of
// what it has read until more arrive or the stream ends, fewer when a
// control byte is among them: no value holds one, so none can span it, and
// a line or an event that ends the stream's output so far is not held.
type Scrubber struct {
	src   io.Reader
	pairs []Pair
	// anchors[i] is the offset in pairs[i].Sent of its least common byte,
	// the one searched for first.
	anchors []int
	maxHold int    // longest Sent minus one
	cut     bool   // no Sent holds a control byte, so one ends the hold
	buf     []byte // read buffer
	in      []byte // read but not yet decided
	out     []byte // decided, not yet returned
	eof     bool
	err     error
}

// NewScrubber scrubs src of pairs.
func NewScrubber(src io.Reader, pairs []Pair) *Scrubber {
	s := &Scrubber{src: src, cut: true}
	for _, p := range pairs {
		if p.Sent != "" {
			s.pairs = append(s.pairs, p)
			s.anchors = append(s.anchors, anchor(p.Sent))
			s.maxHold = max(s.maxHold, len(p.Sent)-1)
			if strings.IndexFunc(p.Sent, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
				s.cut = false
			}
		}
	}
	return s
}

// Read returns scrubbed bytes. It reads from the source only when it has
// nothing decided to return, and returns as soon as it has something.
func (s *Scrubber) Read(b []byte) (int, error) {
	if len(s.pairs) == 0 {
		return s.src.Read(b)
	}
	for len(s.out) == 0 {
		if s.eof {
			if len(s.in) > 0 {
				s.decide(true)
				continue
			}
			return 0, s.err
		}
		if len(b) > 2*s.maxHold {
			if n, ok := s.readDirect(b); ok {
				return n, nil
			}
			continue
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

// readDirect reads into b behind the bytes held back, and returns what it
// read in place when that holds no value, the usual case: no copy but of
// the held tail. With ok false it moved what it read to in and decided it.
func (s *Scrubber) readDirect(b []byte) (int, bool) {
	k := copy(b, s.in)
	n, err := s.src.Read(b[k:])
	if err != nil {
		s.eof, s.err = true, err
	}
	n += k
	if at, _ := s.next(b[:n]); at >= 0 {
		s.in = append(s.in[:0], b[:n]...)
		s.decide(s.eof)
		return 0, false
	}
	hold := 0
	if !s.eof {
		hold = s.hold(b[:n])
	}
	s.in = append(s.in[:0], b[n-hold:n]...)
	return n - hold, n > hold
}

// decide moves to out every byte of in that no Sent can still begin at:
// all but the held tail, or everything at the end of the stream.
func (s *Scrubber) decide(final bool) {
	limit := len(s.in)
	if !final {
		limit -= s.hold(s.in)
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

// hold is how many bytes at the end of b stay undecided: the last maxHold,
// or those after the last control byte among them. A Sent that starts
// before them ends inside b, so it is found whole. It looks at no value.
func (s *Scrubber) hold(b []byte) int {
	h := min(len(b), s.maxHold)
	if s.cut {
		for i := len(b) - 1; i >= len(b)-h; i-- {
			if c := b[i]; c < 0x20 || c == 0x7f {
				return len(b) - 1 - i
			}
		}
	}
	return h
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
