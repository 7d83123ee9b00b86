package dashboard

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/simnode/internal/gcs"
)

type noStatus struct{}

func (noStatus) Status() *gcs.Status { return &gcs.Status{} }

// TestTokenAuthentication: the simulated dashboard answers as Ray 2.53's
// token middleware does: public paths without a token, 401 without one,
// 403 with another, 200 with the token read from RAY_AUTH_TOKEN_PATH;
// /api/authentication_mode says which mode is on.
func TestTokenAuthentication(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tok")
	if err := os.WriteFile(path, []byte("abc123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": path}
	auth := LoadAuth(func(k string) string { return env[k] })
	h := Handler(noStatus{}, time.Now, auth)
	tests := []struct {
		path, header string
		want         int
	}{
		{"/api/gcs_healthz", "", 200},
		{"/api/authentication_mode", "", 200},
		{"/api/version", "", 401},
		{"/api/version", "Bearer wrong", 403},
		{"/api/version", "Bearer abc123", 200},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(http.MethodGet, tt.path, nil)
		if tt.header != "" {
			req.Header.Set("Authorization", tt.header)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("GET %s (%q): %d, want %d", tt.path, tt.header, rec.Code, tt.want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/authentication_mode", nil))
	if got := rec.Body.String(); got != `{"authentication_mode": "token"}` {
		t.Errorf("authentication_mode answered %s", got)
	}
	if LoadAuth(func(string) string { return "" }).Mode != "disabled" {
		t.Error("without RAY_AUTH_MODE the mode is not disabled")
	}
}
