package ssh

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// authSet is the keys offered for one handshake.
type authSet struct {
	signers []xssh.Signer
	// problems explain keys that could not be offered (encrypted without an
	// agent, unreadable); they are added to an authentication failure.
	problems []string
	// tried describes the sources, for the error message.
	tried []string
	agent net.Conn
}

func (a *authSet) close() {
	if a.agent != nil {
		a.agent.Close()
	}
}

// hint renders what was offered and what could not be, for an
// authentication error.
func (a *authSet) hint() string {
	s := "offered " + strings.Join(a.tried, ", ")
	if len(a.tried) == 0 {
		s = "no keys to offer (no ssh-agent, no identity file)"
	}
	if len(a.problems) > 0 {
		s += "; " + strings.Join(a.problems, "; ")
	}
	return s
}

// loadAuth gathers the identity files' keys, then the agent's (skipping
// duplicates). An encrypted identity file is usable only when the agent
// holds it: rayform never prompts for a passphrase.
func loadAuth(agentSocket string, identityFiles []string) *authSet {
	a := &authSet{}
	var agentKeys []*agent.Key
	var agentSigners []xssh.Signer
	if agentSocket != "" && agentSocket != "none" {
		conn, err := net.Dial("unix", agentSocket)
		if err != nil {
			a.problems = append(a.problems, fmt.Sprintf("ssh-agent at %s: %v", agentSocket, err))
		} else {
			a.agent = conn
			ag := agent.NewClient(conn)
			if agentKeys, err = ag.List(); err != nil {
				a.problems = append(a.problems, fmt.Sprintf("ssh-agent: %v", err))
			}
			if agentSigners, err = ag.Signers(); err != nil {
				a.problems = append(a.problems, fmt.Sprintf("ssh-agent: %v", err))
			}
		}
	}
	inAgent := func(pub xssh.PublicKey) bool {
		if pub == nil {
			return false
		}
		for _, k := range agentKeys {
			if bytes.Equal(k.Marshal(), pub.Marshal()) {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	for _, f := range identityFiles {
		pem, err := os.ReadFile(f)
		if err != nil {
			a.problems = append(a.problems, fmt.Sprintf("identity file %s: %v", f, err))
			continue
		}
		signer, err := xssh.ParsePrivateKey(pem)
		var pm *xssh.PassphraseMissingError
		switch {
		case errors.As(err, &pm):
			if !inAgent(pm.PublicKey) {
				a.problems = append(a.problems, fmt.Sprintf("identity file %s is encrypted and ssh-agent does not hold it: run `ssh-add %s` (rayform never prompts for a passphrase)", f, f))
			}
			continue
		case err != nil:
			a.problems = append(a.problems, fmt.Sprintf("identity file %s: %v", f, err))
			continue
		}
		seen[string(signer.PublicKey().Marshal())] = true
		a.signers = append(a.signers, signer)
		a.tried = append(a.tried, f)
	}
	n := 0
	for _, s := range agentSigners {
		if !seen[string(s.PublicKey().Marshal())] {
			seen[string(s.PublicKey().Marshal())] = true
			a.signers = append(a.signers, s)
			n++
		}
	}
	if n > 0 {
		a.tried = append(a.tried, fmt.Sprintf("%d key(s) from ssh-agent", n))
	}
	return a
}

// isAuthError reports whether a handshake error is the server refusing
// every key.
func isAuthError(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "unable to authenticate") ||
		strings.Contains(err.Error(), "no supported methods remain"))
}
