package router

import (
	"fmt"
	"strings"

	"github.com/crackbox/crackbox/pkg/folder"
)

// SenderVar in a target folder expands to the sanitised sender.
const SenderVar = "{sender}"

// ObserveTopic as a target topic stores the message without running a turn.
const ObserveTopic = "observe"

// Target is a parsed folder[#topic].
type Target struct {
	Folder string // may contain {sender}
	Topic  string
}

// ParseTarget parses and validates folder[#topic]. The folder must be a valid
// name once {sender} is replaced by a sample value.
func ParseTarget(s string) (Target, error) {
	f, topic, _ := strings.Cut(s, "#")
	if err := folder.Validate(strings.ReplaceAll(f, SenderVar, "x")); err != nil {
		return Target{}, fmt.Errorf("target %q: %w: %w", s, err, ErrInvalid)
	}
	if strings.Contains(s, "#") {
		if err := ValidateTopic(topic); err != nil {
			return Target{}, fmt.Errorf("target %q: %w", s, err)
		}
	}
	return Target{Folder: f, Topic: topic}, nil
}

// ValidateTopic accepts 1..64 bytes of [A-Za-z0-9._-].
func ValidateTopic(t string) error {
	if t == "" || len(t) > 64 {
		return fmt.Errorf("topic %q: want 1..64 characters: %w", t, ErrInvalid)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("topic %q has illegal character %q: %w", t, c, ErrInvalid)
		}
	}
	return nil
}

// SanitizeSender turns a platform sender id into one folder segment: lowercase
// [a-z0-9_-], other runs collapsed to '-', trimmed, at most 48 bytes, and
// "anon" when nothing is left. The result never contains '/' or '.'.
func SanitizeSender(s string) string {
	var b strings.Builder
	dash := false
	for i := 0; i < len(s) && b.Len() < 48; i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' {
			b.WriteByte(c)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		return "anon"
	}
	return out
}

// Expand substitutes the sanitised sender into the folder and validates the result.
func (t Target) Expand(sender string) (string, error) {
	f := strings.ReplaceAll(t.Folder, SenderVar, SanitizeSender(sender))
	if err := folder.Validate(f); err != nil {
		return "", err
	}
	return f, nil
}

func (t Target) perSender() bool { return strings.Contains(t.Folder, SenderVar) }
