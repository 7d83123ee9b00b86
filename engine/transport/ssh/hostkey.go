package ssh

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/sys/unix"

	"github.com/rayform/rayform/engine/transport"
)

// HostKeyError is returned when the host's key is not trusted: unknown
// (errors.Is(err, transport.ErrUnknownHostKey)) or different from the one on
// record (transport.ErrHostKeyMismatch). Its message says how to fix it.
type HostKeyError struct {
	Host string // node name
	Addr string // host:port checked
	// Kind is transport.ErrUnknownHostKey or transport.ErrHostKeyMismatch.
	Kind error
	// Key is the key the server presented.
	Key xssh.PublicKey
	// Want lists the keys on record for the host (mismatch only).
	Want []knownhosts.KnownKey
	// Files are the known_hosts files consulted.
	Files []string
	// Revoked is set when the presented key is marked @revoked.
	Revoked bool
}

func (e *HostKeyError) Unwrap() error { return e.Kind }

func (e *HostKeyError) Error() string {
	host, port, _ := net.SplitHostPort(e.Addr)
	portFlag := ""
	if port != "" && port != "22" {
		portFlag = "-p " + port + " "
	}
	presented := keyDesc(e.Key)
	if errors.Is(e.Kind, transport.ErrUnknownHostKey) {
		return fmt.Sprintf("%s: %s: server key %s is not in %s: %v; "+
			"check the fingerprint out of band, then run `ssh-keyscan -H %s%s >> %s`, "+
			"or pass -trust-new-hosts to record new host keys on first connect",
			e.Host, e.Addr, presented, strings.Join(e.Files, ", "), e.Kind,
			portFlag, host, firstOr(e.Files, "~/.ssh/known_hosts"))
	}
	if e.Revoked {
		return fmt.Sprintf("%s: %s: server key %s is marked @revoked in known_hosts: %v", e.Host, e.Addr, presented, e.Kind)
	}
	var want []string
	for _, k := range e.Want {
		want = append(want, fmt.Sprintf("%s:%d has %s", k.Filename, k.Line, keyDesc(k.Key)))
	}
	name := knownhosts.Normalize(e.Addr)
	return fmt.Sprintf("%s: %s: server presented %s but %s: %v; "+
		"this can be a man-in-the-middle attack. If the host was reinstalled, "+
		"remove the old key with `ssh-keygen -R '%s' -f %s` and add the new one after checking its fingerprint",
		e.Host, e.Addr, presented, strings.Join(want, ", "), e.Kind, name, firstOr(e.Files, "~/.ssh/known_hosts"))
}

func keyDesc(k xssh.PublicKey) string {
	if k == nil {
		return "(none)"
	}
	return k.Type() + " " + xssh.FingerprintSHA256(k)
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// hostKeys checks server keys against known_hosts files for one host.
type hostKeys struct {
	host     string
	files    []string // user files; files[0] receives new keys
	global   []string // read-only system files
	trustNew bool
	hash     bool
	onAdd    func(line string) // for logging
	// presented is the key the server showed in the last check.
	presented xssh.PublicKey
}

// load reads every existing known_hosts file into a knownhosts callback. A
// missing file is simply empty.
func (h *hostKeys) load() (xssh.HostKeyCallback, []string, error) {
	var existing []string
	for _, f := range append(append([]string(nil), h.files...), h.global...) {
		if _, err := os.Stat(f); err == nil {
			existing = append(existing, f)
		}
	}
	cb, err := knownhosts.New(existing...)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: known_hosts: %w", h.host, err)
	}
	return cb, existing, nil
}

// algorithms returns the host key algorithms to offer for addr: those of the
// keys known_hosts has for it, so that a host on record with an ed25519 key
// is not failed for offering its RSA key first. Nil means "no preference"
// (the host is not on record).
func (h *hostKeys) algorithms(addr string) []string {
	cb, _, err := h.load()
	if err != nil {
		return nil
	}
	// Probe with a key nobody has: the KeyError lists the keys on record.
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil
	}
	probe, err := xssh.NewPublicKey(pub)
	if err != nil {
		return nil
	}
	var ke *knownhosts.KeyError
	if err := cb(addr, &net.TCPAddr{IP: net.IPv4zero}, probe); !errors.As(err, &ke) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, x := range a {
			if !seen[x] {
				seen[x] = true
				algos = append(algos, x)
			}
		}
	}
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case xssh.KeyAlgoRSA:
			add(xssh.KeyAlgoRSASHA512, xssh.KeyAlgoRSASHA256, xssh.KeyAlgoRSA)
		default:
			add(t)
		}
	}
	return algos
}

// callback returns the HostKeyCallback for a handshake with addr. The error
// it returns is also stored in *caught so the caller can classify a failed
// handshake without parsing messages.
func (h *hostKeys) callback(caught *error) xssh.HostKeyCallback {
	return func(addr string, remote net.Addr, key xssh.PublicKey) error {
		h.presented = key
		err := h.check(addr, remote, key)
		*caught = err
		return err
	}
}

func (h *hostKeys) check(addr string, remote net.Addr, key xssh.PublicKey) error {
	cb, existing, err := h.load()
	if err != nil {
		return err
	}
	err = cb(addr, remote, key)
	if err == nil {
		return nil
	}
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &re):
		return &HostKeyError{Host: h.host, Addr: addr, Kind: transport.ErrHostKeyMismatch, Key: key, Files: existing, Revoked: true}
	case errors.As(err, &ke) && len(ke.Want) > 0:
		return &HostKeyError{Host: h.host, Addr: addr, Kind: transport.ErrHostKeyMismatch, Key: key, Want: ke.Want, Files: h.files}
	case errors.As(err, &ke):
		if h.trustNew {
			return h.record(addr, remote, key)
		}
		return &HostKeyError{Host: h.host, Addr: addr, Kind: transport.ErrUnknownHostKey, Key: key, Files: h.files}
	default:
		return fmt.Errorf("%s: checking host key of %s: %w", h.host, addr, err)
	}
}

// record appends key for addr to the first known_hosts file under an
// exclusive lock, after checking again under the lock (another rayform, or
// another goroutine, may have recorded a key meanwhile; a different key then
// is a mismatch, never overwritten).
func (h *hostKeys) record(addr string, remote net.Addr, key xssh.PublicKey) error {
	if len(h.files) == 0 {
		return fmt.Errorf("%s: no known_hosts file to record the key of %s in", h.host, addr)
	}
	path := h.files[0]
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("%s: recording host key: %w", h.host, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("%s: recording host key: %w", h.host, err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("%s: locking %s: %w", h.host, path, err)
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN) //nolint:errcheck // closing unlocks too

	cb, existing, err := h.load()
	if err != nil {
		return err
	}
	var ke *knownhosts.KeyError
	switch err := cb(addr, remote, key); {
	case err == nil:
		return nil // recorded meanwhile
	case errors.As(err, &ke) && len(ke.Want) > 0:
		return &HostKeyError{Host: h.host, Addr: addr, Kind: transport.ErrHostKeyMismatch, Key: key, Want: ke.Want, Files: existing}
	}
	name := knownhosts.Normalize(addr)
	if h.hash {
		name = knownhosts.HashHostname(name)
	}
	line := knownhosts.Line([]string{name}, key)
	// Start on a fresh line if the file does not end with one.
	var prefix []byte
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err == nil && !bytes.Equal(last, []byte("\n")) {
			prefix = []byte("\n")
		}
	}
	if _, err := f.Write(append(append(prefix, line...), '\n')); err != nil {
		return fmt.Errorf("%s: recording host key in %s: %w", h.host, path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: recording host key in %s: %w", h.host, path, err)
	}
	if h.onAdd != nil {
		h.onAdd(line)
	}
	return nil
}

// KnownHostsLine renders a known_hosts line for a server at addr
// ("host:port") with key, as ssh-keyscan would (unhashed).
func KnownHostsLine(addr string, key xssh.PublicKey) string {
	return knownhosts.Line([]string{knownhosts.Normalize(addr)}, key)
}
