package httpjson

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type item struct {
	Name string `json:"name"`
}

// newServer answers POST /items with the item it decoded, behind a bearer
// check, and every failure as the envelope.
func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	sum := Sum("right")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /items", func(w http.ResponseWriter, r *http.Request) {
		tok, ok := Bearer(r)
		if _, match := Matches(tok, sum[:]); !ok || !match {
			Compact.Challenge(w, "test", "unauthorized", "wrong token")
			return
		}
		var it item
		if err := Decode(w, r, 64, &it); err != nil {
			Compact.Error(w, http.StatusBadRequest, "invalid", err.Error())
			return
		}
		_ = Compact.Write(w, http.StatusCreated, it)
	})
	mux.HandleFunc("GET /plain", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not json", http.StatusTeapot)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestClientAgainstServer(t *testing.T) {
	srv := newServer(t)
	ctx := context.Background()
	tests := []struct {
		name, token, path string
		body              any
		status            int    // 0: success
		code, msg         string // envelope expected, or the plain body
	}{
		{name: "ok", token: "right", path: "/items", body: item{Name: "a<b"}},
		{name: "wrong token", token: "wrong", path: "/items", body: item{}, status: 401, code: "unauthorized", msg: "wrong token"},
		{name: "no token", path: "/items", body: item{}, status: 401, code: "unauthorized", msg: "wrong token"},
		{name: "unknown field", token: "right", path: "/items", body: map[string]string{"nme": "x"}, status: 400, code: "invalid", msg: `json: unknown field "nme"`},
		{name: "trailing", token: "right", path: "/items", body: strings.NewReader(`{"name":"a"} {}`), status: 400, code: "invalid", msg: ErrTrailing.Error()},
		{name: "stray bracket", token: "right", path: "/items", body: strings.NewReader(`{"name":"a"}]`), status: 400, code: "invalid", msg: ErrTrailing.Error()},
		{name: "empty", token: "right", path: "/items", body: strings.NewReader(``), status: 400, code: "invalid", msg: "EOF"},
		{name: "too large", token: "right", path: "/items", body: item{Name: strings.Repeat("x", 100)}, status: 400, code: "invalid", msg: "http: request body too large"},
		{name: "not an envelope", path: "/plain", status: 418, msg: "not json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Client{Base: srv.URL + "/", Token: tt.token}
			method := "POST"
			if tt.body == nil {
				method = "GET"
			}
			var out item
			err := c.Do(ctx, method, tt.path, tt.body, &out)
			if tt.status == 0 {
				if err != nil || out.Name != "a<b" {
					t.Fatalf("Do = %v, %+v; want the item back", err, out)
				}
				return
			}
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("Do = %v; want a *StatusError", err)
			}
			if se.Code != tt.status || se.Envelope.Error != tt.code {
				t.Fatalf("status %d code %q; want %d %q", se.Code, se.Envelope.Error, tt.status, tt.code)
			}
			got := se.Envelope.Message
			if tt.code == "" {
				got = string(se.Body)
			}
			if got != tt.msg {
				t.Fatalf("message %q; want %q", got, tt.msg)
			}
		})
	}
}

func TestWriteStyles(t *testing.T) {
	for _, tt := range []struct {
		style Style
		want  string
	}{
		{Compact, "{\"error\":\"x\",\"message\":\"<a>\"}\n"},
		{Style{Indent: "  ", EscapeHTML: true}, "{\n  \"error\": \"x\",\n  \"message\": \"\\u003ca\\u003e\"\n}\n"},
	} {
		rec := httptest.NewRecorder()
		tt.style.Error(rec, 409, "x", "<a>")
		if rec.Code != 409 || rec.Body.String() != tt.want || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%+v wrote %d %q", tt.style, rec.Code, rec.Body.String())
		}
	}
}

func TestDecodeErrorOnBadAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"name":`))
	}))
	defer srv.Close()
	var out item
	err := (&Client{Base: srv.URL}).Do(context.Background(), "GET", "/", nil, &out)
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("Do = %v; want a *DecodeError", err)
	}
}
