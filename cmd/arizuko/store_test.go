package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/pgtest"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// `arizuko serve --store postgres://…` keeps every message in PostgreSQL: one posted
// through the API is a row there, nothing goes to the data dir's SQLite file, and
// the CLI and a restarted daemon read it back. A second daemon on the same database
// is refused.
func TestServeOnPostgres(t *testing.T) {
	url := pgtest.Start(t).NewDB(t)
	key := "ARIZUKO_SECRETS_KEY=" + secrets.GenerateKey()
	data, e := initData(t, key, "ARIZUKO_STORE="+url) // init creates the schema and the admin's role
	mustAz(t, e, "folder", "add", "corp")
	serveEnv := env(t, data, key) // the daemon gets the store from --store alone
	d := startDaemon(t, serveEnv, data, "--store", url)
	_, eB := initData(t, key)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a daemon that starts is killed
	defer cancel()
	second := exec.CommandContext(ctx, binary, "serve", "--listen", "127.0.0.1:0", "--store", url)
	second.Env = eB
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), "in use by another arizuko serve") {
		t.Fatalf("second daemon on the store: %v\n%s", err, out)
	}
	token := strings.TrimSpace(readFile(t, filepath.Join(data, "token")))

	body := `{"chat_jid":"web:corp","sender":"alice","text":"kept in postgres"}`
	req, _ := http.NewRequest("POST", d.url+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var in service.Ingest
	json.NewDecoder(resp.Body).Decode(&in)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || in.Message.ID == 0 {
		t.Fatalf("post: status %d %+v\n%s", resp.StatusCode, in, d.logs)
	}

	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var text, folder string
	if err := db.QueryRow(`SELECT text, folder FROM messages WHERE id = $1`, in.Message.ID).Scan(&text, &folder); err != nil {
		t.Fatalf("message %d not in postgres: %v", in.Message.ID, err)
	}
	if text != "kept in postgres" {
		t.Fatalf("stored text %q", text)
	}
	if _, err := os.Stat(filepath.Join(data, service.DBFile)); !os.IsNotExist(err) {
		t.Fatalf("a SQLite file appeared in the data dir: %v", err)
	}

	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()
	out := mustAz(t, e, "--json", "messages", "web:corp")
	if !strings.Contains(out, "kept in postgres") {
		t.Fatalf("CLI on the store after a crash: %s", out)
	}
	d2 := startDaemon(t, serveEnv, data, "--store", url)
	out = mustAz(t, e, "--json", "messages", "web:corp")
	if !strings.Contains(out, "kept in postgres") {
		t.Fatalf("restarted daemon: %s\n%s", out, d2.logs)
	}
	d2.cmd.Process.Signal(syscall.SIGTERM)
	d2.cmd.Wait()
}

// A --store the daemon cannot use stops it at start with the input and the fix named,
// and never shows the password.
func TestServeRefusesBadStore(t *testing.T) {
	data, e := initData(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	empty := pgtest.Start(t).NewDB(t)
	for _, c := range []struct {
		name, store string
		says        []string
	}{
		{"unknown scheme", "mysql://u:s3cret@db/arizuko", []string{`"mysql"`, "postgres://user@host"}},
		{"a file path", filepath.Join(data, "other.db"), []string{"other.db", "postgres://", "data dir"}},
		{"unreachable", fmt.Sprintf("postgres://u:s3cret@%s/arizuko?connect_timeout=5", closed), []string{closed, "PostgreSQL runs there"}},
		{"not initialized", empty, []string{"no arizuko schema", "arizuko init --store"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errs, err := az(t, e, "serve", "--listen", "127.0.0.1:0", "--store", c.store)
			if err == nil {
				t.Fatalf("serve --store %s: %v\n%s", c.store, err, errs)
			}
			for _, w := range c.says {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not say %q", errs, w)
				}
			}
			if strings.Contains(errs, "s3cret") {
				t.Errorf("stderr shows the password: %s", errs)
			}
		})
	}
}
