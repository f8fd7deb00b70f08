package email

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/crackbox/crackbox/pkg/arizuko/delivery"
)

// Handler is the channel's side of the adapter protocol: the daemon POSTs
// each outbound message of platform email to <callback>/send, where the
// callback's path is /<secret>, so no other local process can have the
// channel send mail. A 2xx answer marks the message sent; anything else
// is retried by the daemon. Typing hints are taken and dropped, and an
// edit is refused for good (410).
func (c *Channel) Handler(secret string) http.Handler {
	prefix := "/" + secret + "/"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if r.Method != http.MethodPost || len(path) < len(prefix) || subtle.ConstantTimeCompare([]byte(path[:len(prefix)]), []byte(prefix)) != 1 {
			http.NotFound(w, r)
			return
		}
		switch path[len(prefix):] {
		case "send":
		case "typing":
			// Mail has no typing indicator; the hint is taken and dropped.
			w.WriteHeader(http.StatusNoContent)
			return
		case "edit":
			// A sent mail cannot be changed: Gone, so the daemon stops trying.
			http.Error(w, "a sent mail cannot be edited", http.StatusGone)
			return
		default:
			http.NotFound(w, r)
			return
		}
		var p delivery.Payload
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&p); err != nil {
			http.Error(w, "malformed payload", http.StatusBadRequest)
			return
		}
		if !strings.HasPrefix(p.ChatJID, Platform+":") {
			http.Error(w, "not an email chat: "+p.ChatJID, http.StatusNotFound)
			return
		}
		err := c.Send(r.Context(), p.ID, p.ChatJID, p.Text, p.ReplyTo)
		switch {
		case err == nil:
			w.WriteHeader(http.StatusNoContent)
		case errors.Is(err, ErrNoThread):
			http.Error(w, err.Error(), http.StatusNotFound)
		default:
			c.log.Warn("mail not sent", "id", p.ID, "chat", p.ChatJID, "err", err)
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
	})
}
