package email

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// saveFiles writes a mail's attachments under mail/<hash of chat and
// Message-ID>/ in the folder's
// home and returns the lines that tell the agent where they are. The home
// is opened as an os.Root, so a symlink the agent left there cannot send
// a write outside it; a file over the limit is named but not written.
func (c *Channel) saveFiles(folder, chat string, m Inbound) string {
	lines := []string{"Attachments:"}
	home, err := c.o.Home(folder)
	if err != nil {
		c.log.Error("attachments not saved", "folder", folder, "err", err)
		return "Attachments: not saved (the folder's home is unavailable)"
	}
	root, err := os.OpenRoot(home)
	if err != nil {
		c.log.Error("attachments not saved", "folder", folder, "err", err)
		return "Attachments: not saved (the folder's home is unavailable)"
	}
	defer root.Close()
	dir := path.Join("mail", key(chat + "\n" + m.MessageID)[:16])
	if err := root.MkdirAll(dir, 0o750); err != nil {
		c.log.Error("attachments not saved", "folder", folder, "dir", dir, "err", err)
		return "Attachments: not saved (" + err.Error() + ")"
	}
	used := map[string]bool{}
	for i, f := range m.Files {
		name := safeName(f.Name, i)
		for n := 2; used[name]; n++ {
			name = fmt.Sprintf("%d-%s", n, safeName(f.Name, i))
		}
		used[name] = true
		p := path.Join(dir, name)
		if f.Data == nil {
			lines = append(lines, fmt.Sprintf("- %s (%d bytes): not saved, over the %d byte limit", f.Name, f.Size, c.cfg.MaxAttachment))
			continue
		}
		if err := writeNew(root, p, f.Data); err != nil {
			c.log.Error("attachment not saved", "folder", folder, "file", p, "err", err)
			lines = append(lines, fmt.Sprintf("- %s: not saved (%v)", f.Name, err))
			continue
		}
		lines = append(lines, fmt.Sprintf("- %s (%d bytes) saved as %s in your home", f.Name, f.Size, p))
	}
	return strings.Join(lines, "\n")
}

// writeNew creates p with data; a file already there (the same mail read
// again after a restart) is left as it is.
func writeNew(root *os.Root, p string, data []byte) error {
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// safeName keeps a file name's letters, digits, dots, dashes and
// underscores, never a path or a hidden file.
func safeName(name string, i int) string {
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.TrimLeft(b.String(), ".")
	if len(s) > 100 {
		s = s[len(s)-100:]
	}
	if s == "" {
		s = fmt.Sprintf("attachment-%d", i+1)
	}
	return s
}
