package servicetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// The fixture is a real data dir: folders land in SQLite, the agent in the
// folder's home, a keyed service stores secrets, and nothing outlives the test.
func TestFixture(t *testing.T) {
	var data string
	t.Run("env", func(t *testing.T) {
		e := New(t, Options{Keyed: true})
		data = e.Data
		e.AddFolder(t, "acme", "python3", "/home/node/agent.py")
		e.InstallAgent(t, "acme")
		fs, err := e.L.ListFolders(e.Admin)
		if err != nil || len(fs) != 1 || fs[0].Path != "acme" || len(fs[0].AgentCommand) != 2 {
			t.Fatalf("folders %+v %v", fs, err)
		}
		if _, err := os.Stat(filepath.Join(data, "homes", folder.HomeName("acme"), "agent.py")); err != nil {
			t.Fatal(err)
		}
		if err := e.L.SetSecret(e.Admin, service.SecretIn{Scope: "folder:acme", Name: "K", Value: "value-of-k"}); err != nil {
			t.Fatalf("keyed service refused a secret: %v", err)
		}
	})
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("data dir %s outlived the test: %v", data, err)
	}
	t.Run("keyless", func(t *testing.T) {
		e := New(t, Options{})
		e.AddFolder(t, "x")
		if err := e.L.SetSecret(e.Admin, service.SecretIn{Scope: "folder:x", Name: "K", Value: "value-of-k"}); err == nil {
			t.Fatal("a keyless service stored a secret")
		}
	})
}
