// Package model is the model kind: the weights of a Hugging Face
// repository revision, staged on every node of the clusters whose serves
// use it before vLLM starts. It knows which files a serve needs (the
// manifest), where they lie on a host (the Hugging Face cache layout or a
// plain directory), judges a host's copy from the observed listing of that
// directory, and stages what is missing node to node.
package model

import (
	"regexp"
	"strings"
)

var repoRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidRepo reports whether id is a repository id of the form ORG/NAME.
func ValidRepo(id string) bool {
	return len(id) <= 200 && repoRE.MatchString(id) && !strings.Contains(id, "..") && !strings.Contains(id, "--")
}

// CacheDirName is the repository's directory in a Hugging Face cache:
// models--ORG--NAME.
func CacheDirName(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}
