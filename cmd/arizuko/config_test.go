package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/config"
)

func TestExampleConfigDecodes(t *testing.T) {
	c := defaultConfig()
	if err := config.DecodeFile("arizuko.toml.example", c); err != nil {
		t.Fatal(err)
	}
	if c.Routing.EngagementTTL.Duration != 30*time.Minute || c.Server.Listen != defaultListen {
		t.Fatalf("%+v", c)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "arizuko.toml")
	os.WriteFile(p, []byte("[server]\nlisten = \"x\"\nlisten_port = 1\n"), 0o600)
	flagConfig = p
	defer func() { flagConfig = "" }()
	_, err := loadConfig()
	if err == nil || !strings.Contains(err.Error(), "server.listen_port") || !strings.Contains(err.Error(), p+":3") {
		t.Fatalf("err = %v", err)
	}
}
