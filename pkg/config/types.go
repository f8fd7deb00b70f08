package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("30s", "5m").
type Duration struct{ time.Duration }

func (d *Duration) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: write it like \"30s\", \"5m\" or \"0\"", s)
	}
	if v < 0 {
		return fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	d.Duration = v
	return nil
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// Size is a byte count written with an optional binary suffix: "512M", "2G", "1048576".
type Size uint64

var errSize = errors.New("write it like \"512M\", \"2G\" or a plain byte count")

func (s *Size) UnmarshalText(b []byte) error {
	str := strings.TrimSpace(string(b))
	num, mult := strings.TrimSuffix(strings.ToUpper(str), "B"), uint64(1)
	if n := len(num); n > 0 {
		if m, ok := sizeSuffix[num[n-1]]; ok {
			num, mult = num[:n-1], m
		}
	}
	v, err := strconv.ParseUint(num, 10, 64)
	if err != nil || v == 0 {
		return fmt.Errorf("invalid size %q: %w", str, errSize)
	}
	if v > (1<<63)/mult {
		return fmt.Errorf("invalid size %q: too large", str)
	}
	*s = Size(v * mult)
	return nil
}

var sizeSuffix = map[byte]uint64{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30, 'T': 1 << 40}

func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// String renders the size with the largest exact binary suffix.
func (s Size) String() string {
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if uint64(s) >= u.mult && uint64(s)%u.mult == 0 {
			return strconv.FormatUint(uint64(s)/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatUint(uint64(s), 10)
}

// MiB is the size in whole mebibytes, rounded down (QEMU's -m unit).
func (s Size) MiB() uint64 { return uint64(s) >> 20 }
