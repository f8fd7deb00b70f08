package main

import (
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/jail"
)

func TestParseVolume(t *testing.T) {
	cases := []struct {
		in   string
		want jail.Volume
		err  bool
	}{
		{"/src:/data", jail.Volume{Host: "/src", Guest: "/data"}, false},
		{"/src:/data:ro", jail.Volume{Host: "/src", Guest: "/data", ReadOnly: true}, false},
		{"/src:/data:rw", jail.Volume{Host: "/src", Guest: "/data"}, false},
		{"rel:/data", jail.Volume{Host: "/cwd/rel", Guest: "/data"}, false},
		{"/src", jail.Volume{}, true},
		{"/src:/data:rx", jail.Volume{}, true},
		{":/data", jail.Volume{}, true},
		{"/a:/b:ro:x", jail.Volume{}, true},
	}
	for _, c := range cases {
		got, err := parseVolume(c.in, "/cwd")
		if (err != nil) != c.err {
			t.Errorf("parseVolume(%q) err = %v, want error %v", c.in, err, c.err)
			continue
		}
		if err == nil && got != c.want {
			t.Errorf("parseVolume(%q) = %+v, want %+v", c.in, got, c.want)
		}
		if err != nil && !strings.Contains(err.Error(), c.in) {
			t.Errorf("error %q does not name the input %q", err, c.in)
		}
	}
}
