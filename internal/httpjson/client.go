package httpjson

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// MaxAnswer is how much of an answer a Client reads when Limit is 0.
const MaxAnswer = 64 << 20

// Client sends JSON requests with a bearer token.
type Client struct {
	Base  string       // e.g. http://127.0.0.1:7480; a trailing slash is ignored
	Token string       // "" sends no Authorization header
	HTTP  *http.Client // nil: http.DefaultClient
	Limit int64        // bytes read of a JSON or error answer; 0: MaxAnswer
}

// StatusError is an answer outside 2xx. Envelope is empty when the body
// was not the error envelope; Body then holds it, trimmed.
type StatusError struct {
	Method, Path string
	Code         int
	Status       string // e.g. "404 Not Found"
	Envelope     Envelope
	Body         []byte
}

func (e *StatusError) Error() string {
	msg := e.Envelope.Message
	if e.Envelope.Error == "" {
		msg = string(e.Body)
	}
	return fmt.Sprintf("%s %s: %s: %s", e.Method, e.Path, e.Status, msg)
}

// DecodeError is a 2xx answer that did not decode into the caller's value.
type DecodeError struct{ Err error }

func (e *DecodeError) Error() string { return e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// Request builds a request for path (with its query, if any). body is sent
// as JSON unless it is an io.Reader, which is sent as it is.
func (c *Client) Request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	isJSON := false
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd, isJSON = bytes.NewReader(j), true
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, rd)
	if err != nil {
		return nil, err
	}
	if isJSON {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// Do sends body and decodes a 2xx answer into out: nil discards it, a
// *bytes.Buffer takes the raw bytes. A transport failure is the
// http.Client's error, an answer outside 2xx a *StatusError, an answer
// that does not decode a *DecodeError.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	req, err := c.Request(ctx, method, path, body)
	if err != nil {
		return err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return c.ReadError(method, path, resp)
	}
	if buf, ok := out.(*bytes.Buffer); ok {
		_, err = io.Copy(buf, resp.Body)
		return err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.limit()))
	if err != nil {
		return err
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &DecodeError{err}
	}
	return nil
}

// ReadError reads an error answer into a *StatusError; its Path is path
// without the query.
func (c *Client) ReadError(method, path string, resp *http.Response) *StatusError {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, c.limit()))
	path, _, _ = strings.Cut(path, "?")
	e := &StatusError{Method: method, Path: path, Code: resp.StatusCode, Status: resp.Status}
	if json.Unmarshal(data, &e.Envelope) != nil || e.Envelope.Error == "" {
		e.Envelope = Envelope{}
		e.Body = bytes.TrimSpace(data)
	}
	return e
}

func (c *Client) limit() int64 {
	if c.Limit > 0 {
		return c.Limit
	}
	return MaxAnswer
}
