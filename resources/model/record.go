package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
)

// A node's record of what the hub said.
//
// Truth lives on the hosts (engine/state): what a node holds of a model is
// read from its directory on every plan, but which files a revision has,
// with their sizes and sha256, only the hub can say, and a branch like
// "main" can move. Once a node's copy is verified complete (staged from a
// node or downloaded, each file checked by size and the hub's identity of
// it: sha256 or git blob id), apply records the manifest it was verified
// against next to it, under the repository's directory in the cache
// (RecordPath). Plan still asks the hub first; when
// the hub does not answer, it judges the nodes against the newest record
// of the revision the nodes hold, and says so.

// RecordVersion is the format version of a record.
const RecordVersion = 1

// recordTimeout bounds the writing of a record on a node.
const recordTimeout = time.Minute

// recordMax bounds a record the probe reads (a manifest of thousands of
// files).
const recordMax = 4 << 20

// Record is the manifest a node's copy was verified against, as the node
// keeps it.
type Record struct {
	Version int `json:"version"`
	Manifest
	// Endpoint is the hub that listed the manifest.
	Endpoint string `json:"endpoint"`
	// RecordedAt is when the copy was verified and the record written
	// (UTC, RFC 3339).
	RecordedAt time.Time `json:"recorded_at"`
}

// RecordPath is where a node records the manifest of revision, relative
// to the layout's directory (the repository's directory in the cache):
// .rayform/manifests/REVISION.json (a revision with "/" in subdirectories,
// as the cache's refs/).
func RecordPath(revision string) string {
	return path.Join(".rayform", "manifests", revision+".json")
}

// RecordFile is the record of m's revision on every node.
func (m *Model) RecordFile() string { return path.Join(m.Dir(), RecordPath(m.Rev)) }

// recordProbe is the probe's read of m's record on a node.
func (m *Model) recordProbe() observe.ReadProbe {
	return observe.ReadProbe{Path: m.RecordFile(), Max: recordMax}
}

// ParseRecord reads a record, checking that it is a manifest of repo at
// revision.
func ParseRecord(data []byte, repo, revision string) (Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("not a manifest record: %w", err)
	}
	switch {
	case r.Version != RecordVersion:
		return Record{}, fmt.Errorf("record version %d, want %d", r.Version, RecordVersion)
	case r.Repo != repo || r.Revision != revision:
		return Record{}, fmt.Errorf("a record of %s@%s, want %s@%s", r.Repo, r.Revision, repo, revision)
	case !IsCommit(r.Commit):
		return Record{}, fmt.Errorf("commit %q is not a commit hash", r.Commit)
	case len(r.Files) == 0:
		return Record{}, fmt.Errorf("no files")
	case r.RecordedAt.IsZero():
		return Record{}, fmt.Errorf("no recorded_at")
	}
	for _, f := range r.Files {
		if err := f.Check(); err != nil {
			return Record{}, err
		}
	}
	return r, nil
}

// WriteRecord records r on a node, in dir (the repository's directory in
// the node's cache): written to a temporary file beside it, then renamed
// over the record, so that a reader sees the old record or the new, never
// a part. The content travels on stdin.
func WriteRecord(ctx context.Context, c transport.Conn, dir string, r Record) error {
	r.Version = RecordVersion
	r.RecordedAt = r.RecordedAt.UTC().Truncate(time.Second)
	data, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return err
	}
	file := path.Join(dir, RecordPath(r.Revision))
	tmp := file + ".rayform-tmp"
	script := "set -e\numask 022\nmkdir -p " + shell.Quote(path.Dir(file)) +
		"\ncat >" + shell.Quote(tmp) + "\nmv -f " + shell.Quote(tmp) + " " + shell.Quote(file) + "\n"
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	res, err := c.Run(ctx, transport.Cmd{Script: script, Stdin: bytes.NewReader(append(data, '\n')), Mutating: true})
	if err != nil {
		return fmt.Errorf("recording the manifest of %s@%s in %s: %w (%s)", r.Repo, r.Revision, file, err, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

// Recorded is where the manifest of a plan made without the hub comes
// from: the record of Node, and why the hub was not used.
type Recorded struct {
	Node string
	Record
	// HubErr is the hub's failure to answer.
	HubErr error
}

// newestRecord is the newest valid record of m's revision on nodes (the
// first node's on a tie), nil when none holds one.
func newestRecord(m *Model, nodes []string, facts func(string) *observe.HostFacts) *Recorded {
	key := m.recordProbe().Key()
	var best *Recorded
	for _, n := range nodes {
		hf := facts(n)
		if hf == nil {
			continue
		}
		rr, ok := hf.Reads[key]
		if !ok || !rr.Exists || rr.Truncated || rr.Err != "" {
			continue
		}
		r, err := ParseRecord([]byte(rr.Content), m.Source, m.Rev)
		if err != nil {
			continue
		}
		if best == nil || r.RecordedAt.After(best.RecordedAt) {
			best = &Recorded{Node: n, Record: r}
		}
	}
	return best
}
