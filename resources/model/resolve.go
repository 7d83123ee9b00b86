package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// UnavailableError is Resolve's error when the hub gave no answer (the
// connection refused, a timeout, a name that does not resolve, the
// connection cut) or answered that it cannot serve now (5xx): unlike a
// refusal (401, 403, 404), it says nothing about the model, and plan may
// judge the nodes against the manifest recorded on them instead.
type UnavailableError struct {
	Endpoint string
	// Err is what the client saw.
	Err error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("the hub at %s did not answer: %v", e.Endpoint, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// IsUnavailable reports whether err is the hub's failure to answer
// (UnavailableError).
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

// Timeouts of the hub client: a hub that does not answer costs at most
// these, never the run's whole context.
const (
	hubDialTimeout   = 10 * time.Second
	hubHeaderTimeout = 30 * time.Second
)

// HubClient is the HTTP client Resolve asks the hub with: the
// environment's proxy, a bounded dial, TLS handshake and wait for the
// answer's headers, and timeout for the whole exchange.
func HubClient(timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: hubDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = hubDialTimeout
	tr.ResponseHeaderTimeout = hubHeaderTimeout
	return &http.Client{Transport: tr, Timeout: timeout}
}

// maxAPIBytes bounds an answer of the hub's API that Resolve reads (a
// model's file list, an index of shards).
const maxAPIBytes = 64 << 20

// Resolve asks the hub at endpoint which files revision of repo has
// (GET /api/models/REPO/revision/REV?blobs=true, as huggingface_hub's
// model_info(files_metadata=True)), reads its model.safetensors.index.json
// at the resolved commit when it has one, and returns the manifest of
// what a serve loads (Select). The token, "" for none, goes only in the
// Authorization header. A refusal is an error with its cause and fix
// (gated, bad token, no access, no such repository or revision).
func Resolve(ctx context.Context, hc *http.Client, endpoint, token, repo, revision string) (Manifest, error) {
	base := strings.TrimRight(endpoint, "/")
	body, err := hubGet(ctx, hc, endpoint, base+"/api/models/"+repo+"/revision/"+url.PathEscape(revision)+"?blobs=true", token, repo, revision)
	if err != nil {
		return Manifest{}, err
	}
	m, err := ParseHubRevision(repo, revision, body)
	if err != nil {
		return Manifest{}, err
	}
	var index []byte
	for _, f := range m.Files {
		if f.Path == IndexFile {
			if index, err = hubGet(ctx, hc, endpoint, base+"/"+repo+"/resolve/"+m.Commit+"/"+IndexFile, token, repo, revision); err != nil {
				return Manifest{}, err
			}
		}
	}
	return Select(m, index)
}

// maxRedirects bounds the redirects of one request to the hub (as
// net/http's default).
const maxRedirects = 10

// tokenHome is hc sending the Authorization header only to the exact
// origin (scheme, host and port) of the first request: net/http drops it
// on a redirect to another host, but keeps it on a redirect to another
// port of the same host, from https to http, and to a subdomain.
func tokenHome(hc *http.Client) *http.Client {
	c := *hc
	next := hc.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(req.URL, via[0].URL) {
			req.Header.Del("Authorization")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
	return &c
}

// sameOrigin reports whether a and b have the same scheme, host and port
// (the scheme's default port when none is written).
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && originPort(a) == originPort(b)
}

func originPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// hubGet GETs u from the hub, explaining a refusal. A hub that gives no
// answer, or answers 5xx, is an UnavailableError (unless ctx itself
// ended: the run was interrupted).
func hubGet(ctx context.Context, hc *http.Client, endpoint, u, token, repo, revision string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := tokenHome(hc).Do(req)
	if err != nil {
		if ctx.Err() == context.Canceled {
			return nil, fmt.Errorf("model %s@%s: asking the hub: %w", repo, revision, ctx.Err())
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is the endpoint's, said once
		}
		return nil, fmt.Errorf("model %s@%s: %w", repo, revision, &UnavailableError{Endpoint: endpoint, Err: err})
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBytes))
	if err != nil {
		return nil, fmt.Errorf("model %s@%s: %w", repo, revision, &UnavailableError{Endpoint: endpoint, Err: fmt.Errorf("reading its answer: %w", err)})
	}
	if resp.StatusCode >= 500 {
		return nil, fmt.Errorf("model %s@%s: %w", repo, revision, &UnavailableError{Endpoint: endpoint, Err: fmt.Errorf("it answered %s", resp.Status)})
	}
	if resp.StatusCode == http.StatusOK {
		return body, nil
	}
	code, msg := resp.Header.Get("X-Error-Code"), resp.Header.Get("X-Error-Message")
	if msg == "" {
		msg = resp.Status
	}
	what := fmt.Sprintf("model %s@%s: the hub answered %d", repo, revision, resp.StatusCode)
	switch {
	case resp.StatusCode == http.StatusUnauthorized && code == "GatedRepo" && token == "":
		return nil, fmt.Errorf("%s: the repository is gated (%s); accept its conditions on the hub, then set the model's token from a sensitive variable", what, msg)
	case resp.StatusCode == http.StatusUnauthorized && token != "" && code != "RepoNotFound":
		return nil, fmt.Errorf("%s: it refused the token (%s); set the model's token to a valid token with read access", what, msg)
	case resp.StatusCode == http.StatusUnauthorized || code == "RepoNotFound":
		return nil, fmt.Errorf("%s: no repository %s, or it is private (%s); check the model's source, or set its token", what, repo, msg)
	case resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%s: the token has no access (%s); request access to %s on the hub, or use a token that has it", what, msg, repo)
	case code == "RevisionNotFound":
		return nil, fmt.Errorf("%s: %s has no revision %q (%s); check the model's revision", what, repo, revision, msg)
	}
	return nil, fmt.Errorf("%s: %s %s", what, code, msg)
}
