package allow

import (
	"fmt"
	"testing"
)

func BenchmarkCheck(b *testing.B) {
	var entries []string
	for i := range 200 {
		entries = append(entries, fmt.Sprintf("*.svc%d.example.com", i), fmt.Sprintf("host%d.example.org:8443", i))
	}
	l, err := Parse(entries)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if l.Check("a.b.svc199.example.com", 443) != nil {
			b.Fatal("denied")
		}
	}
}
