package nettest

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ModelAPI stands in for the Anthropic Messages API over real TLS: it answers
// POST /v1/messages, streaming (server-sent events) or not, as Answer decides,
// and keeps what each request carried, so a test runs a real agent such as
// Claude Code against it without the internet.
type ModelAPI struct {
	Cert   Cert
	CAFile string // the CA as a PEM file, e.g. for [proxy] upstream_ca
	Addr   string // 127.0.0.1:port
	// Answer picks the reply to a request; nil answers with text only.
	Answer func(r ModelRequest) ModelReply

	mu   sync.Mutex
	seen []ModelRequest
}

// ModelRequest is what the stand-in kept of one request.
type ModelRequest struct {
	Path   string
	APIKey string   // the x-api-key header
	Tools  []string // the names of the tools the model was offered
	Stream bool
	Text   string // every text block of every message, joined
	// ToolResult is set when the last message returns a tool's result.
	ToolResult bool
}

// ModelReply is one answer: text, or a call of Tool with Input.
type ModelReply struct {
	Text  string
	Tool  string
	Input map[string]any
}

// NewModelAPI starts the stand-in on loopback with a leaf for names, closed at
// cleanup.
func NewModelAPI(t testing.TB, names ...string) *ModelAPI {
	t.Helper()
	m := &ModelAPI{Cert: NewCert(t, "model stand-in CA", names...)}
	m.CAFile = filepath.Join(t.TempDir(), "model-ca.pem")
	if err := os.WriteFile(m.CAFile, m.Cert.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	ln := Listen(t, "127.0.0.1:0")
	m.Addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(m.serve)}
	tl := tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{m.Cert.Leaf}, NextProtos: []string{"http/1.1"}})
	go srv.Serve(tl)
	t.Cleanup(func() { srv.Close() })
	return m
}

// Port is the port the stand-in listens on.
func (m *ModelAPI) Port() string {
	_, p, _ := net.SplitHostPort(m.Addr)
	return p
}

// Requests returns what every request so far carried.
func (m *ModelAPI) Requests() []ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ModelRequest(nil), m.seen...)
}

type modelBody struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type modelBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (m *ModelAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"not here"}}`, http.StatusNotFound)
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	var body modelBody
	if err == nil {
		err = json.Unmarshal(b, &body)
	}
	if err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad body"}}`, http.StatusBadRequest)
		return
	}
	req := ModelRequest{Path: r.URL.Path, APIKey: r.Header.Get("x-api-key"), Stream: body.Stream}
	for _, t := range body.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	var text []string
	for i, msg := range body.Messages {
		var s string
		if json.Unmarshal(msg.Content, &s) == nil {
			text = append(text, s)
			continue
		}
		var blocks []modelBlock
		json.Unmarshal(msg.Content, &blocks)
		for _, bl := range blocks {
			text = append(text, bl.Text)
			if bl.Type == "tool_result" && i == len(body.Messages)-1 {
				req.ToolResult = true
			}
		}
	}
	req.Text = strings.Join(text, "\n")
	m.mu.Lock()
	m.seen = append(m.seen, req)
	m.mu.Unlock()

	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		io.WriteString(w, `{"input_tokens":10}`)
		return
	}
	reply := ModelReply{Text: "ok"}
	if m.Answer != nil && !req.ToolResult {
		reply = m.Answer(req)
	}
	content := map[string]any{"type": "text", "text": reply.Text}
	stop := "end_turn"
	if reply.Tool != "" {
		content = map[string]any{"type": "tool_use", "id": "toolu_standin01", "name": reply.Tool, "input": reply.Input}
		stop = "tool_use"
	}
	msg := map[string]any{"id": "msg_standin01", "type": "message", "role": "assistant", "model": body.Model,
		"content": []any{content}, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 10, "output_tokens": 5}}
	if !body.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(msg)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	event := func(name string, v any) {
		d, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, d)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	event("message_start", map[string]any{"type": "message_start", "message": start})
	var delta map[string]any
	if reply.Tool != "" {
		in, _ := json.Marshal(reply.Input)
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_standin01", "name": reply.Tool, "input": map[string]any{}}})
		delta = map[string]any{"type": "input_json_delta", "partial_json": string(in)}
	} else {
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		delta = map[string]any{"type": "text_delta", "text": reply.Text}
	}
	event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": delta})
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": 5}})
	event("message_stop", map[string]any{"type": "message_stop"})
}
