package natstest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// StartNKey runs one JetStream node that admits only one nkey user, for tests of
// credentials. It returns the node's URL, the user's seed file and the seed file
// of another key the node does not know.
func StartNKey(t testing.TB) (url, seed, wrongSeed string) {
	t.Helper()
	dir := t.TempDir()
	seed, pub := writeSeed(t, filepath.Join(dir, "user.nk"))
	wrongSeed, _ = writeSeed(t, filepath.Join(dir, "wrong.nk"))
	port := freePorts(t, "127.0.0.1", 1, nil)[0]
	s, err := server.NewServer(&server.Options{
		ServerName: "nkey", Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true, Nkeys: []*server.NkeyUser{{Nkey: pub}},
	})
	if err != nil {
		t.Fatalf("natstest: nkey node: %v", err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(30 * time.Second) {
		t.Fatalf("natstest: nkey node not ready for connections")
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", port), seed, wrongSeed
}

func writeSeed(t testing.TB, path string) (file, pub string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := kp.Seed()
	pub, _ = kp.PublicKey()
	if err := os.WriteFile(path, s, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, pub
}
