// Package imageref parses container image references with Docker's grammar
// (github.com/distribution/reference): [DOMAIN/]PATH[:TAG][@DIGEST], the
// domain recognised as docker does (a first component with a '.' or a ':',
// or "localhost"), a reference without one on Docker Hub (docker.io, and
// library/ for a one-component path). It is the one parser of image names:
// validate refuses what it refuses, the observation embeds only what it
// accepts, and apply asks registries for what it returns.
package imageref

import (
	"fmt"
	"regexp"
	"strings"
)

// Ref is a parsed image reference.
type Ref struct {
	// Domain is the registry host[:port]; "docker.io" for Docker Hub.
	Domain string
	// Path is the repository inside the registry ("library/ubuntu").
	Path string
	// Tag is the tag, "latest" when neither a tag nor a digest is given.
	Tag string
	// Digest is the digest, "" when none.
	Digest string
}

// DockerHub is the domain of an image reference without one.
const DockerHub = "docker.io"

const maxNameLength = 255

var (
	alnum           = `[a-z0-9]+`
	separator       = `(?:[._]|__|[-]+)`
	pathComponent   = alnum + `(?:` + separator + alnum + `)*`
	domainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	domainRE        = regexp.MustCompile(`^(?:` + domainComponent + `(?:\.` + domainComponent + `)*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?$`)
	pathRE          = regexp.MustCompile(`^` + pathComponent + `(?:/` + pathComponent + `)*$`)
	tagRE           = regexp.MustCompile(`^[\w][\w.-]{0,127}$`)
	digestRE        = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$`)
)

// Parse parses s, or says in one sentence what makes it no image reference.
func Parse(s string) (Ref, error) {
	if s == "" {
		return Ref{}, fmt.Errorf("an image reference cannot be empty")
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r > 0x7e }); i >= 0 {
		return Ref{}, fmt.Errorf("%q is not an image reference: it contains %q (a reference is [REGISTRY/]REPOSITORY[:TAG][@DIGEST], without spaces or control characters)", s, s[i:i+1])
	}
	name, digest, hasDigest := strings.Cut(s, "@")
	if hasDigest && !digestRE.MatchString(digest) {
		return Ref{}, fmt.Errorf("%q is not an image reference: %q is not a digest (ALGORITHM:HEX, like sha256: and 64 hex digits)", s, digest)
	}
	tag := ""
	// The tag follows the last ':' after the last '/' (a ':' before it
	// is the registry's port).
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
		if !tagRE.MatchString(tag) {
			return Ref{}, fmt.Errorf("%q is not an image reference: the tag %q may hold only letters, digits, '_', '.' and '-', not starting with '.' or '-', at most 128 characters", s, tag)
		}
	}
	if len(name) > maxNameLength {
		return Ref{}, fmt.Errorf("%q is not an image reference: the repository name is %d characters, more than docker's %d", s, len(name), maxNameLength)
	}
	ref := Ref{Domain: DockerHub, Path: name, Tag: tag, Digest: digest}
	if first, rest, ok := strings.Cut(name, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost" || first != strings.ToLower(first)) {
		if !domainRE.MatchString(first) {
			return Ref{}, fmt.Errorf("%q is not an image reference: %q is not a registry host[:port]", s, first)
		}
		ref.Domain, ref.Path = first, rest
	}
	if !pathRE.MatchString(ref.Path) {
		if ref.Path != strings.ToLower(ref.Path) {
			return Ref{}, fmt.Errorf("%q is not an image reference: the repository %q must be lowercase", s, ref.Path)
		}
		return Ref{}, fmt.Errorf("%q is not an image reference: the repository %q must be lowercase letters and digits, in components separated by '/', each joined by '.', '_', '__' or dashes", s, ref.Path)
	}
	if ref.Domain == DockerHub && !strings.Contains(ref.Path, "/") {
		ref.Path = "library/" + ref.Path
	}
	if tag == "" && !hasDigest {
		ref.Tag = "latest"
	}
	return ref, nil
}

// Valid reports whether s is an image reference.
func Valid(s string) bool {
	_, err := Parse(s)
	return err == nil
}

// String is the reference in its full form, e.g.
// "docker.io/library/ubuntu:latest".
func (r Ref) String() string {
	s := r.Domain + "/" + r.Path
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// ManifestRef is what a registry's manifest endpoint takes for r: its
// digest, else its tag.
func (r Ref) ManifestRef() string {
	if r.Digest != "" {
		return r.Digest
	}
	return r.Tag
}
