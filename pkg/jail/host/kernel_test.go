package host

import "testing"

func TestReleaseAtLeast(t *testing.T) {
	for _, tc := range []struct {
		release string
		ok      bool
	}{
		{"5.7.0", true}, {"5.6.19-amd64", false}, {"6.1.0-57-cloud-amd64", true},
		{"4.19.0", false}, {"5.10", true}, {"10.0.1", true}, {"garbage", false}, {"", false},
	} {
		if got := releaseAtLeast(tc.release, 5, 7); got != tc.ok {
			t.Errorf("releaseAtLeast(%q, 5, 7) = %v, want %v", tc.release, got, tc.ok)
		}
	}
}
