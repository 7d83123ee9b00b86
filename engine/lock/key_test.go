package lock

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
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
	if _, _, err := AdvanceFence(ctx, conn, name, false); err != nil {
		t.Fatal(err)
	}
	first := read()
	if _, _, err := AdvanceFence(ctx, conn, name, false); err != nil {
		t.Fatal(err)
	}
	if again := read(); again != first {
		t.Fatal("a later holder replaced the key: every digest on the hosts would change")
	}
	if _, _, err := AdvanceFence(ctx, conn, Name("p", "other"), false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, transport.FenceDir, observe.SecretKeyFile(Name("p", "other")))); string(b) == first {
		t.Fatal("two deployments share a key")
	}
	if err := os.WriteFile(keyPath, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := AdvanceFence(ctx, conn, name, false); err != nil {
		t.Fatal(err)
	}
	if k := read(); k == first || k == "short" {
		t.Fatalf("malformed key not made anew: %q", k)
	}
}

// Issue 38: the lock holder makes the deployment's bearer token beside the
// key (the Authorization header curl sends from the file), keeps it for
// later holders, and makes it anew only when asked to rotate it.
func TestFenceMakesTheBearerToken(t *testing.T) {
	conn, home := setup(t)
	ctx := context.Background()
	name := Name("p", "main")
	path := filepath.Join(home, transport.FenceDir, observe.BearerFile(name))
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("no token after the fence: %v", err)
		}
		tok, ok := strings.CutPrefix(strings.TrimSuffix(string(b), "\n"), "Authorization: Bearer ")
		if k, err := hex.DecodeString(tok); !ok || err != nil || len(k) != 32 {
			t.Fatalf("token file holds %q, want the header with 32 bytes as hex", b)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("token file: %v; want mode 0600", err)
		}
		return tok
	}
	if _, _, err := AdvanceFence(ctx, conn, name, false); err != nil {
		t.Fatal(err)
	}
	first := read()
	if _, _, err := AdvanceFence(ctx, conn, name, false); err != nil {
		t.Fatal(err)
	}
	if again := read(); again != first {
		t.Fatal("a later holder replaced the token: every service would refuse rayform")
	}
	key, _ := os.ReadFile(filepath.Join(home, transport.FenceDir, observe.SecretKeyFile(name)))
	if _, _, err := AdvanceFence(ctx, conn, name, true); err != nil {
		t.Fatal(err)
	}
	if rotated := read(); rotated == first {
		t.Fatal("rotate kept the token")
	}
	if k, _ := os.ReadFile(filepath.Join(home, transport.FenceDir, observe.SecretKeyFile(name))); string(k) != string(key) {
		t.Fatal("rotating the token replaced the secret-digest key")
	}
}
