package state

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/state/jsonfile"
)

// DefaultPath is where the state file lives, relative to the configuration
// directory.
const DefaultPath = ".rayform/state.json"

// Version is the state file format version this package reads and writes.
const Version = 1

// ErrConflict is returned by [State.Save] when the file on disk was saved by
// another run after this state was loaded.
var ErrConflict = errors.New("state changed on disk since it was loaded")

// State is the local state: which hosts each applied resource lives on.
type State struct {
	Version   int                 `json:"version"`
	Lineage   string              `json:"lineage"`
	Serial    uint64              `json:"serial"`
	Project   string              `json:"project"`
	Resources map[string]Resource `json:"resources"`
	// Images holds what rayform learned by asking an image itself, by
	// image ID (sha256:...): an image's content never changes under its
	// ID, so the answer never goes stale. Use [State.Image] and
	// [State.SetImage]: steps running in parallel record into it.
	Images map[string]Image `json:"images,omitempty"`

	// mu guards Images; set by New and Load (a State built otherwise is
	// not safe for concurrent SetImage).
	mu *sync.Mutex
	// imagesChanged is set by SetImage until the next Save.
	imagesChanged bool
}

// Image is what a kind learned by asking an image itself (the serve
// kind's architecture check: what the image's software knows). The
// answer is the kind's own, opaque to the state: a JSON object whose
// fields the state file keeps beside the state's own (Refs, Seconds,
// CheckedAt).
type Image struct {
	// Answer is the kind's answer, a JSON object (nil for none).
	Answer json.RawMessage `json:"-"`
	// Refs are the references the image was run by when it was asked
	// (vllm/vllm-openai:v0.11.0): a converged cluster's probe reads no
	// image ID, and plan finds the answer by the reference its container
	// runs.
	Refs []string `json:"refs,omitempty"`
	// Seconds is what the query cost, CheckedAt when it ran (UTC).
	Seconds   float64   `json:"seconds"`
	CheckedAt time.Time `json:"checked_at"`
}

// imageKeys are the fields of an image's entry that are the state's own.
var imageKeys = map[string]bool{"refs": true, "seconds": true, "checked_at": true}

// MarshalJSON writes the answer's fields, in their order, then the
// state's own.
func (im Image) MarshalJSON() ([]byte, error) {
	type own Image
	tail, err := json.Marshal(own(im))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	if len(im.Answer) > 0 {
		dec := json.NewDecoder(bytes.NewReader(im.Answer))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return nil, fmt.Errorf("image answer is not a JSON object: %s", im.Answer)
		}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, err
			}
			if imageKeys[tok.(string)] {
				continue
			}
			key, _ := json.Marshal(tok)
			b.Write(key)
			b.WriteByte(':')
			b.Write(v)
			b.WriteByte(',')
		}
	}
	b.Write(tail[1:])
	return b.Bytes(), nil
}

// UnmarshalJSON reads the state's own fields; the whole entry is the
// answer (the kind reads the fields it knows).
func (im *Image) UnmarshalJSON(b []byte) error {
	type own Image
	var o own
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	*im = Image(o)
	im.Answer = append(json.RawMessage(nil), b...)
	return nil
}

// Image returns what the image with id answered, if it was asked.
func (s *State) Image(id string) (Image, bool) {
	if s.mu != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	im, ok := s.Images[id]
	return im, ok
}

// SetImage records the answer of the image with id; the next Save writes it.
func (s *State) SetImage(id string, im Image) {
	if s.mu != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	if s.Images == nil {
		s.Images = map[string]Image{}
	}
	im.CheckedAt = im.CheckedAt.UTC().Truncate(time.Second)
	s.Images[id] = im
	s.imagesChanged = true
}

// ImageByRef returns the answer recorded last for an image run by ref.
func (s *State) ImageByRef(ref string) (id string, im Image, ok bool) {
	if s.mu != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	for k, v := range s.Images {
		if slices.Contains(v.Refs, ref) && (!ok || v.CheckedAt.After(im.CheckedAt) || v.CheckedAt.Equal(im.CheckedAt) && k > id) {
			id, im, ok = k, v, true
		}
	}
	return id, im, ok
}

// ImagesChanged says whether SetImage recorded an answer since the state
// was loaded or last saved.
func (s *State) ImagesChanged() bool {
	if s.mu != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	return s.imagesChanged
}

// Resource records where one resource was applied. It deliberately has no
// field for configuration values: see the package documentation.
type Resource struct {
	Type      string `json:"type"`
	Hosts     []Host `json:"hosts"`
	Container string `json:"container,omitempty"`
	// Head is the node a ray_cluster's head container was found on, as
	// last observed: the host of its lock (see the lock's documentation
	// in cmd/rayform), kept so that a run with another head (or another
	// name for the cluster) also takes the lock of the head it replaces.
	Head      string    `json:"head,omitempty"`
	AppliedAt time.Time `json:"applied_at"`
}

// Host holds the SSH coordinates of one host a resource was applied to,
// enough to reach it without the configuration.
type Host struct {
	Node    string `json:"node"`              // node block name
	Host    string `json:"host"`              // address or name SSH connected to
	User    string `json:"user,omitempty"`    // SSH user
	Port    int    `json:"port,omitempty"`    // SSH port
	Bastion string `json:"bastion,omitempty"` // jump hosts, OpenSSH ProxyJump syntax
	// FabricAddress and FabricInterface are the node's address on its
	// cluster's network and the interface holding it, as last observed by
	// apply. Plan assumes them until the host's own facts say otherwise,
	// which lets it observe a converged cluster in one round trip.
	FabricAddress   string `json:"fabric_address,omitempty"`
	FabricInterface string `json:"fabric_interface,omitempty"`
}

// New returns an empty state for project with a fresh random lineage.
func New(project string) (*State, error) {
	lineage, err := NewLineage(rand.Reader)
	if err != nil {
		return nil, err
	}
	return &State{Version: Version, Lineage: lineage, Project: project, Resources: map[string]Resource{}, mu: &sync.Mutex{}}, nil
}

// NewLineage returns a random lineage read from r, formatted as a version 4
// UUID.
func NewLineage(r io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("generating state lineage: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// Load reads the state file at path. A missing file yields an empty state
// (serial 0) with a fresh lineage and no project; a file that cannot be
// parsed or checked is an error naming the file and, for JSON errors, the
// line and column.
func Load(path string) (*State, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return New("")
	}
	if err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	return parse(path, data)
}

// parse decodes and checks the content of the state file at path.
func parse(path string, data []byte) (*State, error) {
	// Syntax first, then the version, so that a file from another version
	// is refused as such rather than for fields this version does not know.
	var top map[string]json.RawMessage
	if err := jsonfile.Decode(path, data, &top); err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	raw, ok := top["version"]
	if !ok {
		return nil, fmt.Errorf("reading state: %s: no \"version\" field; is this a rayform state file?", path)
	}
	var version int
	if err := json.Unmarshal(raw, &version); err != nil {
		return nil, fmt.Errorf("reading state: %s: \"version\" is %s, not a number", path, raw)
	}
	if version != Version {
		return nil, fmt.Errorf("reading state: %s: state format version %d is not supported (this rayform reads version %d)", path, version, Version)
	}
	var s State
	if err := jsonfile.Decode(path, data, &s); err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("reading state: %s: %w", path, err)
	}
	if s.Resources == nil {
		s.Resources = map[string]Resource{}
	}
	s.mu = &sync.Mutex{}
	return &s, nil
}

// check reports a state that parsed but cannot be right.
func (s *State) check() error {
	if s.Lineage == "" {
		return errors.New("empty lineage")
	}
	for id := range s.Images {
		if id == "" {
			return errors.New("image answer with an empty image ID")
		}
	}
	for _, addr := range s.Addresses() {
		r := s.Resources[addr]
		if addr == "" {
			return errors.New("resource with an empty address")
		}
		if r.Type == "" {
			return fmt.Errorf("resource %s: empty type", addr)
		}
		for i, h := range r.Hosts {
			if h.Host == "" {
				return fmt.Errorf("resource %s: host %d has no address", addr, i)
			}
			if h.Port < 0 || h.Port > 65535 {
				return fmt.Errorf("resource %s: host %s: port %d out of range", addr, h.Host, h.Port)
			}
		}
	}
	return nil
}

// Save writes the state to path atomically with mode 0600, creating the
// directory if needed, and increments the serial. If the file at path was
// saved by another run since this state was loaded (a different lineage, or
// a serial other than this state's), Save returns an error wrapping
// [ErrConflict] and leaves the file alone. A state that Load would refuse
// (a host without an address, say) is never written. On any error the state in memory
// and the file on disk are unchanged.
func (s *State) Save(path string) error {
	if err := s.checkOnDisk(path); err != nil {
		return err
	}
	next := *s
	next.Version = Version
	next.Serial++
	if next.Resources == nil {
		next.Resources = map[string]Resource{}
	}
	if err := next.check(); err != nil {
		return fmt.Errorf("writing state %s: refusing to write a state that could not be read back: %w", path, err)
	}
	if s.mu != nil {
		s.mu.Lock()
	}
	data, err := json.MarshalIndent(&next, "", "  ")
	if s.mu != nil {
		s.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("writing state %s: %w", path, err)
	}
	if err := jsonfile.WriteAtomic(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	s.Version, s.Serial = next.Version, next.Serial
	if s.mu != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	s.imagesChanged = false
	return nil
}

// checkOnDisk returns an error if the state file at path is not the one
// this state was loaded from (or its absence, for serial 0).
func (s *State) checkOnDisk(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if s.Serial != 0 {
			return fmt.Errorf("writing state %s: the file was removed after serial %d was loaded: %w", path, s.Serial, ErrConflict)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	disk, err := parse(path, data)
	if err != nil {
		return fmt.Errorf("writing state: not overwriting a file that cannot be read: %w", err)
	}
	if disk.Lineage != s.Lineage || disk.Serial != s.Serial {
		return fmt.Errorf("writing state %s: the file holds lineage %s serial %d, but lineage %s serial %d was loaded; another rayform run saved it in between, run again: %w",
			path, disk.Lineage, disk.Serial, s.Lineage, s.Serial, ErrConflict)
	}
	return nil
}

// Set records r under addr, replacing any earlier record. AppliedAt is
// stored in UTC, to the second.
func (s *State) Set(addr string, r Resource) {
	if s.Resources == nil {
		s.Resources = map[string]Resource{}
	}
	r.Hosts = append([]Host(nil), r.Hosts...)
	r.AppliedAt = r.AppliedAt.UTC().Truncate(time.Second)
	s.Resources[addr] = r
}

// Remove forgets the resource at addr; removing an absent address is a
// no-op.
func (s *State) Remove(addr string) { delete(s.Resources, addr) }

// Get returns the resource recorded at addr and whether there is one.
func (s *State) Get(addr string) (Resource, bool) {
	r, ok := s.Resources[addr]
	if ok {
		r.Hosts = append([]Host(nil), r.Hosts...)
	}
	return r, ok
}

// Addresses returns the recorded resource addresses, sorted.
func (s *State) Addresses() []string {
	addrs := make([]string, 0, len(s.Resources))
	for a := range s.Resources {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	return addrs
}
