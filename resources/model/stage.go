package model

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
)

// stageScript is the staging program the hosts run with python3 (stdlib
// only): the source serves its copy on its fabric address, each receiver
// fetches what it lacks (see stage.py).
//
//go:embed stage.py
var stageScript string

// stagePython is the interpreter's command line: -S skips the site module
// (site-packages, .pth files: 20–40 ms of each start; the script needs
// the standard library alone).
var stagePython = "python3 -S"

// stageTrail, where set (tests), says whether receivers hash in a thread
// that trails the writer; nil lets each receiver choose by its cores.
var stageTrail *bool

// Peer is a node taking part in staging.
type Peer struct {
	// Name is the node's name, for messages and progress.
	Name string
	// Conn runs commands on the node.
	Conn transport.Conn
	// Addr is the node's fabric address: the source listens on it, the
	// receivers connect to it. Traffic never passes through the machine
	// running rayform.
	Addr netip.Addr
	// Layout is where the model lies on the node: the same path on every
	// host of a cluster, a node's own in the lab (whose nodes share one
	// filesystem).
	Layout Layout
}

// Progress is one node's progress: Done of Total bytes, at Rate bytes per
// second (0 until known), finishing in ETA (0 when unknown).
type Progress struct {
	Node        string
	Done, Total int64
	Rate        float64
	ETA         time.Duration
	// Finished is set on the node's last report, when it succeeded.
	Finished bool
	// Transfer is, on the last report, how long the receiver took from
	// its first request to its last byte written and verified: the data
	// phase, without the start of the programs and the connections.
	Transfer time.Duration
}

// String renders the progress line plan and apply print per node.
func (p Progress) String() string {
	pct := 100.0
	if p.Total > 0 {
		pct = 100 * float64(p.Done) / float64(p.Total)
	}
	s := fmt.Sprintf("%s: %s of %s (%.0f%%)", p.Node, GB(p.Done), GB(p.Total), pct)
	if p.Finished {
		return s + ", done"
	}
	if p.Rate > 0 {
		s += fmt.Sprintf(", %s/s", GB(int64(p.Rate)))
	}
	if p.ETA > 0 {
		s += ", ETA " + p.ETA.Round(time.Second).String()
	}
	return s
}

// StageOptions tune a staging run.
type StageOptions struct {
	// Streams is how many files each receiver fetches at once; zero
	// means one per core of the receiver (the cores it may run on), at
	// least 4 and at most 32 (8 from the hub, huggingface_hub's own
	// max_workers): with sha256, each file is hashed in order on one
	// core (about 1.5–2 GB/s with SHA-NI), so a fabric of 100–400 Gbit/s
	// needs that many files in flight, where the node has the cores.
	Streams int
	// Interval is how often each receiver reports progress; zero means
	// one second.
	Interval time.Duration
	// Progress receives each receiver's reports; nil for none.
	Progress func(Progress)
	// IdleTimeout is how long a receiver waits for the source to send
	// anything before it gives up on a file (a cut link sends nothing,
	// and TCP alone would wait for minutes); zero means 60 seconds. It is
	// also the window of MinBytes.
	IdleTimeout time.Duration
	// MinBytes is the least a stream must receive in each IdleTimeout: a
	// source that trickles (a byte now and then, which never lets
	// IdleTimeout pass) fails the file as a stall; zero means 1 MiB (a
	// stream slower than about 17 kB/s for a whole window). There is no
	// cap on a transfer's whole time: a large file at a steady rate takes
	// what it needs.
	MinBytes int64
}

// withDefaults fills in the zero options.
func (o StageOptions) withDefaults() StageOptions {
	if o.Streams < 0 {
		o.Streams = 0
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = time.Minute
	}
	if o.MinBytes <= 0 {
		o.MinBytes = 1 << 20
	}
	return o
}

// stageFile is one file as stage.py reads it.
type stageFile struct {
	Path string `json:"path"`
	Src  string `json:"src"`
	// SrcStore is where the source writes the file's content (its blob),
	// for messages.
	SrcStore string `json:"src_store,omitempty"`
	Store    string `json:"store"`
	Link     string `json:"link"`
	Size     int64  `json:"size"`
	// SHA256 (LFS files) or else BlobID (the git blob id) is the hub's
	// identity of the content, which the receiver verifies.
	SHA256 string `json:"sha256,omitempty"`
	BlobID string `json:"blob_id,omitempty"`
}

// files lists m's files for stage.py in layout l.
func files(m Manifest, l Layout) []stageFile {
	out := make([]stageFile, 0, len(m.Files))
	for _, f := range m.Files {
		out = append(out, stageFile{
			Path: f.Path, Src: l.FilePath(m, f), Store: l.StorePath(m, f), Link: l.FilePath(m, f),
			Size: f.Size, SHA256: f.SHA256, BlobID: f.BlobID,
		})
	}
	return out
}

// stageCmd is the command running stage.py; its configuration (with the
// run's key or the hub's token) is the first line of cfg, on stdin.
func stageCmd(cfg []byte, stdin io.Reader, stdout io.Writer) transport.Cmd {
	return transport.Cmd{
		Script:   "exec " + stagePython + " -c " + shell.Quote(stageScript),
		Stdin:    io.MultiReader(bytes.NewReader(append(cfg, '\n')), stdin),
		Stdout:   stdout,
		Mutating: true,
	}
}

// Stage copies m from src's complete copy to
// each of dsts, node to node on the fabric addresses: src serves its files
// on its fabric address for the duration of the call (an ephemeral port),
// each receiver fetches the files it lacks or holds with another size,
// opt.Streams at a time, resuming partial files, and renames a file to its
// final name only once its size and the hub's identity of it (sha256 for
// an LFS file, the git blob id otherwise) are verified. src serves only
// regular files that resolve inside the model's blobs/ (its directory,
// for a plain directory): a link out of it is refused, naming the node and
// the file, before anything is sent. Each request is signed with a random
// key of this call (HMAC-SHA256 over the request and a nonce that the
// source accepts once), which reaches the nodes only on their SSH
// sessions' stdin: nothing on the fabric authenticates another request,
// during the call or after it. It returns every receiver's error, each
// naming the node; a failed receiver keeps its partial files for the next
// run.
func Stage(ctx context.Context, m Manifest, src Peer, dsts []Peer, opt StageOptions) error {
	if len(dsts) == 0 {
		return nil
	}
	opt = opt.withDefaults()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return err
	}
	key := hex.EncodeToString(k)
	var srcs []string
	for _, f := range files(m, src.Layout) {
		srcs = append(srcs, f.Src)
	}
	serveCfg, err := json.Marshal(map[string]any{
		"role": "serve", "node": src.Name, "dir": src.Layout.Dir, "hf": src.Layout.HFCache, "bind": src.Addr.String(), "key": key, "files": srcs,
	})
	if err != nil {
		return err
	}

	// The source: serve until staging ends (closing its stdin).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hold, release := io.Pipe()
	defer release.Close()
	lines := newLineWriter()
	served := serveForStaging(ctx, m, src, serveCfg, hold, lines)
	rs := startReceivers(ctx, m, src, dsts, key, opt)
	port := listeningPort(lines)
	if port == 0 {
		release.Close()
		for _, pw := range rs.ports {
			pw.Close()
		}
		err := <-served
		cancel()
		rs.wg.Wait()
		if err != nil {
			return err
		}
		return fmt.Errorf("%s: staging server for %s ended before listening", src.Name, m.Repo)
	}
	go func() {
		for range lines.c { // drain
		}
	}()
	rs.tellPort(port)
	rs.wg.Wait()
	for _, pw := range rs.ports {
		pw.CloseWithError(io.ErrClosedPipe)
	}
	release.Close()
	cancel()
	<-served // its error after cancel is the cancellation: the receivers' errors tell
	return errors.Join(rs.errs...)
}

// serveForStaging runs the staging server on src, serving until hold
// closes, its stdout to lines; the channel gets its error.
func serveForStaging(ctx context.Context, m Manifest, src Peer, cfg []byte, hold io.Reader, lines *lineWriter) <-chan error {
	served := make(chan error, 1)
	go func() {
		res, err := src.Conn.Run(ctx, stageCmd(cfg, hold, lines))
		if why := stageErrors(res, src.Name); err != nil && why != "" {
			err = fmt.Errorf("%s: serving %s for staging: %s", src.Name, m.Repo, why)
		} else if err != nil {
			err = fmt.Errorf("%s: serving %s for staging: %w", src.Name, m.Repo, err)
		}
		lines.close()
		served <- err
	}()
	return served
}

// listeningPort waits for the staging server's "listening PORT" line and
// returns the port; 0 when the server ended before it.
func listeningPort(lines *lineWriter) int {
	for line := range lines.c {
		if p, ok := strings.CutPrefix(line, "listening "); ok {
			port, _ := strconv.Atoi(p)
			return port
		}
	}
	return 0
}

// receivers are the receivers of one Stage, running: each one's error,
// and the pipe that tells it the source's port.
type receivers struct {
	wg    sync.WaitGroup
	errs  []error
	ports []*io.PipeWriter
}

// startReceivers starts a receiver on every node of dsts. They start with
// the source, not after it: each checks its space and its partial files
// while the source starts, and learns the source's port on the second line
// of its stdin.
func startReceivers(ctx context.Context, m Manifest, src Peer, dsts []Peer, key string, opt StageOptions) *receivers {
	rs := &receivers{errs: make([]error, len(dsts)), ports: make([]*io.PipeWriter, len(dsts))}
	for i, d := range dsts {
		pr, pw := io.Pipe()
		rs.ports[i] = pw
		rs.wg.Add(1)
		go func() {
			defer rs.wg.Done()
			rs.errs[i] = fetchTo(ctx, m, d, src.Layout, fmt.Sprintf("from %s (%s)", src.Name, src.Addr), map[string]any{
				"source_host": src.Addr.String(), "source_port": 0, "key": key,
				"source_name": src.Name, "source_dir": src.Layout.Dir,
			}, pr, opt)
		}()
	}
	return rs
}

// tellPort sends the source's port to every receiver.
func (rs *receivers) tellPort(port int) {
	for _, pw := range rs.ports {
		go func() {
			// A receiver that has already failed never reads it: the
			// write ends when the pipe is closed after the receivers.
			_, _ = fmt.Fprintf(pw, "{\"source_port\": %d}\n", port)
			pw.Close()
		}()
	}
}

// fetchTo runs one receiver and relays its progress; from says where
// it fetches from, for messages, and source adds to its configuration
// where (a node's server, or the hub) and with which key or token; more is the
// rest of the receiver's stdin (a node's server's port, when source has
// none yet).
func fetchTo(ctx context.Context, m Manifest, d Peer, srcLayout Layout, from string, source map[string]any, more io.Reader, opt StageOptions) error {
	cfg, err := fetchConfig(m, d, srcLayout, source, opt)
	if err != nil {
		return err
	}
	lines := newLineWriter()
	relay := &progressRelay{node: d.Name, report: opt.Progress}
	done := make(chan struct{})
	go func() {
		defer close(done)
		relay.run(lines.c)
	}()
	res, err := d.Conn.Run(ctx, stageCmd(cfg, more, lines))
	lines.close()
	<-done
	if err != nil {
		if why := stageErrors(res, d.Name); why != "" && ctx.Err() == nil {
			// The script's own lines say what failed; the transport's
			// error would only repeat the last of them after the script.
			return fmt.Errorf("%s: staging %s %s: %s", d.Name, m.Repo, from, why)
		}
		return fmt.Errorf("%s: staging %s %s: %w", d.Name, m.Repo, from, err)
	}
	if !relay.ok {
		return fmt.Errorf("%s: staging %s %s ended without confirming completion", d.Name, m.Repo, from)
	}
	return nil
}

// fetchConfig is the receiver's configuration on node d: the files, each
// asked for by its path in the source's layout, the transfer's settings,
// and source's keys.
func fetchConfig(m Manifest, d Peer, srcLayout Layout, source map[string]any, opt StageOptions) ([]byte, error) {
	fs := files(m, d.Layout)
	for i, f := range files(m, srcLayout) {
		fs[i].Src, fs[i].SrcStore = f.Src, f.Store
	}
	c := map[string]any{
		"role": "fetch", "node": d.Name, "dir": d.Layout.Dir, "files": fs, "commit": m.Commit, "ref": d.Layout.RefPath(m),
		"streams": opt.Streams, "interval": opt.Interval.Seconds(), "timeout": opt.IdleTimeout.Seconds(), "min_bytes": opt.MinBytes,
		// A file not stored with LFS, up to the size plan's probe hashes,
		// counts as present only with the hub's git blob id.
		"hash_max": observe.TreeHashMax,
	}
	maps.Copy(c, source)
	if stageTrail != nil {
		c["trail"] = *stageTrail
	}
	return json.Marshal(c)
}

// progressRelay reads a receiver's stdout: its progress lines, reported
// with a rate and an ETA (a repeat without new bytes is not), and its
// final "ok [SECONDS]", which sets ok and reports the last progress
// finished.
type progressRelay struct {
	node   string
	report func(Progress) // nil: nothing reported
	ok     bool

	first      time.Time
	firstBytes int64
	last       Progress
	reported   bool
}

// run relays every line of lines until it closes.
func (r *progressRelay) run(lines <-chan string) {
	for line := range lines {
		if rest, found := strings.CutPrefix(line, "ok"); found && (rest == "" || rest[0] == ' ') {
			r.ok = true
			if secs, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
				r.last.Transfer = time.Duration(secs * float64(time.Second))
			}
			continue
		}
		if f := strings.Fields(line); len(f) == 3 && f[0] == "progress" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			total, _ := strconv.ParseInt(f[2], 10, 64)
			r.progress(n, total)
		}
	}
	if r.ok && r.report != nil {
		r.last.Finished = true
		r.report(r.last)
	}
}

// progress reports that n of total bytes are there.
func (r *progressRelay) progress(n, total int64) {
	now := time.Now()
	p := Progress{Node: r.node, Done: n, Total: total}
	if r.first.IsZero() {
		r.first, r.firstBytes = now, n
	} else if dt := now.Sub(r.first).Seconds(); dt > 0 && n > r.firstBytes {
		p.Rate = float64(n-r.firstBytes) / dt
		p.ETA = time.Duration(float64(total-n) / p.Rate * float64(time.Second))
	}
	// A report without new bytes says nothing new (the receiver
	// reports on its interval while the transfer starts): the
	// first is shown, the repeats are not.
	repeat := r.reported && n == r.last.Done
	r.last, r.reported = p, true
	if r.report != nil && !repeat {
		r.report(p)
	}
}

// stageErrors is the staging script's own error lines on node (without
// the node's name, which the caller's message starts with), or "".
func stageErrors(res transport.Result, node string) string {
	var out []string
	for line := range strings.SplitSeq(string(res.Stderr), "\n") {
		if msg, ok := strings.CutPrefix(line, "rayform-stage: "); ok {
			out = append(out, strings.TrimPrefix(msg, node+": "))
		}
	}
	return strings.Join(out, "; ")
}

// lineWriter turns a command's streamed stdout into lines on c.
type lineWriter struct {
	mu sync.Mutex
	c  chan string
	in chan []byte
}

func newLineWriter() *lineWriter {
	w := &lineWriter{c: make(chan string, 64), in: make(chan []byte, 64)}
	go func() {
		defer close(w.c)
		var pending []byte
		for b := range w.in {
			pending = append(pending, b...)
			consumed := 0
			for {
				i := bytes.IndexByte(pending[consumed:], '\n')
				if i < 0 {
					break
				}
				w.c <- string(pending[consumed : consumed+i])
				consumed += i + 1
			}
			pending = append(pending[:0], pending[consumed:]...)
		}
		if len(pending) > 0 {
			w.c <- string(pending)
		}
	}()
	return w
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.in == nil {
		return len(p), nil
	}
	w.in <- bytes.Clone(p)
	return len(p), nil
}

func (w *lineWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.in != nil {
		close(w.in)
		w.in = nil
	}
}

// Hub is where Download fetches a model: the hub's base URL (HF_ENDPOINT)
// and the token, "" for none. The token reaches the node only on the
// staging script's stdin, never in its argv, a file or a log.
type Hub struct {
	Endpoint string
	Token    string
}

// Download fetches what node lacks of m from the hub, as Stage does from
// a node: several files at a time, resuming partial files, each renamed
// only once its size and the hub's identity of it (sha256 for an LFS
// file, the git blob id otherwise) are verified. A refusal
// of the hub (401, 403, a revision not found) is an error with its cause
// and fix.
func Download(ctx context.Context, m Manifest, node Peer, hub Hub, opt StageOptions) error {
	opt = opt.withDefaults()
	return fetchTo(ctx, m, node, node.Layout, "from the hub "+hub.Endpoint, map[string]any{
		"hub":   map[string]any{"endpoint": hub.Endpoint, "repo": m.Repo, "revision": m.Revision, "commit": m.Commit},
		"token": hub.Token,
	}, strings.NewReader(""), opt)
}
