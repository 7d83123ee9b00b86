// Package names turns names from a configuration (nodes like gpu["h1"],
// clusters, projects, directory names) into names that are safe as one
// path segment on a host, a lock file's name or a docker label value.
package names

import (
	"crypto/sha256"
	"encoding/hex"
)

// Segment returns name as one path segment of letters, digits, '.', '_'
// and '-'. A name that already is one comes back unchanged; in any other
// every other byte becomes '_' and a short digest of the original is
// appended (also to "", "." and ".."), so different names never share a
// segment.
func Segment(name string) string {
	b := []byte(name)
	changed := name == "" || name == "." || name == ".."
	for i, c := range b {
		if !Safe(c) {
			b[i] = '_'
			changed = true
		}
	}
	if !changed {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return string(b) + "-" + hex.EncodeToString(sum[:4])
}

// Safe reports whether c may stand in a Segment unchanged.
func Safe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}
