package model

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

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
	body, err := hubGet(ctx, hc, base+"/api/models/"+repo+"/revision/"+url.PathEscape(revision)+"?blobs=true", token, repo, revision)
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
			if index, err = hubGet(ctx, hc, base+"/"+repo+"/resolve/"+m.Commit+"/"+IndexFile, token, repo, revision); err != nil {
				return Manifest{}, err
			}
		}
	}
	return Select(m, index)
}

// hubGet GETs u from the hub, explaining a refusal.
func hubGet(ctx context.Context, hc *http.Client, u, token, repo, revision string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("model %s@%s: the hub did not answer: %w", repo, revision, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIBytes))
	if err != nil {
		return nil, fmt.Errorf("model %s@%s: reading the hub's answer: %w", repo, revision, err)
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
