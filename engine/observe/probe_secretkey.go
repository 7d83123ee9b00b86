// Secret keys: the probe's reading of a deployment's secret-digest key
// (HostSpec.SecretKeys), which the lock holder creates beside the lock's
// fence file (see engine/lock.AdvanceFence).

package observe

import (
	"encoding/hex"
	"strings"

	"github.com/rayform/rayform/engine/transport/shell"
)

// secSecretKey is the section of one secret key.
const secSecretKey = "secretkey"

// SecretKeyFile is the key file of the lock called name (a path segment),
// in transport.FenceDir of the SSH user's home: 64 hex digits, mode 0600.
func SecretKeyFile(name string) string { return name + ".key" }

// BearerFile is the bearer token file of the lock called name, beside its
// key: the HTTP header "Authorization: Bearer " and 64 hex digits, mode
// 0600 (see engine/lock.AdvanceFence).
func BearerFile(name string) string { return name + ".bearer" }

// bearerPrefix starts a bearer token file.
const bearerPrefix = "Authorization: Bearer "

// secBearer is the section of one bearer token file.
const secBearer = "bearer"

// SecretKeyLen is the length in bytes of a secret-digest key.
const SecretKeyLen = 32

// writeSecretKeys adds a section per lock name reading its key file. A
// missing file is no error: no key was made yet.
func writeSecretKeys(b *strings.Builder, names []string) {
	for _, n := range validOnly(names, validSegment) {
		b.WriteString("rf_sec " + shell.Quote(secSecretKey+" name="+n) +
			" rf_x cat \"$HOME/.rayform/locks/\"" + shell.Quote(SecretKeyFile(n)) + "\n")
		b.WriteString("rf_sec " + shell.Quote(secBearer+" name="+n) +
			" rf_x cat \"$HOME/.rayform/locks/\"" + shell.Quote(BearerFile(n)) + "\n")
	}
}

// parseBearer reads one bearer section: the token (64 hex digits), or ""
// when the file is missing or malformed (a later apply, under the lock,
// makes it).
func parseBearer(s *section) string {
	if s.rc != 0 {
		return ""
	}
	tok, ok := strings.CutPrefix(strings.TrimSpace(string(s.stdout)), bearerPrefix)
	if !ok || len(tok) != 2*SecretKeyLen {
		return ""
	}
	if _, err := hex.DecodeString(tok); err != nil {
		return ""
	}
	return tok
}

// parseSecretKey reads one key section: the key, or nil when the file is
// missing or not a key (a later apply, under the lock, makes it).
func parseSecretKey(s *section) []byte {
	if s.rc != 0 {
		return nil
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(s.stdout)))
	if err != nil || len(k) != SecretKeyLen {
		return nil
	}
	return k
}

// validSegment reports whether s is one path segment of letters, digits
// and "._-", not "." or "..".
func validSegment(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
