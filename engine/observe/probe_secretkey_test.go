package observe

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
)

// The probe reads each asked lock's secret-digest key from the SSH user's
// ~/.rayform/locks; a missing or malformed key is absent, and a key never
// reaches the facts' JSON.
func TestProbeReadsSecretKeys(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	dir := filepath.Join(home, transport.FenceDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("0123456789abcdef", 4)
	for name, content := range map[string]string{"p.main": key, "p.bad": "not-hex"} {
		if err := os.WriteFile(filepath.Join(dir, SecretKeyFile(name)), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spec := Spec{Hosts: map[string]HostSpec{"a": {SecretKeys: []string{"p.main", "p.bad", "p.none"}}}}
	conns := map[string]transport.Conn{"a": local.New(local.Options{Host: "a"})}
	facts, err := Observe(context.Background(), conns, spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := facts.Hosts["a"].SecretKeys
	if hex.EncodeToString(got["p.main"]) != key || len(got) != 1 {
		t.Errorf("keys read: %x, want only p.main's", got)
	}
	b, _ := json.Marshal(facts)
	if strings.Contains(string(b), key) || strings.Contains(string(b), "secret") {
		t.Errorf("the key reached the facts' JSON")
	}
	if err := (HostSpec{SecretKeys: []string{"../x"}}).Validate(); err == nil {
		t.Error("a lock name with a path was accepted")
	}
}
