package router

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
)

// SenderVar in a target folder expands to SanitizeSender of the message's
// platform and sender: one folder per sender.
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

// senderPrefix bounds the readable part of a per-sender segment; with the
// '-' and senderHash hex digits the segment stays at most 48 bytes, leaving
// room in folder.MaxSegment for text around {sender} in the target.
const (
	senderPrefix = 31
	senderHash   = 16
)

// SanitizeSender turns a platform sender id into one folder segment, one to
// one: a readable part (lowercase [a-z0-9_], other runs collapsed to '-',
// trimmed, at most 31 bytes) and then '-' and 16 hex digits of the SHA-256 of
// platform and raw sender, so "Bob" and "bob", or alice on tg and on irc, are
// different folders. The hash is 64 bits because anyone can pick their sender
// id: a shorter one could be brute-forced into another user's folder. A sender
// with nothing readable is the hash alone. The result matches [a-z0-9_-]+,
// never contains '/' or '.', and is the same for the same sender every time.
func SanitizeSender(platform, sender string) string {
	var b strings.Builder
	dash := false
	for i := 0; i < len(sender) && b.Len() < senderPrefix; i++ {
		c := sender[i]
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
	// The NUL keeps platform "tg" with sender "x" apart from "t" with "gx".
	sum := sha256.Sum256([]byte(platform + "\x00" + sender))
	h := hex.EncodeToString(sum[:])[:senderHash]
	if readable := strings.Trim(b.String(), "-"); readable != "" {
		return readable + "-" + h
	}
	return h
}

// Expand substitutes the sanitised sender into the folder and validates the result.
func (t Target) Expand(platform, sender string) (string, error) {
	f := strings.ReplaceAll(t.Folder, SenderVar, SanitizeSender(platform, sender))
	if err := folder.Validate(f); err != nil {
		return "", err
	}
	return f, nil
}

func (t Target) perSender() bool { return strings.Contains(t.Folder, SenderVar) }
