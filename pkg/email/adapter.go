package email

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/crackbox/crackbox/pkg/delivery"
)

// Handler is the channel's side of the adapter protocol: the daemon POSTs
// each outbound message of platform email to <callback>/send, where the
// callback's path is /<secret>, so no other local process can have the
// channel send mail. A 2xx answer marks the message sent; anything else
// is retried by the daemon.
func (c *Channel) Handler(secret string) http.Handler {
	want := "/" + secret + "/send"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || subtle.ConstantTimeCompare([]byte(r.URL.Path), []byte(want)) != 1 {
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
