package email

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// state is the channel's own records in its state dir, each a small JSON
// file written whole (temp file, then rename), so a crash leaves the old
// record or the new one:
//
//	cursor.json        the mailbox's UIDVALIDITY and the last UID handled
//	mail/<hash>.json   a posted mail's thread (by chat and Message-ID): who to answer, the subject, its references
//	chat/<hash>.json   a chat's newest mail, for replies that name no mail
//	sent/<id>.json     the Message-ID an outbound message went out with
type state struct{ dir string }

// cursor is where the mailbox was left.
type cursor struct {
	UIDValidity uint32 `json:"uid_validity"`
	LastUID     uint32 `json:"last_uid"`
}

// thread is what a reply to one mail needs.
type thread struct {
	MessageID  string   `json:"message_id"`
	From       string   `json:"from"`
	Subject    string   `json:"subject"`
	References []string `json:"references"`
	Chat       string   `json:"chat"`
}

func openState(dir string) (*state, error) {
	for _, d := range []string{"", "mail", "chat", "sent"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	return &state{dir: dir}, nil
}

func key(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

func (s *state) cursor() (cursor, error) {
	var c cursor
	_, err := s.read("cursor.json", &c)
	return c, err
}

func (s *state) setCursor(c cursor) error { return s.write("cursor.json", c) }

// thread is the record of one mail in one chat: a Message-ID is the
// sender's to choose, so it names a record only together with the chat.
func (s *state) thread(chat, messageID string) (thread, bool, error) {
	var t thread
	ok, err := s.read(filepath.Join("mail", key(chat+"\n"+messageID)+".json"), &t)
	return t, ok, err
}

func (s *state) chatThread(chat string) (thread, bool, error) {
	var id string
	if ok, err := s.read(filepath.Join("chat", key(chat)+".json"), &id); !ok || err != nil {
		return thread{}, false, err
	}
	return s.thread(chat, id)
}

func (s *state) putThread(t thread) error {
	if err := s.write(filepath.Join("mail", key(t.Chat+"\n"+t.MessageID)+".json"), t); err != nil {
		return err
	}
	return s.write(filepath.Join("chat", key(t.Chat)+".json"), t.MessageID)
}

func (s *state) sent(id int64) (string, bool, error) {
	var mid string
	ok, err := s.read(filepath.Join("sent", jsonName(id)), &mid)
	return mid, ok, err
}

func (s *state) putSent(id int64, messageID string) error {
	return s.write(filepath.Join("sent", jsonName(id)), messageID)
}

func jsonName(id int64) string {
	b, _ := json.Marshal(id)
	return string(b) + ".json"
}

func (s *state) read(name string, v any) (bool, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(b, v)
}

func (s *state) write(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	p := filepath.Join(s.dir, name)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
