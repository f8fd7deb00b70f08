package httpjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// ErrTrailing is a body with more than the one JSON value after it.
var ErrTrailing = errors.New("trailing data after the JSON object")

// ReadBody reads r's body, at most max bytes; a longer body fails with
// an error matching *http.MaxBytesError.
func ReadBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, max))
}

// DecodeBytes decodes exactly one JSON value from b into v, refusing
// unknown fields. An empty body fails with io.EOF, anything after the value
// but white space with ErrTrailing; other errors are encoding/json's.
func DecodeBytes(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		return ErrTrailing
	}
	return nil
}

// Decode is ReadBody then DecodeBytes.
func Decode(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	b, err := ReadBody(w, r, max)
	if err != nil {
		return err
	}
	return DecodeBytes(b, v)
}
