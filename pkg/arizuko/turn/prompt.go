package turn

import (
	"fmt"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// Observed is one observed folder's recent messages.
type Observed struct {
	Folder   string
	Messages []store.Message
}

var esc = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func line(m store.Message) string {
	who := m.Sender
	if m.Direction == "out" {
		who = "agent(" + m.Folder + ")"
	}
	return fmt.Sprintf("<message id=\"%d\" chat=\"%s\" sender=\"%s\" time=\"%s\">%s</message>\n",
		m.ID, esc.Replace(m.ChatJID), esc.Replace(who), time.UnixMilli(m.CreatedAt).UTC().Format(time.RFC3339), esc.Replace(m.Text))
}

// BuildPrompt renders the turn's messages after the observed context. The
// observed part keeps the newest lines that fit maxChars in total.
func BuildPrompt(t store.Turn, msgs []store.Message, observed []Observed, maxChars int) string {
	var b strings.Builder
	budget := maxChars
	for _, o := range observed {
		var lines []string
		for i := len(o.Messages) - 1; i >= 0; i-- {
			l := line(o.Messages[i])
			if len(l) > budget {
				break
			}
			budget -= len(l)
			lines = append(lines, l)
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(&b, "<observed folder=\"%s\">\n", esc.Replace(o.Folder))
		for i := len(lines) - 1; i >= 0; i-- {
			b.WriteString(lines[i])
		}
		b.WriteString("</observed>\n")
	}
	fmt.Fprintf(&b, "<messages folder=\"%s\" topic=\"%s\">\n", esc.Replace(t.Folder), esc.Replace(t.Topic))
	for _, m := range msgs {
		b.WriteString(line(m))
	}
	b.WriteString("</messages>\n")
	return b.String()
}
