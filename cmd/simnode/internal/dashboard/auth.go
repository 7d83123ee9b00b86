package dashboard

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// Auth is Ray's token authentication as the dashboard applies it
// (ray/_private/authentication/http_token_authentication.py, Ray 2.53):
// Mode is "token" when RAY_AUTH_MODE=token, else "disabled".
type Auth struct {
	Mode  string
	Token string
}

// LoadAuth reads Ray's authentication from the process environment, in
// Ray's AuthenticationTokenLoader's order: RAY_AUTH_TOKEN, then the file
// RAY_AUTH_TOKEN_PATH names, then ~/.ray/auth_token.
func LoadAuth(getenv func(string) string) Auth {
	if getenv("RAY_AUTH_MODE") != "token" {
		return Auth{Mode: "disabled"}
	}
	tok := getenv("RAY_AUTH_TOKEN")
	if tok == "" {
		path := getenv("RAY_AUTH_TOKEN_PATH")
		if path == "" {
			path = filepath.Join(getenv("HOME"), ".ray", "auth_token")
		}
		if b, err := os.ReadFile(path); err == nil {
			tok = string(b)
		}
	}
	return Auth{Mode: "token", Token: strings.TrimSpace(tok)}
}

// public reports whether path answers without a token (http_server_head.py's
// public_exact_paths and public_path_prefixes).
func public(path string) bool {
	switch path {
	case "/", "/favicon.ico", "/api/authentication_mode", "/api/authenticate",
		"/api/healthz", "/api/gcs_healthz", "/api/local_raylet_healthz", "/-/healthz":
		return true
	}
	return strings.HasPrefix(path, "/static/")
}

// guard is the token middleware: with token authentication, a request
// outside the public paths needs "Authorization: Bearer <token>" (or
// X-Ray-Authorization, or the ray-authentication-token cookie): 401
// without one, 403 with another token, Ray's own texts.
func (a Auth) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.Mode != "token" || public(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		h := r.Header.Get("Authorization")
		if h == "" {
			h = r.Header.Get("X-Ray-Authorization")
		}
		if h == "" {
			if c, err := r.Cookie("ray-authentication-token"); err == nil && c.Value != "" {
				h = "Bearer " + c.Value
			}
		}
		if h == "" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte("Unauthorized: Missing authentication token"))
			return
		}
		if a.Token == "" || h != "Bearer "+a.Token {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte("Forbidden: Invalid authentication token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
