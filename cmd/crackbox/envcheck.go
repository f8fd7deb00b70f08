package main

import (
	"io"

	"github.com/crackbox/crackbox/pkg/config"
)

// warnUnknownEnv names CRACKBOX_* variables that crackbox does not read, through
// the table arizuko's warning uses too.
func warnUnknownEnv(w io.Writer, environ []string) { config.Crackbox.WarnUnknown(w, environ) }
