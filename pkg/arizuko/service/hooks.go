package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// HookPrefix starts every webhook token, so a leaked URL is easy to grep for.
const HookPrefix = "azh_"

// DefaultHookPerMinute is a hook's rate limit when none is given.
const DefaultHookPerMinute = 60

// HookIn asks for a webhook into Folder.
type HookIn struct {
	Folder string `json:"folder"`
	// Signed makes a secret for an X-Hub-Signature-256 (HMAC-SHA256) check
	// every POST must pass.
	Signed    bool `json:"signed,omitempty"`
	PerMinute int  `json:"per_minute,omitempty"` // 0: DefaultHookPerMinute
}

// NewHook is a created hook: Token and Secret are shown this once.
type NewHook struct {
	store.Hook
	Path   string `json:"path"` // "/hook/<token>" on the daemon's URL
	Token  string `json:"token"`
	Secret string `json:"secret,omitempty"`
}

// HookPrincipal names a hook in audit rows and as a message's sender.
func HookPrincipal(id int64) string { return "hook:" + strconv.FormatInt(id, 10) }

func hookAAD(f string, sum []byte) []byte { return secrets.AAD("hook", f, hex.EncodeToString(sum)) }

// AddHook creates a webhook into a folder; needs hook:add there.
func (l *Local) AddHook(ctx context.Context, in HookIn) (NewHook, error) {
	if err := folder.Validate(in.Folder); err != nil {
		return NewHook{}, fmt.Errorf("folder %q: %w: %w", in.Folder, err, ErrInvalid)
	}
	if in.PerMinute < 0 || in.PerMinute > 6000 {
		return NewHook{}, invalid("per_minute %d: want 1..6000 (0 for %d)", in.PerMinute, DefaultHookPerMinute)
	}
	if in.PerMinute == 0 {
		in.PerMinute = DefaultHookPerMinute
	}
	if err := l.check(ctx, "hook:add", in.Folder); err != nil {
		return NewHook{}, err
	}
	if err := l.limitHooks(ctx, in.Folder); err != nil {
		return NewHook{}, err
	}
	token, err := randomText(HookPrefix)
	if err != nil {
		return NewHook{}, err
	}
	sum := sha256.Sum256([]byte(token))
	var sealed []byte
	var secret string
	if in.Signed {
		r, err := l.ring()
		if err != nil {
			return NewHook{}, fmt.Errorf("a signed hook keeps its secret sealed: %w", err)
		}
		if secret, err = randomText("whsec_"); err != nil {
			return NewHook{}, err
		}
		if sealed, err = r.Seal(hookAAD(in.Folder, sum[:]), []byte(secret)); err != nil {
			return NewHook{}, err
		}
	}
	h, err := l.st.InsertHook(ctx, store.Hook{Folder: in.Folder, PerMinute: in.PerMinute, Owner: Actor(ctx)}, sum[:], sealed)
	if err != nil {
		return NewHook{}, err
	}
	return NewHook{Hook: h, Path: "/hook/" + token, Token: token, Secret: secret}, nil
}

func randomText(prefix string) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return prefix + base64.RawURLEncoding.EncodeToString(raw[:]), nil
}

// ListHooks lists the hooks of the folders the caller may hook:read.
func (l *Local) ListHooks(ctx context.Context) ([]store.Hook, error) {
	show, err := l.visible(ctx, "hook:read")
	if err != nil {
		return nil, err
	}
	hs, err := l.st.ListHooks(ctx)
	return filter(hs, show, func(h store.Hook) string { return h.Folder }), err
}

// RemoveHook revokes a hook at once; needs hook:rm on its folder.
func (l *Local) RemoveHook(ctx context.Context, id int64) error {
	h, err := l.st.GetHook(ctx, id)
	if err != nil {
		return err
	}
	if err := l.check(ctx, "hook:rm", h.Folder); err != nil {
		return err
	}
	return l.st.DeleteHook(ctx, id)
}

// ErrNoHook is a webhook token that is malformed, unknown or revoked.
var ErrNoHook = errors.New("unknown or revoked webhook")

// HookByToken finds the hook of a token and opens its secret (nil for an
// unsigned hook).
func (l *Local) HookByToken(ctx context.Context, token string) (store.Hook, []byte, error) {
	if !strings.HasPrefix(token, HookPrefix) || len(token) > 128 {
		return store.Hook{}, nil, ErrNoHook
	}
	sum := sha256.Sum256([]byte(token))
	h, err := l.st.HookBySum(ctx, sum[:])
	if errors.Is(err, store.ErrNotFound) {
		return store.Hook{}, nil, ErrNoHook
	}
	if err != nil || h.Sealed == nil {
		return h.Hook, nil, err
	}
	r, err := l.ring()
	if err != nil {
		return h.Hook, nil, err
	}
	secret, err := r.Open(hookAAD(h.Folder, sum[:]), h.Sealed)
	if err != nil {
		return h.Hook, nil, fmt.Errorf("hook %d: opening its secret: %w", h.ID, err)
	}
	return h.Hook, secret, nil
}

// ActFor is the context a hook or a schedule posts with: the admin principal
// acting for owner, once the gate found that owner may still do action on
// folder. A revoked token or grant stops what its owner set up.
func (l *Local) ActFor(ctx context.Context, owner, action, f string) (context.Context, error) {
	if err := l.gate.Check(ctx, owner, action, f); err != nil {
		return nil, err
	}
	return OnBehalf(WithPrincipal(ctx, AdminPrincipal), owner), nil
}
