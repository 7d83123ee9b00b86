package planfile

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rayform/rayform/engine/state/jsonfile"
)

// FormatVersion is the plan file format this package writes. It reads any
// file of the same major version.
const FormatVersion = "1"

// File is a saved plan.
type File struct {
	FormatVersion       string                     `json:"format_version"`
	RayformVersion      string                     `json:"rayform_version"`
	CreatedAt           time.Time                  `json:"created_at"`
	ConfigHash          string                     `json:"config_hash"`
	ConfigFiles         map[string]string          `json:"config_files"`
	Variables           map[string]json.RawMessage `json:"variables"`
	SensitiveSalt       string                     `json:"sensitive_salt,omitempty"`
	SensitiveVariables  map[string]string          `json:"sensitive_variables"`
	Targets             []string                   `json:"targets"`
	ObservedFingerprint string                     `json:"observed_fingerprint"`
	Observed            map[string]string          `json:"observed,omitempty"`
	StateLineage        string                     `json:"state_lineage"`
	StateSerial         uint64                     `json:"state_serial"`
	Summary             Summary                    `json:"summary"`
	Changes             []Change                   `json:"changes"`
	// Destroy marks a plan -destroy: apply of it destroys.
	Destroy bool `json:"destroy,omitempty"`
	// Replace lists the -replace addresses the plan was made with.
	Replace []string `json:"replace,omitempty"`
	// Rendered and RenderedJSON are the plan as plan showed it, as text
	// (without colour) and as its -json events, for `rayform show`. Like
	// the plan's output they hold no sensitive value.
	Rendered     string            `json:"rendered,omitempty"`
	RenderedJSON []json.RawMessage `json:"rendered_json,omitempty"`
}

// Summary counts the plan's changes as the plan summary line does.
type Summary struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
}

// Change is one resource's planned action ("create", "update", "replace",
// "delete", in the vocabulary of the plan package).
type Change struct {
	Addr   string `json:"addr"`
	Action string `json:"action"`
}

// Current is what a plan is computed from, gathered when the plan is made
// and again when it is applied.
type Current struct {
	// RayformVersion is the running rayform's version; "" skips the check.
	RayformVersion string
	// ConfigFiles maps each configuration file's path, relative to the
	// configuration directory, to its content.
	ConfigFiles map[string][]byte
	// Variables maps each non-sensitive variable to its value as JSON.
	Variables map[string]json.RawMessage
	// Sensitive maps each sensitive variable to its value as JSON. The
	// values stay in memory: only salted hashes are written.
	Sensitive map[string]json.RawMessage
	// StateLineage and StateSerial identify the local state.
	StateLineage string
	StateSerial  uint64
	// ObservedFingerprint is a hash of the observed facts the plan
	// depends on; Observed optionally breaks it down by part (host).
	ObservedFingerprint string
	Observed            map[string]string
}

// Planned is what the plan showed.
type Planned struct {
	Targets []string
	Summary Summary
	Changes []Change
	// Destroy and Replace are the plan's -destroy and -replace options.
	Destroy bool
	Replace []string
	// Rendered and RenderedJSON are the plan's text and -json renderings.
	Rendered     string
	RenderedJSON []json.RawMessage
}

// Options supplies the clock and the randomness of [New]; zero values use
// the real ones.
type Options struct {
	Now  func() time.Time // default time.Now
	Rand io.Reader        // salt source, default crypto/rand
}

// New returns the saved plan for a plan computed from cur that showed p.
// Sensitive values are hashed, never copied.
func New(cur Current, p Planned, opts Options) (*File, error) {
	now, rnd := time.Now, io.Reader(rand.Reader)
	if opts.Now != nil {
		now = opts.Now
	}
	if opts.Rand != nil {
		rnd = opts.Rand
	}
	f := &File{
		FormatVersion:       FormatVersion,
		RayformVersion:      cur.RayformVersion,
		CreatedAt:           now().UTC().Truncate(time.Second),
		Variables:           map[string]json.RawMessage{},
		SensitiveVariables:  map[string]string{},
		Targets:             append([]string{}, p.Targets...),
		ObservedFingerprint: cur.ObservedFingerprint,
		StateLineage:        cur.StateLineage,
		StateSerial:         cur.StateSerial,
		Summary:             p.Summary,
		Changes:             append([]Change{}, p.Changes...),
		Destroy:             p.Destroy,
		Replace:             append([]string(nil), p.Replace...),
		Rendered:            p.Rendered,
		RenderedJSON:        append([]json.RawMessage(nil), p.RenderedJSON...),
	}
	for name, v := range cur.Variables {
		c, err := compact(v)
		if err != nil {
			return nil, fmt.Errorf("variable %q: %w", name, err)
		}
		f.Variables[name] = c
	}
	// Every plan draws a salt: a configuration or variable file may hold a
	// secret (a -var-file of one API key, an api_key literal), so the
	// files' hashes are keyed as the sensitive variables' are.
	var salt [16]byte
	if _, err := io.ReadFull(rnd, salt[:]); err != nil {
		return nil, fmt.Errorf("generating the plan's salt: %w", err)
	}
	f.SensitiveSalt = hex.EncodeToString(salt[:])
	f.ConfigHash = ConfigHash(salt[:], cur.ConfigFiles)
	f.ConfigFiles = fileHashes(salt[:], cur.ConfigFiles)
	if len(cur.Sensitive) > 0 {
		for name, v := range cur.Sensitive {
			h, err := f.hashSensitive(name, v)
			if err != nil {
				return nil, err
			}
			f.SensitiveVariables[name] = h
		}
	}
	if len(cur.Observed) > 0 {
		f.Observed = make(map[string]string, len(cur.Observed))
		for k, v := range cur.Observed {
			f.Observed[k] = v
		}
	}
	return f, nil
}

// hashSensitive returns the keyed hash of the sensitive variable name's
// JSON value v under the plan's salt.
func (f *File) hashSensitive(name string, v json.RawMessage) (string, error) {
	c, err := compact(v)
	if err != nil {
		return "", fmt.Errorf("sensitive variable %q: %w", name, err)
	}
	salt, err := f.salt()
	if err != nil {
		return "", fmt.Errorf("sensitive variable %q: %w", name, err)
	}
	m := hmac.New(sha256.New, salt)
	frame(m, name, c)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil)), nil
}

// salt returns the plan's salt, which keys its hashes.
func (f *File) salt() ([]byte, error) {
	salt, err := hex.DecodeString(f.SensitiveSalt)
	if err != nil || len(salt) == 0 {
		return nil, fmt.Errorf("the plan has no valid sensitive_salt")
	}
	return salt, nil
}

// compact returns v, which must be JSON, without insignificant space, so
// equal values compare equal however they were formatted.
func compact(v json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return nil, fmt.Errorf("value is not JSON: %w", err)
	}
	return b.Bytes(), nil
}

// frame writes name and value to w so that no two (name, value) pairs
// produce the same bytes.
func frame(w io.Writer, name string, value []byte) {
	fmt.Fprintf(w, "%d:%s\n%d:", len(name), name, len(value))
	w.Write(value)
	io.WriteString(w, "\n")
}

// ConfigHash returns the HMAC-SHA256, keyed by salt, over every file's
// name and content, in name order, as "hmac-sha256:<hex>". files maps each
// configuration file's path, relative to the configuration directory, to
// its content. It is keyed because a file may hold a secret: a plain hash
// of a -var-file that holds only an API key lets anyone who reads the plan
// check a guess of the key with one hash.
func ConfigHash(salt []byte, files map[string][]byte) string {
	h := hmac.New(sha256.New, salt)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		frame(h, name, files[name])
	}
	return "hmac-sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Fingerprint combines per-part fingerprints (for example one hash of the
// observed facts per host) into one, as "sha256:<hex>".
func Fingerprint(parts map[string]string) string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(parts)) {
		frame(h, name, []byte(parts[name]))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// fileHashes returns the HMAC-SHA256, keyed by salt, of each file's name
// and content (see ConfigHash for why it is keyed).
func fileHashes(salt []byte, files map[string][]byte) map[string]string {
	out := make(map[string]string, len(files))
	for name, b := range files {
		m := hmac.New(sha256.New, salt)
		frame(m, name, b)
		out[name] = "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
	}
	return out
}

// Write saves f to path atomically with mode 0600.
func Write(path string, f *File) error {
	out := *f
	if out.FormatVersion == "" {
		out.FormatVersion = FormatVersion
	}
	if out.ConfigFiles == nil {
		out.ConfigFiles = map[string]string{}
	}
	if out.Variables == nil {
		out.Variables = map[string]json.RawMessage{}
	}
	if out.SensitiveVariables == nil {
		out.SensitiveVariables = map[string]string{}
	}
	if out.Targets == nil {
		out.Targets = []string{}
	}
	if out.Changes == nil {
		out.Changes = []Change{}
	}
	data, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return fmt.Errorf("writing plan %s: %w", path, err)
	}
	if err := jsonfile.WriteAtomic(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing plan: %w", err)
	}
	return nil
}

// Read loads the saved plan at path. A file that is not a plan, of another
// major format version, or corrupt is an error naming the file (and, for
// JSON errors, the line and column).
func Read(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading plan: %w", err)
	}
	var top map[string]json.RawMessage
	if err := jsonfile.Decode(path, data, &top); err != nil {
		return nil, fmt.Errorf("reading plan: %w", err)
	}
	var version string
	if raw, ok := top["format_version"]; !ok || json.Unmarshal(raw, &version) != nil || version == "" {
		return nil, fmt.Errorf("reading plan: %s is not a rayform plan file (no format_version)", path)
	}
	if major, _, _ := strings.Cut(version, "."); major != FormatVersion {
		return nil, fmt.Errorf("reading plan: %s has plan format version %s, but this rayform reads format %s; run rayform plan again with this version", path, version, FormatVersion)
	}
	var f File
	if err := jsonfile.Decode(path, data, &f); err != nil {
		return nil, fmt.Errorf("reading plan: %w", err)
	}
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("reading plan: %s: %w", path, err)
	}
	// Written indented; compact again, as New stores them.
	for name, v := range f.Variables {
		c, err := compact(v)
		if err != nil {
			return nil, fmt.Errorf("reading plan: %s: variable %q: %w", path, name, err)
		}
		f.Variables[name] = c
	}
	return &f, nil
}

// check reports a plan that parsed but cannot be right.
func (f *File) check() error {
	if !strings.HasPrefix(f.ConfigHash, "hmac-sha256:") {
		return fmt.Errorf("config_hash %q is not an hmac-sha256 hash", f.ConfigHash)
	}
	if salt, err := hex.DecodeString(f.SensitiveSalt); err != nil || len(salt) == 0 {
		return fmt.Errorf("no valid sensitive_salt")
	}
	for i, c := range f.Changes {
		if c.Addr == "" || c.Action == "" {
			return fmt.Errorf("change %d has no addr or action", i)
		}
	}
	return nil
}
