package httpjson

import (
	"encoding/json"
	"net/http"
)

// Envelope is the body of every error answer.
type Envelope struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// Style is how a server encodes its answers; each daemon keeps the bytes
// its clients and documents already expect.
type Style struct {
	Indent     string // "" for one line
	EscapeHTML bool   // encoding/json's escaping of <, > and &
}

// Compact is one line per answer with HTML characters left as they are.
var Compact = Style{}

// Write sends v as the JSON answer with status; a nil v sends no body.
func (s Style) Write(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v == nil {
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(s.EscapeHTML)
	enc.SetIndent("", s.Indent)
	return enc.Encode(v)
}

// Error sends the error envelope with status.
func (s Style) Error(w http.ResponseWriter, status int, code, msg string) {
	_ = s.Write(w, status, Envelope{Error: code, Message: msg})
}
