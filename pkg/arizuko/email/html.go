package email

import (
	"strings"

	"golang.org/x/net/html"
)

// HTMLText turns an HTML mail body into plain text: the text the reader
// sees, a line break per block, links as "text (url)", and nothing of
// scripts, styles or the head.
func HTMLText(s string) string {
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		return s
	}
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.TextNode:
			if t := strings.Join(strings.Fields(n.Data), " "); t != "" {
				if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") && (n.Data[0] == ' ' || n.Data[0] == '\n' || n.Data[0] == '\t') {
					b.WriteByte(' ')
				}
				b.WriteString(t)
				if last := n.Data[len(n.Data)-1]; last == ' ' || last == '\n' || last == '\t' {
					b.WriteByte(' ')
				}
			}
			return
		case html.ElementNode:
			switch n.Data {
			case "script", "style", "head", "title", "noscript", "template":
				return
			case "br":
				newline(&b)
				return
			case "li":
				newline(&b)
				b.WriteString("- ")
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if n.Type == html.ElementNode {
			switch n.Data {
			case "a":
				if href := attr(n, "href"); strings.HasPrefix(href, "http") && !strings.Contains(b.String()[max(0, b.Len()-len(href)-2):], href) {
					b.WriteString(" (" + href + ")")
				}
			case "p", "div", "tr", "table", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "pre", "hr":
				newline(&b)
			}
		}
	}
	walk(doc)
	lines := strings.Split(b.String(), "\n")
	out := lines[:0]
	for _, l := range lines {
		out = append(out, strings.TrimSpace(l))
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

func newline(b *strings.Builder) {
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}
