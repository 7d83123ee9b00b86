package model

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// authLog serves the lab hub and records whether each request carried an
// Authorization header.
type authLog struct {
	mu   sync.Mutex
	seen []string
	next http.Handler
}

func (a *authLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Header.Get("Authorization"))
	a.mu.Unlock()
	a.next.ServeHTTP(w, r)
}

func (a *authLog) tokens() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// listenOn starts an HTTP server for h on addr (an IP:0 of loopback).
func listenOn(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("listen on %s: %v", addr, err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// TestResolveKeepsTokenHome: plan's hub client sends the token only to
// the scheme, host and port it was given for. The home hub redirects the
// revision's list to a second listener (the lab hub, recording what
// arrives): another address, another port of the same address, plain
// HTTP from HTTPS on the same address; none of them receives the
// Authorization header, and each list still resolves. A redirect to
// the home origin itself keeps it (so the recorder can see a token).
func TestResolveKeepsTokenHome(t *testing.T) {
	hub, tiny, _ := startHub(t)
	redirectTo := func(target string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/moved/") {
				hub.Config.Handler.ServeHTTP(w, r.Clone(r.Context()))
				return
			}
			http.Redirect(w, r, target+"/moved"+r.URL.RequestURI(), http.StatusFound)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name   string
		home   func(h http.Handler) *httptest.Server
		target func(h http.Handler) *httptest.Server
		// names, when set, gives the two listeners host names (home,
		// target) that the client dials at their addresses.
		names [2]string
	}{
		{"another host", func(h http.Handler) *httptest.Server { return listenOn(t, "127.0.0.1:0", h) },
			func(h http.Handler) *httptest.Server { return listenOn(t, "127.0.0.2:0", h) }, [2]string{}},
		{"another port", func(h http.Handler) *httptest.Server { return listenOn(t, "127.0.0.1:0", h) },
			func(h http.Handler) *httptest.Server { return listenOn(t, "127.0.0.1:0", h) }, [2]string{}},
		{"https to http", func(h http.Handler) *httptest.Server {
			s := httptest.NewUnstartedServer(h)
			s.StartTLS()
			t.Cleanup(s.Close)
			return s
		}, func(h http.Handler) *httptest.Server { return listenOn(t, "127.0.0.1:0", h) }, [2]string{}},
		{"a subdomain of the home host", func(h http.Handler) *httptest.Server { return listenOn(t, "127.0.0.1:0", h) },
			func(h http.Handler) *httptest.Server { return listenOn(t, "127.0.0.2:0", h) }, [2]string{"hub.lab.test", "evil.hub.lab.test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &authLog{next: stripMoved(hub.Config.Handler)}
			target := tc.target(rec)
			targetURL := named(t, target, tc.names[1])
			home := tc.home(redirectTo(targetURL))
			homeURL := named(t, home, tc.names[0])
			hc := HubClient(time.Minute)
			if home.TLS != nil {
				hc = home.Client()
			}
			if tc.names[0] != "" {
				addrs := map[string]string{tc.names[0]: home.Listener.Addr().String(), tc.names[1]: target.Listener.Addr().String()}
				tr := hc.Transport.(*http.Transport)
				tr.Proxy = nil
				tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
					host, _, _ := net.SplitHostPort(addr)
					a, ok := addrs[host]
					if !ok {
						t.Errorf("dial %s: not a name of the test", addr)
						return nil, net.UnknownNetworkError(addr)
					}
					return (&net.Dialer{}).DialContext(ctx, network, a)
				}
			}
			m, err := Resolve(ctx, hc, homeURL, hubToken, tiny.ID, "main")
			if err != nil {
				t.Fatal(err)
			}
			if m.Commit != tiny.Commit() {
				t.Errorf("commit %s", m.Commit)
			}
			got := rec.tokens()
			if len(got) == 0 {
				t.Fatal("the redirect target saw no request")
			}
			for _, a := range got {
				if a != "" {
					t.Errorf("the token reached %s: %q", targetURL, a)
				}
			}
		})
	}
	t.Run("same origin", func(t *testing.T) {
		rec := &authLog{next: stripMoved(hub.Config.Handler)}
		var home *httptest.Server
		home = listenOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/moved/") {
				rec.ServeHTTP(w, r)
				return
			}
			http.Redirect(w, r, home.URL+"/moved"+r.URL.RequestURI(), http.StatusFound)
		}))
		if _, err := Resolve(ctx, HubClient(time.Minute), home.URL, hubToken, tiny.ID, "main"); err != nil {
			t.Fatal(err)
		}
		if got := rec.tokens(); len(got) == 0 || got[0] != "Bearer "+hubToken {
			t.Errorf("a redirect to the same origin: Authorization %q, want the token", got)
		}
	})
}

// stripMoved serves h with the "/moved" prefix of the redirect removed.
func stripMoved(h http.Handler) http.Handler {
	return http.StripPrefix("/moved", h)
}

// named is srv's URL with name in place of its address ("" keeps it).
func named(t *testing.T, srv *httptest.Server, name string) string {
	t.Helper()
	if name == "" {
		return srv.URL
	}
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + net.JoinHostPort(name, port)
}
