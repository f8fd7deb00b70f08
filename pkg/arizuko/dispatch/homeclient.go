package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/crackbox/crackbox/pkg/arizuko/home"
)

// HomeLatest fetches the claimed turn's latest home; the manifest is left
// out when have is its hash.
func (c *Client) HomeLatest(ctx context.Context, cl Claim, have string) (HomeLatest, error) {
	var out HomeLatest
	err := c.call(ctx, http.MethodPost, PathHomeLatest, HomeRequest{Claim: cl, Have: have}, &out)
	return out, err
}

// HomeChunks fetches chunks of the claimed turn's home, handing each to put.
func (c *Client) HomeChunks(ctx context.Context, cl Claim, hashes []string, put func(h string, b []byte) error) error {
	for len(hashes) > 0 {
		n := min(len(hashes), maxChunksPerFetch)
		if err := c.homeChunks(ctx, cl, hashes[:n], put); err != nil {
			return err
		}
		hashes = hashes[n:]
	}
	return nil
}

func (c *Client) homeChunks(ctx context.Context, cl Claim, hashes []string, put func(string, []byte) error) error {
	req, err := c.request(ctx, http.MethodPost, PathHomeChunks, ChunkRequest{Claim: cl, Hashes: hashes})
	if err != nil {
		return err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusErr(PathHomeChunks, resp)
	}
	for _, h := range hashes {
		b, err := readFrame(resp.Body, home.ChunkSize)
		if err != nil {
			return fmt.Errorf("%s: chunk %s: %w", PathHomeChunks, h, err)
		}
		if home.Sum(b) != h {
			return fmt.Errorf("%s: chunk %s: content does not match its name", PathHomeChunks, h)
		}
		if err := put(h, b); err != nil {
			return err
		}
	}
	return nil
}

// HomeUpload sends chunks for the claimed turn's commit.
func (c *Client) HomeUpload(ctx context.Context, cl Claim, chunks [][]byte) error {
	var body bytes.Buffer
	flush := func() error {
		if body.Len() == 0 {
			return nil
		}
		err := c.raw(ctx, PathHomeUpload, cl, &body, nil)
		body.Reset()
		return err
	}
	for _, b := range chunks {
		if body.Len()+len(b)+4 > maxUploadBytes/2 {
			if err := flush(); err != nil {
				return err
			}
		}
		writeFrame(&body, b)
	}
	return flush()
}

// HomeManifest sends the manifest the claimed turn's home ended with and
// returns its hash, which the outcome then names.
func (c *Client) HomeManifest(ctx context.Context, cl Claim, m home.Manifest) (string, error) {
	var out struct {
		Hash string `json:"hash"`
	}
	err := c.raw(ctx, PathHomeManifest, cl, bytes.NewReader(m.Encode()), &out)
	return out.Hash, err
}

// raw posts body with the claim in its header.
func (c *Client) raw(ctx context.Context, path string, cl Claim, body io.Reader, out any) error {
	req, err := c.request(ctx, http.MethodPost, path, nil)
	if err != nil {
		return err
	}
	req.Body = io.NopCloser(body)
	b, _ := json.Marshal(cl)
	req.Header.Set(ClaimHeader, string(b))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.http().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return statusErr(path, resp)
	}
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
