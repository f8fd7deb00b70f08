// Package config loads TOML configuration: strict decoding, file lookup,
// environment overrides, flag overrides and, for crackbox, validation.
//
// It serves both binaries. A Table is one binary's settings registry; both
// load through one (Crackbox here, arizuko's in cmd/arizuko), so precedence,
// errors and the unknown-variable warning are the same in either. Config and
// Load are crackbox's schema and loader; arizuko.toml uses Duration and embeds
// Proxy, checked by the same Validate and built by the same RunOptions, so a
// [proxy] key means one thing in either file.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// FileError is a decode failure at a known place in a config file.
type FileError struct {
	Path   string
	Line   int
	Column int
	Key    string // dotted key, empty when the error is not about one key
	Err    error
}

func (e *FileError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d:%d", e.Path, e.Line, e.Column)
	if e.Key != "" {
		fmt.Fprintf(&b, ": key %q", e.Key)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// typeMismatch matches go-toml's type error, whose struct dump is noise to a user.
var typeMismatch = regexp.MustCompile(`^cannot decode TOML (\S+) into .* of type (\S+)$`)

// ErrUnknownKey marks a key in the file that the target struct does not have.
var ErrUnknownKey = errors.New("unknown key")

// DecodeFile strictly decodes the TOML file at path into v: unknown keys and
// type mismatches are errors naming the file, line and key. A missing file
// yields an error wrapping fs.ErrNotExist.
func DecodeFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return Decode(path, data, v)
}

// Decode is DecodeFile on bytes already read; name labels errors.
func Decode(name string, data []byte, v any) error {
	return decode(name, data, v, Crackbox.Example)
}

// decode is Decode whose unknown-key errors point at example.
func decode(name string, data []byte, v any, example string) error {
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		errs := make([]error, 0, len(strict.Errors))
		for i := range strict.Errors {
			de := &strict.Errors[i]
			line, col := de.Position()
			key := strings.Join(de.Key(), ".")
			errs = append(errs, &FileError{Path: name, Line: line, Column: col, Key: key,
				Err: fmt.Errorf("%w (remove it or check its spelling against %s)", ErrUnknownKey, example)})
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if m := typeMismatch.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("wrong type: got a TOML %s, want %s", m[1], m[2])
		}
		return &FileError{Path: name, Line: line, Column: col, Key: strings.Join(de.Key(), "."), Err: errors.New(msg)}
	}
	return fmt.Errorf("%s: %w", name, err)
}
