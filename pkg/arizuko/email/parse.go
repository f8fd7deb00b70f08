package email

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"

	_ "github.com/emersion/go-message/charset" // decodes the legacy charsets mail still comes in
	"github.com/emersion/go-message/mail"
)

// Inbound is one parsed mail.
type Inbound struct {
	Header     mail.Header
	MessageID  string   // without angle brackets; a hash of the mail when it has none
	InReplyTo  string   // the first In-Reply-To id
	References []string // oldest first
	Subject    string
	Text       string // the plain text, or the HTML part turned into text
	Files      []File
}

// File is one attachment; Data is nil when it was over the limit.
type File struct {
	Name string
	Size int64
	Data []byte
}

// Root is the id of the thread's first mail: the first References entry,
// else In-Reply-To, else the mail's own.
func (m Inbound) Root() string {
	if len(m.References) > 0 {
		return m.References[0]
	}
	return firstNonEmpty(m.InReplyTo, m.MessageID)
}

// Parse reads a mail, keeping attachments up to maxFile bytes each.
func Parse(raw []byte, maxFile int64) (Inbound, error) {
	r, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil && r == nil {
		return Inbound{}, fmt.Errorf("parse mail: %w", err)
	}
	m := Inbound{Header: r.Header}
	if m.MessageID, _ = r.Header.MessageID(); m.MessageID == "" {
		sum := sha256.Sum256(raw)
		m.MessageID = "sha256-" + hex.EncodeToString(sum[:16]) + "@arizuko.invalid"
	}
	if ids, _ := r.Header.MsgIDList("In-Reply-To"); len(ids) > 0 {
		m.InReplyTo = ids[0]
	}
	m.References, _ = r.Header.MsgIDList("References")
	m.Subject, _ = r.Header.Subject()
	var plain, html []string
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A broken part ends the walk; what was read stays.
			break
		}
		switch h := p.Header.(type) {
		case *mail.InlineHeader:
			t, _, _ := h.ContentType()
			switch t {
			case "text/plain", "":
				b, _ := io.ReadAll(io.LimitReader(p.Body, maxTextRead))
				plain = append(plain, string(b))
			case "text/html":
				b, _ := io.ReadAll(io.LimitReader(p.Body, maxTextRead))
				html = append(html, string(b))
			default:
				m.Files = append(m.Files, readFile(p.Body, inlineName(h, len(m.Files)), maxFile))
			}
		case *mail.AttachmentHeader:
			name, _ := h.Filename()
			m.Files = append(m.Files, readFile(p.Body, firstNonEmpty(name, fmt.Sprintf("attachment-%d", len(m.Files)+1)), maxFile))
		}
	}
	switch {
	case len(plain) > 0:
		m.Text = strings.Join(plain, "\n")
	case len(html) > 0:
		for _, h := range html {
			m.Text += HTMLText(h)
		}
	}
	m.Text = strings.TrimSpace(strings.ReplaceAll(m.Text, "\r\n", "\n"))
	return m, nil
}

// maxTextRead bounds a text part read: the daemon takes 64 KiB of text.
const maxTextRead = 1 << 20

func readFile(r io.Reader, name string, max int64) File {
	b, _ := io.ReadAll(io.LimitReader(r, max+1))
	if int64(len(b)) > max {
		n, _ := io.Copy(io.Discard, r)
		return File{Name: name, Size: int64(len(b)) + n}
	}
	return File{Name: name, Size: int64(len(b)), Data: b}
}

// inlineName names an inline part that is not text (an image in the body).
func inlineName(h *mail.InlineHeader, i int) string {
	if _, params, err := h.ContentDisposition(); err == nil && params["filename"] != "" {
		return params["filename"]
	}
	t, params, _ := h.ContentType()
	if params["name"] != "" {
		return params["name"]
	}
	ext := ""
	if exts, _ := mime.ExtensionsByType(t); len(exts) > 0 {
		ext = exts[0]
	}
	return fmt.Sprintf("part-%d%s", i+1, ext)
}
