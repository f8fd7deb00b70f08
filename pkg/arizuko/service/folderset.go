package service

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// Bounds of a folder's agent environment.
const (
	MaxAgentEnv      = 64
	MaxAgentEnvBytes = 4096
)

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// FolderSet changes a folder's agent settings; what it leaves empty stays.
type FolderSet struct {
	// AgentCommand replaces the agent command (argv).
	AgentCommand []string `json:"agent_command,omitempty"`
	// SetEnv sets KEY=VALUE in the agent's environment, replacing a value
	// the key had; UnsetEnv removes keys.
	SetEnv   []string `json:"set_env,omitempty"`
	UnsetEnv []string `json:"unset_env,omitempty"`
	// StdoutReply turns the stdout reply fallback on or off.
	StdoutReply *bool `json:"stdout_reply,omitempty"`
}

// SetFolder changes a folder's agent command, environment or stdout reply
// fallback. Choosing what runs in a folder is the power to add it, so it
// needs folder:add on the folder.
func (l *Local) SetFolder(ctx context.Context, path string, in FolderSet) (store.Folder, error) {
	if err := folder.Validate(path); err != nil {
		return store.Folder{}, fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	for _, k := range in.UnsetEnv {
		if !envKey.MatchString(k) {
			return store.Folder{}, invalid("unset env %q: want a variable name", k)
		}
	}
	if err := validEnv(in.SetEnv); err != nil {
		return store.Folder{}, err
	}
	if err := l.check(ctx, "folder:add", path); err != nil {
		return store.Folder{}, err
	}
	f, err := l.st.GetFolder(ctx, path)
	if err != nil {
		return f, err
	}
	var c store.FolderChange
	if len(in.AgentCommand) > 0 {
		c.AgentCommand = &in.AgentCommand
	}
	if len(in.SetEnv) > 0 || len(in.UnsetEnv) > 0 {
		env := mergeFolderEnv(f.AgentEnv, in.SetEnv, in.UnsetEnv)
		if err := validEnv(env); err != nil {
			return f, err
		}
		c.AgentEnv = &env
	}
	c.StdoutReply = in.StdoutReply
	if err := l.st.UpdateFolder(ctx, path, c); err != nil {
		return f, err
	}
	return l.st.GetFolder(ctx, path)
}

// mergeFolderEnv applies set and unset to env, keeping the order keys were
// first set in.
func mergeFolderEnv(env, set, unset []string) []string {
	out := slices.Clone(env)
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(out, func(x string) bool { return strings.HasPrefix(x, k+"=") })
		if i >= 0 {
			out[i] = kv
		} else {
			out = append(out, kv)
		}
	}
	return slices.DeleteFunc(out, func(x string) bool {
		k, _, _ := strings.Cut(x, "=")
		return slices.Contains(unset, k)
	})
}

// validEnv checks a folder's agent environment: KEY=VALUE with a variable
// name that is not the host's own (ARIZUKO_*), no NUL, within the bounds.
func validEnv(env []string) error {
	if len(env) > MaxAgentEnv {
		return invalid("agent env has %d variables, the limit is %d", len(env), MaxAgentEnv)
	}
	seen := map[string]bool{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok || !envKey.MatchString(k):
			return invalid("agent env %q: want KEY=VALUE with KEY a variable name", kv)
		case strings.HasPrefix(k, "ARIZUKO_"):
			return invalid("agent env %s: ARIZUKO_* is set by the host for every turn", k)
		case strings.ContainsRune(v, 0):
			return invalid("agent env %s: the value holds a NUL byte", k)
		case len(kv) > MaxAgentEnvBytes:
			return invalid("agent env %s is %d bytes, the limit is %d", k, len(kv), MaxAgentEnvBytes)
		case seen[k]:
			return invalid("agent env %s is set twice", k)
		}
		seen[k] = true
	}
	return nil
}
