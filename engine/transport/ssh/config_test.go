package ssh

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/transport"
)

const testSSHConfig = `
Host gpu-*
  User ubuntu
  IdentityFile ~/.ssh/id_gpu
  ProxyJump bastion

Host gpu-1
  HostName 10.0.0.1
  Port 2222

Host bastion
  HostName bastion.example.com
  User jump
  Port 22022

Host multi
  HostName 10.0.0.9
  ProxyJump alice@hop1:2200,hop2

Host hop1
  ProxyJump hop0

Host loop
  ProxyJump loop

Host templated
  HostName %h.lab.example

Host tuned
  ConnectTimeout 7
  ServerAliveInterval 9
  ServerAliveCountMax 2
  UserKnownHostsFile ~/.ssh/kh1 /etc/kh2
  StrictHostKeyChecking accept-new
  HashKnownHosts yes

Host *
  User defaultuser
`

func TestResolve(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(testSSHConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	kh := []string{filepath.Join(home, ".ssh", "known_hosts")}
	hop := func(name, hostName, user string, port int) Resolved {
		return Resolved{Name: name, HostName: hostName, User: user, Port: port}
	}
	tests := []struct {
		name     string
		hosts    map[string]HostConfig
		trustNew bool
		want     Resolved
		wantErr  string
	}{
		{
			name: "gpu-1",
			want: Resolved{Name: "gpu-1", HostName: "10.0.0.1", Port: 2222, User: "ubuntu",
				IdentityFiles: []string{filepath.Join(home, ".ssh", "id_gpu")},
				Jumps:         []Resolved{hop("bastion", "bastion.example.com", "jump", 22022)}},
		},
		{
			name: "gpu-1",
			hosts: map[string]HostConfig{"gpu-1": {
				HostName: "192.168.200.12", User: "root", ProxyJump: "none", IdentityFiles: []string{"/keys/id"},
			}},
			want: Resolved{Name: "gpu-1", HostName: "192.168.200.12", Port: 2222, User: "root", IdentityFiles: []string{"/keys/id"}},
		},
		{
			name:  "gpu-2",
			hosts: map[string]HostConfig{"gpu-2": {ProxyJump: "ops@10.1.0.1:2200"}},
			want: Resolved{Name: "gpu-2", HostName: "gpu-2", Port: 22, User: "ubuntu",
				IdentityFiles: []string{filepath.Join(home, ".ssh", "id_gpu")},
				Jumps:         []Resolved{hop("10.1.0.1", "10.1.0.1", "ops", 2200)}},
		},
		{
			name: "plain",
			want: Resolved{Name: "plain", HostName: "plain", Port: 22, User: "defaultuser"},
		},
		{
			name: "multi",
			want: Resolved{Name: "multi", HostName: "10.0.0.9", Port: 22, User: "defaultuser",
				Jumps: []Resolved{
					hop("hop0", "hop0", "defaultuser", 22),
					hop("hop1", "hop1", "alice", 2200),
					hop("hop2", "hop2", "defaultuser", 22),
				}},
		},
		{
			name: "templated",
			want: Resolved{Name: "templated", HostName: "templated.lab.example", Port: 22, User: "defaultuser"},
		},
		{
			name: "tuned",
			want: Resolved{Name: "tuned", HostName: "tuned", Port: 22, User: "defaultuser",
				ConnectTimeout: 7 * time.Second, ServerAliveInterval: 9 * time.Second, ServerAliveCountMax: 2,
				KnownHostsFiles: []string{filepath.Join(home, ".ssh", "kh1"), "/etc/kh2"}, TrustNew: true, HashKnownHosts: true},
		},
		{
			name:     "plain",
			trustNew: true,
			want:     Resolved{Name: "plain", HostName: "plain", Port: 22, User: "defaultuser", TrustNew: true},
		},
		{name: "loop", wantErr: "ProxyJump chain deeper than 8"},
		{name: "bad", hosts: map[string]HostConfig{"bad": {ProxyJump: "h:notaport"}}, wantErr: `bad port "notaport"`},
		{name: "bad", hosts: map[string]HostConfig{"bad": {StrictHostKeyChecking: "maybe"}}, wantErr: "StrictHostKeyChecking"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDialer(t, Options{Home: home, SystemConfigFile: "none", AgentSocket: "none", Hosts: tt.hosts, TrustNewHosts: tt.trustNew})
			got, err := d.Resolve(tt.name)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fill := func(r *Resolved) {
				if r.ConnectTimeout == 0 {
					r.ConnectTimeout = DefaultConnectTimeout
				}
				if r.ServerAliveInterval == 0 {
					r.ServerAliveInterval = DefaultServerAliveInterval
				}
				if r.ServerAliveCountMax == 0 {
					r.ServerAliveCountMax = DefaultServerAliveCountMax
				}
				if r.KnownHostsFiles == nil {
					r.KnownHostsFiles = kh
				}
				r.GlobalKnownHosts = []string{"/etc/ssh/ssh_known_hosts"}
			}
			fill(&tt.want)
			for i := range tt.want.Jumps {
				fill(&tt.want.Jumps[i])
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Resolve(%q) =\n%+v\nwant\n%+v", tt.name, got, tt.want)
			}
		})
	}
}

func TestRouteString(t *testing.T) {
	r := Resolved{User: "root", HostName: "10.0.0.5", Port: 22, Jumps: []Resolved{
		{User: "a", HostName: "hop1", Port: 22}, {User: "b", HostName: "hop2", Port: 2200},
	}}
	if got, want := r.String(), "root@10.0.0.5:22 via b@hop2:2200 via a@hop1:22"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestSSHConfigAliasAgainstSSHD dials an alias that only ~/.ssh/config (in
// a temp HOME) resolves: HostName, Port, User, IdentityFile and
// UserKnownHostsFile all come from it.
func TestSSHConfigAliasAgainstSSHD(t *testing.T) {
	e := newEnv(t)
	srv := startServer(t, "openssh", serverOpts{}, e.key.PublicKey())
	kh := filepath.Join(e.home, "hosts-from-config")
	if err := os.WriteFile(kh, []byte(KnownHostsLine(srv.addr, srv.hostKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("Host lab-node\n  HostName %s\n  Port %d\n  User root\n  IdentityFile ~/.ssh/id_test\n  UserKnownHostsFile ~/hosts-from-config\n", srv.host, srv.port)
	if err := os.WriteFile(filepath.Join(e.home, ".ssh", "config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := e.options()
	opts.ConfigFile = "" // the default: $Home/.ssh/config
	d := newDialer(t, opts)
	c := mustDial(t, d, "lab-node")
	res, err := c.Run(testCtx(t), transport.Cmd{Script: `echo "$(id -un) ${SSH_CONNECTION##* }"`})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("root %d\n", srv.port); string(res.Stdout) != want {
		t.Errorf("remote says %q, want %q", res.Stdout, want)
	}
	if r := c.(*Conn).Route(); r.HostName != srv.host || r.Port != srv.port || r.User != "root" {
		t.Errorf("route %v does not come from the ssh config", r)
	}
}
