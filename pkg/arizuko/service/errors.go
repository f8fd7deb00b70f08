package service

import (
	"errors"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// Codes are the stable error names of the HTTP envelope.
const (
	CodeInvalid     = "invalid"
	CodeNotFound    = "not_found"
	CodeConflict    = "conflict"
	CodeDenied      = "denied"
	CodeUnavailable = "unavailable"
	CodeLimit       = "limit"
	CodeInternal    = "internal"
)

var codeOf = []struct {
	code string
	errs []error
}{
	{CodeDenied, []error{ErrDenied, acl.ErrDenied}},
	{CodeInvalid, []error{ErrInvalid, acl.ErrInvalid, folder.ErrInvalidName, folder.ErrEscape, router.ErrInvalid, store.ErrNoParent, store.ErrHasChildren,
		store.ErrBadURL}},
	{CodeNotFound, []error{ErrNotFound, store.ErrNotFound}},
	{CodeConflict, []error{ErrConflict, store.ErrExists, store.ErrConflict, store.ErrClaimed}},
	{CodeUnavailable, []error{ErrUnavailable, secrets.ErrNoKey, store.ErrUnreachable}},
	{CodeLimit, []error{ErrLimit}},
}

// Code classifies err into one of the Code* names.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	for _, c := range codeOf {
		for _, s := range c.errs {
			if errors.Is(err, s) {
				return c.code
			}
		}
	}
	return CodeInternal
}

// Error is an error received over the wire; errors.Is matches the sentinel
// of its code, so callers branch the same way on local and remote errors.
type Error struct {
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Is matches the sentinel for e.Code.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case CodeInvalid:
		return target == ErrInvalid
	case CodeNotFound:
		return target == ErrNotFound
	case CodeConflict:
		return target == ErrConflict
	case CodeDenied:
		return target == ErrDenied
	case CodeUnavailable:
		return target == ErrUnavailable
	case CodeLimit:
		return target == ErrLimit
	}
	return false
}
