package command

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/run"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport/ssh"
	"github.com/rayform/rayform/resources"
)

// sshHosts are how rayform reaches each node: the SSH settings of the
// configuration's nodes (host, port, user, identity file, bastion) and of
// the nodes only the state remembers (where a removed resource lived),
// and the nodes of the configuration that are this machine itself (host
// "localhost" with no other setting), run without SSH.
func sshHosts(cfg *config.Config, st *state.State) (hosts map[string]ssh.HostConfig, local map[string]bool) {
	hosts = map[string]ssh.HostConfig{}
	local = map[string]bool{}
	for _, n := range run.Hosts(resources.Kinds(), cfg) {
		name := n.Name
		if n.Host == "localhost" && n.User == "" && n.Port == 0 && n.Bastion == "" {
			local[name] = true
			continue
		}
		hc := ssh.HostConfig{HostName: n.Host, Port: n.Port, User: n.User}
		if n.IdentityFile != "" {
			hc.IdentityFiles = []string{expandHome(n.IdentityFile)}
		}
		if n.Bastion != "" {
			hc.ProxyJump = n.Bastion
		}
		hosts[name] = hc
	}
	for _, addr := range st.Addresses() {
		r, _ := st.Get(addr)
		for _, h := range r.Hosts {
			if _, ok := hosts[h.Node]; ok || local[h.Node] {
				continue
			}
			hosts[h.Node] = ssh.HostConfig{HostName: h.Host, Port: h.Port, User: h.User, ProxyJump: h.Bastion}
		}
	}
	return hosts, local
}

// expandHome expands a leading ~/ to the home directory.
func expandHome(p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	return p
}
