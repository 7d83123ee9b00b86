// Files: the probe's stat of files (HostSpec.Files) and the host's clock,
// and their parsers.

package observe

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/transport/shell"
)

// FileFacts is what stat(1) says of one file of HostSpec.Files.
type FileFacts struct {
	// Exists is false when there is no such file.
	Exists bool `json:"exists"`
	// ModTime is its last modification, to the second.
	ModTime time.Time `json:"mod_time,omitzero"`
	Err     string    `json:"err,omitempty"`
}

// writeFiles adds a file section per valid path, and the host's clock
// (date +%s), so that an mtime can be compared with the host's own time.
func writeFiles(b *strings.Builder, paths []string) {
	ok := validOnly(paths, validDir)
	if len(ok) == 0 {
		return
	}
	b.WriteString("rf_sec " + secClock + " rf_x date +%s\n")
	for _, p := range ok {
		b.WriteString("rf_sec " + shell.Quote(secFile+" path="+p) + " rf_x stat -c %Y " + shell.Quote(p) + "\n")
	}
}

// parseFile reads one file section: the mtime in seconds since the epoch.
func parseFile(s *section) FileFacts {
	if s.rc != 0 && bytes.Contains(s.stderr, []byte("No such file")) {
		return FileFacts{}
	}
	if msg := s.failure(); msg != "" {
		return FileFacts{Err: msg}
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(string(s.stdout)), 10, 64)
	if err != nil {
		return FileFacts{Err: "stat: " + err.Error()}
	}
	return FileFacts{Exists: true, ModTime: time.Unix(sec, 0).UTC()}
}

// parseClock reads the host's clock (zero when it could not be read).
func parseClock(s *section) time.Time {
	if s.failure() != "" {
		return time.Time{}
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(string(s.stdout)), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}
