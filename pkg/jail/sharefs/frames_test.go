package sharefs

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// tgetlock builds a Tgetlock with the given client id.
func tgetlock(tag uint16, client string) []byte {
	b := make([]byte, 7, 64)
	b[4] = msgTgetlock
	binary.LittleEndian.PutUint16(b[5:], tag)
	b = binary.LittleEndian.AppendUint32(b, 9)   // fid
	b = append(b, 1)                             // F_WRLCK
	b = binary.LittleEndian.AppendUint64(b, 128) // start
	b = binary.LittleEndian.AppendUint64(b, 1)   // length
	b = binary.LittleEndian.AppendUint32(b, 77)  // proc id
	b = binary.LittleEndian.AppendUint16(b, uint16(len(client)))
	b = append(b, client...)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func TestGetlockAnswer(t *testing.T) {
	good := tgetlock(0x1234, "guest")
	out := rgetlock(good)
	if got := binary.LittleEndian.Uint32(out); int(got) != len(out) || out[4] != msgRgetlock {
		t.Fatalf("reply header: size %d len %d type %d", got, len(out), out[4])
	}
	if !bytes.Equal(out[5:7], good[5:7]) {
		t.Errorf("reply tag %x, want %x", out[5:7], good[5:7])
	}
	if out[7] != lockTypeUnlock {
		t.Errorf("lock type %d, want unlocked", out[7])
	}
	if !bytes.Equal(out[8:], good[12:]) {
		t.Errorf("range, owner and client not echoed: %x vs %x", out[8:], good[12:])
	}
	for name, req := range map[string][]byte{
		"short":            good[:20],
		"client overruns":  good[:len(good)-1],
		"trailing garbage": append(append([]byte{}, good...), 0),
	} {
		binary.LittleEndian.PutUint32(req, uint32(len(req)))
		if r := rgetlock(req); r[4] != msgRlerror || binary.LittleEndian.Uint32(r[7:]) != 22 {
			t.Errorf("%s: reply %x, want Rlerror EINVAL", name, r)
		}
	}
}

func TestXattrwalkAnswer(t *testing.T) {
	walk := func(name string) []byte {
		b := make([]byte, 7, 64)
		b[4] = msgTxattrwalk
		b = binary.LittleEndian.AppendUint32(b, 1) // fid
		b = binary.LittleEndian.AppendUint32(b, 2) // newfid
		b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}
	for name, want := range map[string]uint32{"": 95, "security.capability": 61, "user.x": 61, "trusted.overlay.origin": 95, "trusted": 61} {
		if r := xattrwalkAnswer(walk(name)); r[4] != msgRlerror || binary.LittleEndian.Uint32(r[7:]) != want {
			t.Errorf("xattrwalk %q: reply %x, want Rlerror %d", name, r, want)
		}
	}
}
