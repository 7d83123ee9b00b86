package lock

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport"
)

// Issue 23, item 7: the lock holder makes the deployment's secret-digest
// key when it raises the fence: 32 random bytes as hex, mode 0600, kept by
// later holders, made anew when malformed, and one per lock.
func TestFenceMakesTheSecretKey(t *testing.T) {
	conn, home := setup(t)
	ctx := context.Background()
	name := Name("p", "main")
	keyPath := filepath.Join(home, transport.FenceDir, observe.SecretKeyFile(name))
	if _, err := os.Stat(keyPath); !os.IsNotExist(err) {
		t.Fatalf("key before the first fence: %v", err)
	}
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(keyPath)
		if err != nil {
			t.Fatalf("no key after the fence: %v", err)
		}
		if k, err := hex.DecodeString(string(b)); err != nil || len(k) != observe.SecretKeyLen {
			t.Fatalf("key file holds %q, want %d bytes as hex", b, observe.SecretKeyLen)
		}
		fi, err := os.Stat(keyPath)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file: %v, mode %v; want 0600", err, fi.Mode())
		}
		return string(b)
	}
	if _, _, err := AdvanceFence(ctx, conn, name); err != nil {
		t.Fatal(err)
	}
	first := read()
	if _, _, err := AdvanceFence(ctx, conn, name); err != nil {
		t.Fatal(err)
	}
	if again := read(); again != first {
		t.Fatal("a later holder replaced the key: every digest on the hosts would change")
	}
	if _, _, err := AdvanceFence(ctx, conn, Name("p", "other")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, transport.FenceDir, observe.SecretKeyFile(Name("p", "other")))); string(b) == first {
		t.Fatal("two deployments share a key")
	}
	if err := os.WriteFile(keyPath, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := AdvanceFence(ctx, conn, name); err != nil {
		t.Fatal(err)
	}
	if k := read(); k == first || k == "short" {
		t.Fatalf("malformed key not made anew: %q", k)
	}
}
