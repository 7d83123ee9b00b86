//go:build linux

package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The lab's hub: NewHub's handler served by the supervisor on the
// management network, beside the registry, at HubAddr. Its repositories
// are LabHubRepos; the gated one needs the token Up writes to
// DIR/hub/token (0600), which tests and the demo pass to rayform as a
// sensitive variable; DIR/hub/token-no-access is a token the hub knows
// without access to it (403).

// HubPort is the lab hub's port on the client's management address.
const HubPort = 5080

// HubAddr is the lab hub's address, 10.1.230.1:5080; HF_ENDPOINT is
// "http://" + HubAddr().
func HubAddr() string { return ClientIP() + ":" + strconv.Itoa(HubPort) }

// Lab hub repositories.
const (
	// HubRepoTiny is public: two shards, 24 MiB in all.
	HubRepoTiny = "rayform-lab/tiny"
	// HubRepoBig is gated (the lab's token): 8 shards of BigMiB/8, for
	// throughput.
	HubRepoBig = "rayform-lab/big"
)

// DefaultHubBigMiB is the size of HubRepoBig when Up is not told.
const DefaultHubBigMiB = 1024

// LabHubRepos are the lab hub's repositories, HubRepoBig of bigMiB MiB.
func LabHubRepos(bigMiB int) []*HubRepo {
	if bigMiB <= 0 {
		bigMiB = DefaultHubBigMiB
	}
	big := make([]int64, 8)
	for i := range big {
		big[i] = int64(bigMiB) << 20 / 8
	}
	return []*HubRepo{
		{ID: HubRepoTiny, Shards: []int64{16 << 20, 8<<20 + 4321}},
		{ID: HubRepoBig, Gated: true, Shards: big},
	}
}

// hubStart is the supervisor's /hub request.
type hubStart struct {
	// Netns is the network namespace to listen in, Addr where.
	Netns, Addr string
	Token       string
	// NoAccess is a token the hub knows that was not granted the gated
	// repository (403).
	NoAccess string
	BigMiB   int
}

// handleHub starts the lab hub, once, in the requested namespace.
func (s *supervisor) handleHub(w http.ResponseWriter, r *http.Request) {
	var req hubStart
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hub != "" { // a lab up over a lab that is up
		writeJSON(w, map[string]string{"addr": s.hub})
		return
	}
	hub, err := NewHub([]string{req.Token}, LabHubRepos(req.BigMiB)...)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if req.NoAccess != "" {
		hub.NoAccess = []string{req.NoAccess}
	}
	var ln net.Listener
	if err := inNetns(req.Netns, func() error {
		var lerr error
		ln, lerr = net.Listen("tcp", req.Addr)
		return lerr
	}); err != nil {
		http.Error(w, "hub: "+err.Error(), http.StatusInternalServerError)
		return
	}
	srv := &http.Server{Handler: hub, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-s.stop
		srv.Close()
	}()
	s.hub = ln.Addr().String()
	writeJSON(w, map[string]string{"addr": s.hub})
}

// startHub has the supervisor serve the hub on HubAddr in the client
// namespace, with a new token in DIR/hub/token, and waits until it answers.
func (l *Lab) startHub(ctx context.Context, sup *supClient, bigMiB int) error {
	// A lab up over a lab that is up keeps the tokens its hub serves with.
	token, noAccess := l.HubToken(), l.HubNoAccessToken()
	for _, t := range []struct {
		tok  *string
		file string
	}{{&token, "token"}, {&noAccess, "token-no-access"}} {
		if *t.tok != "" {
			continue
		}
		tok := make([]byte, 16)
		if _, err := rand.Read(tok); err != nil {
			return err
		}
		*t.tok = "hf_lab" + hex.EncodeToString(tok)
		dir := filepath.Join(l.Dir, "hub")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, t.file), []byte(*t.tok), 0o600); err != nil {
			return err
		}
	}
	if err := sup.call(ctx, http.MethodPost, "/hub", hubStart{Netns: netnsPath(l.ClientNetns), Addr: HubAddr(), Token: token, NoAccess: noAccess, BigMiB: bigMiB}, nil); err != nil {
		return fmt.Errorf("start the lab hub: %w", err)
	}
	hc := l.clientHTTP()
	return waitFor(ctx, "hub on "+HubAddr(), 30*time.Second, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+HubAddr()+"/api/models/"+HubRepoTiny, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New("GET /api/models/" + HubRepoTiny + ": " + resp.Status)
		}
		return nil
	})
}

// HubToken is the lab hub's token (DIR/hub/token), which reads the gated
// HubRepoBig; "" when the lab has no hub.
func (l *Lab) HubToken() string { return l.hubFile("token") }

// HubNoAccessToken is a token the lab hub knows that was not granted the
// gated repository (DIR/hub/token-no-access): the hub answers it 403
// GatedRepo, as the Hugging Face hub answers a user who has not been
// given access. "" when the lab has none.
func (l *Lab) HubNoAccessToken() string { return l.hubFile("token-no-access") }

func (l *Lab) hubFile(name string) string {
	b, err := os.ReadFile(filepath.Join(l.Dir, "hub", name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
