package email

import (
	"strings"

	"github.com/emersion/go-message/mail"
)

// Automatic says why a mail must never be answered ("" when it may be):
// an auto-reply, a bounce or other report, list or bulk mail, or mail from
// the agent's own address. Answering any of them can start a loop between
// two machines (RFC 3834).
func Automatic(h mail.Header, own string) string {
	if v := strings.ToLower(strings.TrimSpace(h.Get("Auto-Submitted"))); v != "" && v != "no" {
		return "Auto-Submitted: " + v
	}
	switch v := strings.ToLower(strings.TrimSpace(h.Get("Precedence"))); v {
	case "bulk", "junk", "list", "auto_reply":
		return "Precedence: " + v
	}
	for _, k := range []string{"X-Autoreply", "X-Autorespond", "List-Id", "List-Unsubscribe", "Feedback-Type"} {
		if h.Has(k) {
			return k + " header"
		}
	}
	if v := strings.TrimSpace(h.Get("X-Auto-Response-Suppress")); strings.Contains(strings.ToLower(v), "all") || strings.Contains(strings.ToLower(v), "oof") {
		return "X-Auto-Response-Suppress: " + v
	}
	if rp := strings.TrimSpace(h.Get("Return-Path")); rp == "<>" {
		return "null envelope sender (a bounce)"
	}
	if t, _, err := h.ContentType(); err == nil && t == "multipart/report" {
		return "Content-Type: multipart/report (a delivery or read report)"
	}
	from, _ := h.AddressList("From")
	for _, a := range from {
		local, _, _ := strings.Cut(strings.ToLower(a.Address), "@")
		switch {
		case local == "mailer-daemon" || local == "postmaster":
			return "sender " + a.Address + " is a mail system"
		case strings.EqualFold(a.Address, own):
			return "sender is the agent's own address"
		}
	}
	return ""
}
