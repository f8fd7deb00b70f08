package jail

import (
	"fmt"
	"path/filepath"
	"strings"
)

func checkEnvKey(k string) error {
	if k == "" {
		return fmt.Errorf("empty variable name; write KEY=VALUE")
	}
	if strings.ContainsAny(k, " \t\x00") {
		return fmt.Errorf("variable name %q contains a space or NUL", k)
	}
	return nil
}

// guestEnv builds the command's complete environment: PATH, HOME, TERM, LANG defaults
// (TERM and LANG from the host values the caller passes), then explicit entries, later
// entries replacing earlier ones with the same key.
func guestEnv(explicit []string, home, term, lang string, tty bool) ([]string, error) {
	if term == "" && tty {
		term = "xterm"
	}
	base := []string{"PATH=" + DefaultPath, "HOME=" + home}
	if term != "" {
		base = append(base, "TERM="+term)
	}
	if lang != "" {
		base = append(base, "LANG="+lang)
	}
	idx := map[string]int{}
	var out []string
	for _, e := range append(base, explicit...) {
		k, _, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("%w: env entry %q: write KEY=VALUE", ErrBadSpec, e)
		}
		if err := checkEnvKey(k); err != nil {
			return nil, fmt.Errorf("%w: env entry %q: %v", ErrBadSpec, e, err)
		}
		if i, seen := idx[k]; seen {
			out[i] = e
			continue
		}
		idx[k] = len(out)
		out = append(out, e)
	}
	return out, nil
}

// pathFrom is the caller's PATH as candidates for the guest's, or nil when the caller
// set PATH in env: that choice wins as given. Empty entries (the current directory, by
// an old convention) are dropped.
func pathFrom(path string, env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return nil
		}
	}
	var out []string
	for _, d := range filepath.SplitList(path) {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}
