package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/crackbox/crackbox/internal/httpjson"
)

var (
	// ErrRefused is a runner token the control plane does not accept.
	ErrRefused = errors.New("control plane refused the runner's token")
	// ErrBadRequest is a request the control plane refused as invalid: a
	// retry would be refused alike.
	ErrBadRequest = errors.New("control plane refused the request as invalid")
)

// Client is a runner's side of the fleet routes.
type Client struct {
	URL   string // the control plane's API, e.g. https://arizuko.internal:7480
	Token string
	// HTTP serves the short calls; tool sessions use their own connection
	// without a timeout. nil: a client with a 30 s timeout.
	HTTP *http.Client
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

func (c *Client) jsonClient() *httpjson.Client {
	return &httpjson.Client{Base: c.URL, Token: c.Token, HTTP: c.http()}
}

func (c *Client) request(ctx context.Context, method, path string, in any) (*http.Request, error) {
	return c.jsonClient().Request(ctx, method, path, in)
}

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	err := c.jsonClient().Do(ctx, method, path, in, out)
	var se *httpjson.StatusError
	if errors.As(err, &se) {
		return fleetErr(se)
	}
	return err
}

// statusErr turns an error answer into the fleet's sentinels.
func statusErr(path string, resp *http.Response) error {
	return fleetErr((&httpjson.Client{Limit: 64 << 10}).ReadError("", path, resp))
}

func fleetErr(se *httpjson.StatusError) error {
	msg := fmt.Sprintf("%s: %s: %s", se.Path, se.Status, se.Envelope.Message)
	switch se.Code {
	case http.StatusUnauthorized:
		return fmt.Errorf("%s: %w", msg, ErrRefused)
	case http.StatusConflict:
		return fmt.Errorf("%s: %w", msg, ErrStale)
	case http.StatusForbidden:
		return fmt.Errorf("%s: %w", msg, ErrNotHolder)
	case http.StatusBadRequest:
		return fmt.Errorf("%s: %w", msg, ErrBadRequest)
	}
	return errors.New(msg)
}

// Whoami checks the token and returns the runner name it stands for.
func (c *Client) Whoami(ctx context.Context) (Whoami, error) {
	var w Whoami
	err := c.call(ctx, http.MethodGet, PathWhoami, nil, &w)
	return w, err
}

// Claim fetches the job of a dispatch whose lease the runner holds.
func (c *Client) Claim(ctx context.Context, cl Claim) (Work, error) {
	var w Work
	err := c.call(ctx, http.MethodPost, PathClaim, cl, &w)
	return w, err
}

// Report sends an attempt's outcome.
func (c *Client) Report(ctx context.Context, o Outcome) error {
	_, err := c.ReportAck(ctx, o)
	return err
}

// ReportAck sends an attempt's outcome and returns what the control plane
// committed with it.
func (c *Client) ReportAck(ctx context.Context, o Outcome) (OutcomeAck, error) {
	var ack OutcomeAck
	err := c.call(ctx, http.MethodPost, PathOutcome, o, &ack)
	return ack, err
}

// Renew tells the control plane the holder of claim cl is alive.
func (c *Client) Renew(ctx context.Context, cl Claim) error {
	return c.call(ctx, http.MethodPost, PathRenew, cl, nil)
}

// Tunnel opens one tool session of claim cl: a stream the control plane
// serves with the folder's MCP tools.
func (c *Client) Tunnel(ctx context.Context, cl Claim) (io.ReadWriteCloser, error) {
	req, err := c.request(ctx, http.MethodPost, PathMCP, nil)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(cl)
	req.Header.Set(ClaimHeader, string(b))
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", upgrade)
	tr := http.DefaultTransport
	if c.HTTP != nil && c.HTTP.Transport != nil {
		tr = c.HTTP.Transport
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, statusErr(PathMCP, resp)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: switched protocols without a writable body", PathMCP)
	}
	return rwc, nil
}
