package cluster

import (
	"strconv"
	"strings"

	"github.com/rayform/rayform/engine/observe"
)

// RayInImage says whether img shows that it contains Ray, and by what:
// its entrypoint or command runs the ray CLI, or a build step installs
// the ray package (observe.Image.Installs). Without such evidence Ray's presence is
// unknown (never absent: only running the image proves that, and running
// a container is not read-only, so the definitive `ray --version` check
// is apply's).
func RayInImage(img observe.Image) (present bool, evidence string) {
	for _, w := range img.Command {
		if isRayWord(w) {
			return true, "the image's entrypoint or command runs " + strconv.Quote(w)
		}
	}
	for _, pkg := range img.Installs {
		if w := rayInstall(pkg); w != "" {
			return true, "built with " + strconv.Quote(w)
		}
	}
	return false, ""
}

// isRayWord reports whether an entrypoint/command word is the ray CLI.
func isRayWord(w string) bool {
	return w == "ray" || strings.HasSuffix(w, "/ray")
}

// rayInstall returns the package word if it installs Ray ("ray",
// "ray[default]==2.53.0", ...), else "".
func rayInstall(w string) string {
	name := w
	if k := strings.IndexAny(w, "[=<>~!"); k >= 0 {
		name = w[:k]
	}
	if name == "ray" {
		return w
	}
	return ""
}
