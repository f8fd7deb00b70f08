package email

import "testing"

func TestHTMLText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"<p>Hello <b>there</b></p><p>second</p>", "Hello there\nsecond"},
		{"<html><head><title>t</title><style>p{}</style></head><body>a<br>b<script>x()</script></body></html>", "a\nb"},
		{`<ul><li>one</li><li>two</li></ul>`, "- one\n- two"},
		{`see <a href="https://a.test/x">the page</a>.`, "see the page (https://a.test/x)."},
		{"&lt;not a tag&gt; &amp; more", "<not a tag> & more"},
	} {
		if got := HTMLText(c.in); got != c.want {
			t.Errorf("HTMLText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
