package service

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"

	"github.com/crackbox/crackbox/internal/pgtest"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// The PostgreSQL tests' databases live on one throwaway cluster per test run.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// On PostgreSQL secrets are sealed as on SQLite: the database holds ciphertext bound
// to its row, so a copy into another folder's row does not open, and a ring that
// does not open the store is refused.
func TestSecretsSealedInPostgres(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	k1, k2 := ringT(t, secrets.GenerateKey()), ringT(t, secrets.GenerateKey())
	open := func(r *secrets.Ring, create bool) (*Local, error) {
		l, err := Open(ctx, Options{DataDir: t.TempDir(), Store: url, Create: create, Ring: r})
		if err == nil {
			t.Cleanup(func() { l.Close() })
		}
		return l, err
	}
	if _, err := open(k1, false); Code(err) != CodeNotFound {
		t.Fatalf("open of an uninitialized database = %v, want not found", err)
	}
	l, err := open(k1, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckKey(ctx); err != nil {
		t.Fatal(err)
	}
	admin := WithPrincipal(ctx, AdminPrincipal)
	mustFolders(t, l, admin, "a", "b")
	for _, s := range []SecretIn{{Scope: "folder:a", Name: "K", Value: "value-of-a"}, {Scope: "folder:b", Name: "K", Value: "value-of-b"}} {
		if err := l.SetSecret(admin, s); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := l.FolderSecrets(ctx, "a"); err != nil || got["K"] != "value-of-a" {
		t.Fatalf("a's secrets %v %v", got, err)
	}

	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var raw []byte
	if err := db.QueryRow(`SELECT value FROM secrets WHERE scope_id = 'a'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("value-of-a")) {
		t.Fatal("the database holds the secret in plaintext")
	}
	// Someone with write access to the database copies a's ciphertext into b's row.
	if _, err := db.Exec(`UPDATE secrets SET value = $1 WHERE scope_id = 'b'`, raw); err != nil {
		t.Fatal(err)
	}
	if _, err := l.FolderSecrets(ctx, "b"); !errors.Is(err, secrets.ErrOpen) {
		t.Fatalf("moved ciphertext opened: %v", err)
	}

	l2, err := open(k2, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.CheckKey(ctx); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("wrong key: %v", err)
	}
}

// A --store value that is not a PostgreSQL URL is invalid input, an unreachable
// server is unavailable: callers get the codes they already branch on.
func TestStoreURLErrorCodes(t *testing.T) {
	ctx := context.Background()
	for url, want := range map[string]string{
		"mysql://db/arizuko":                           CodeInvalid,
		"postgres://u@127.0.0.1:1/x?connect_timeout=5": CodeUnavailable,
	} {
		_, err := Open(ctx, Options{DataDir: t.TempDir(), Store: url})
		if Code(err) != want {
			t.Errorf("Open(--store %s) = %v (code %s), want %s", url, err, Code(err), want)
		}
	}
}
