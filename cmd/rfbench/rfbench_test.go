//go:build linux

package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"strings"
	"testing"
	"time"

	xssh "golang.org/x/crypto/ssh"

	"github.com/rayform/rayform/cmd/rflab/lab"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/serve"
)

// handshake runs an x/crypto client against an x/crypto server over a pipe,
// recording the client's side, and returns the recorded streams.
func handshake(t *testing.T, server xssh.Config) (written, read []byte) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := xssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	scfg := &xssh.ServerConfig{Config: server, NoClientAuth: true}
	scfg.AddHostKey(signer)
	// Loopback TCP, not net.Pipe: both ends write their version line
	// before reading, which an unbuffered pipe deadlocks on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c2, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c2.Close()
		_, _, _, err = xssh.NewServerConn(c2, scfg)
		done <- err
	}()
	c1, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	rec := &recorder{}
	ccfg := &xssh.ClientConfig{User: "root", HostKeyCallback: xssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second}
	conn, _, _, err := xssh.NewClientConn(rec.wrap(c1), "pipe", ccfg)
	if err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	defer conn.Close()
	if err := <-done; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	return rec.bytes()
}

func TestNegotiationFromKexInit(t *testing.T) {
	tests := []struct {
		name   string
		server xssh.Config
		want   algorithms
	}{
		{
			name:   "OpenSSH 9.2 offers no ML-KEM: curve25519",
			server: xssh.Config{KeyExchanges: []string{"sntrup761x25519-sha512@openssh.com", xssh.KeyExchangeCurve25519, xssh.KeyExchangeECDHP256}},
			want:   algorithms{Kex: xssh.KeyExchangeCurve25519, HostKey: xssh.KeyAlgoED25519, Cipher: xssh.CipherAES128GCM},
		},
		{
			name:   "a server with ML-KEM gets the post-quantum hybrid",
			server: xssh.Config{},
			want:   algorithms{Kex: xssh.KeyExchangeMLKEM768X25519, HostKey: xssh.KeyAlgoED25519, Cipher: xssh.CipherAES128GCM},
		},
		{
			name:   "a non-AEAD cipher brings a MAC",
			server: xssh.Config{KeyExchanges: []string{xssh.KeyExchangeCurve25519}, Ciphers: []string{xssh.CipherAES256CTR}, MACs: []string{xssh.HMACSHA256}},
			want:   algorithms{Kex: xssh.KeyExchangeCurve25519, HostKey: xssh.KeyAlgoED25519, Cipher: xssh.CipherAES256CTR, MAC: xssh.HMACSHA256},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			written, read := handshake(t, tt.server)
			client, cv, err := readKexInit(written)
			if err != nil {
				t.Fatalf("client KEXINIT: %v", err)
			}
			server, sv, err := readKexInit(read)
			if err != nil {
				t.Fatalf("server KEXINIT: %v", err)
			}
			if !strings.HasPrefix(cv, "SSH-2.0-Go") || !strings.HasPrefix(sv, "SSH-2.0-Go") {
				t.Errorf("versions %q, %q", cv, sv)
			}
			got, err := agree(client, server)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("agree = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadKexInitRejectsGarbage(t *testing.T) {
	for _, in := range []string{"", "no version line", "SSH-2.0-x\r\n\x00\x00", "SSH-2.0-x\r\n\x00\x00\x00\x10\x04\x15" + strings.Repeat("a", 12)} {
		if _, _, err := readKexInit([]byte(in)); err == nil {
			t.Errorf("readKexInit(%q) succeeded", in)
		}
	}
}

func TestSSHOptions(t *testing.T) {
	a := algorithms{Kex: "curve25519-sha256", HostKey: "ssh-ed25519", Cipher: "aes128-gcm@openssh.com"}
	got := strings.Join(floorSSHArgs("/lab/ssh_config", a), " ")
	want := "-F /lab/ssh_config -T -o ControlMaster=no -o ControlPath=none -o IdentityAgent=none -o KexAlgorithms=curve25519-sha256 -o HostKeyAlgorithms=ssh-ed25519 -o Ciphers=aes128-gcm@openssh.com"
	if got != want {
		t.Errorf("floor ssh args:\n got %s\nwant %s", got, want)
	}
	if rc := remoteCommand("echo 'a'"); rc != `exec /bin/sh -c 'echo '"'"'a'"'"''` && rc != `exec /bin/sh -c 'echo '\''a'\'''` {
		t.Errorf("remoteCommand = %s", rc)
	}
}

func TestParseObserved(t *testing.T) {
	out := []byte("Observed 32 hosts in 1.23s (32 SSH connections, at most 2 round trips per host).\n\nNo changes.")
	hosts, conns, rts, ok := parseObserved(out)
	if !ok || hosts != 32 || conns != 32 || rts != 2 {
		t.Errorf("parseObserved = %d %d %d %v", hosts, conns, rts, ok)
	}
	if _, _, _, ok := parseObserved([]byte("Error: no")); ok {
		t.Error("parseObserved matched an error")
	}
	if got := perHostConns(33, 32); got != 2 {
		t.Errorf("perHostConns(33, 32) = %d, want 2 (rounded up)", got)
	}
}

func TestParseClosed(t *testing.T) {
	log := []byte(`2026-11-30T00:56:17.282Z [DEBUG] rayform.ssh: run: host=spark1
2026-11-30T00:56:17.282Z [DEBUG] rayform.ssh: connection closed: host=spark2 route=root@10.1.230.181:22 handshakes=1 round_trips=2
2026-11-30T00:56:17.283Z [DEBUG] rayform.ssh: connection closed: host=spark1 route=root@10.1.230.180:22 handshakes=1 round_trips=3
2026-11-30T00:56:17.283Z [DEBUG] rayform.ssh: connection closed: host="spark[\"spark3\"]" route=root@10.1.230.182:22 handshakes=1 round_trips=2
2026-11-30T00:56:17.284Z [DEBUG] rayform.ssh: connection closed: host=spark2 route=root@10.1.230.181:22 handshakes=1 round_trips=1
`)
	hosts, conns, rts := parseClosed(log)
	if hosts != 3 || conns != 2 || rts != 3 {
		t.Errorf("parseClosed = %d hosts, %d conns, %d rts; want 3, 2, 3", hosts, conns, rts)
	}
}

func TestMedianAndTable(t *testing.T) {
	sh := shape{nodes: 8, delay: 20 * time.Millisecond}
	ms := func(v ...int) []sample {
		var out []sample
		for _, x := range v {
			out = append(out, sample{wall: time.Duration(x) * time.Millisecond, conns: 1, rts: 2, maxRSS: 20e6})
		}
		return out
	}
	floor := &result{shape: sh, name: caseFloor, samples: ms(100, 300, 200)}
	plan := &result{shape: sh, name: casePlan, samples: ms(130, 110, 120, 500)}
	setup := &result{shape: sh, name: caseAnsibleSetup, samples: ms(2500)}
	pending := &result{shape: sh, name: caseApplyNoop, note: "pending"}
	if floor.median() != 200*time.Millisecond || plan.median() != 125*time.Millisecond {
		t.Fatalf("medians %v %v", floor.median(), plan.median())
	}
	var b bytes.Buffer
	writeTable(&b, []*result{floor, plan, setup, pending})
	got := b.String()
	for _, want := range []string{
		"| 8 | 20ms | rayform plan (no changes) | 125 ms | 110 ms – 500 ms | 0.62× | 20.0× | 1 | 2 | 20.0 MB |",
		"| 8 | 20ms | floor: OpenSSH, probe per host | 200 ms | 100 ms – 300 ms |  | 12.5× | 1 | 2 |  |",
		"| 8 | 20ms | rayform apply (no-op) | pending |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

func testLab(n int) *lab.Lab {
	l := &lab.Lab{Name: "t", ClientNetns: "t-client", Key: "/lab/id_ed25519", SSHConfig: "/lab/ssh_config"}
	for i := range n {
		l.Nodes = append(l.Nodes, lab.Node{Name: lab.NodeName(i), MgmtIP: lab.MgmtIP(i), FabricIP: lab.FabricIP(i),
			FabricIfname: lab.DefaultFabricIfname, GPUs: 1})
	}
	return l
}

func TestClusterHCLLoads(t *testing.T) {
	for _, forEach := range []bool{false, true} {
		for _, n := range []int{2, 8, 64} {
			src := clusterHCL(testLab(n), forEach)
			loaded, diags := config.LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: ".", Kinds: resources.Kinds().Schemas()})
			if diags.HasErrors() {
				t.Fatalf("for_each=%v n=%d: %s\n%s", forEach, n, diags.Error(), src)
			}
			cfg := serve.View(loaded)
			rc := cfg.RayClusters[clusterName]
			if len(cfg.Nodes) != n || rc == nil || len(rc.Nodes()) != n || rc.Head != nodeName("spark1", forEach) {
				t.Errorf("for_each=%v n=%d: %d nodes, cluster %+v", forEach, n, len(cfg.Nodes), rc)
			}
			sv := cfg.Serves[serveName]
			if sv == nil || sv.TensorParallelSize*max(sv.PipelineParallelSize, 1) != n {
				t.Errorf("for_each=%v n=%d: serve %+v does not use every GPU", forEach, n, sv)
			}
		}
	}
}

func TestAnsibleInventory(t *testing.T) {
	inv := ansibleInventory(testLab(3), algorithms{Kex: "curve25519-sha256", HostKey: "ssh-ed25519", Cipher: "aes128-gcm@openssh.com"})
	for _, want := range []string{
		"[head]\nspark1 ansible_host=10.1.230.180\n",
		"[workers]\nspark2 ansible_host=10.1.230.181\nspark3 ansible_host=10.1.230.182\n",
		"ansible_ssh_common_args=-F /lab/ssh_config -o KexAlgorithms=curve25519-sha256 -o HostKeyAlgorithms=ssh-ed25519 -o Ciphers=aes128-gcm@openssh.com\n",
		"fabric_addrs=192.168.200.12 192.168.200.13 192.168.200.14\n",
	} {
		if !strings.Contains(inv, want) {
			t.Errorf("inventory lacks %q:\n%s", want, inv)
		}
	}
}

func TestParseOptions(t *testing.T) {
	var errb bytes.Buffer
	if _, err := parseOptions([]string{"-nodes", "2,65", "-rayform", "/bin/true", "-rflab", "/bin/true", "-simnode", "/bin/true"}, &errb); err == nil {
		t.Error("-nodes 65 accepted")
	}
	o, err := parseOptions([]string{"-nodes", "2, 8", "-delays", "0,20ms", "-cases", "floor,plan", "-rayform", "/bin/true", "-rflab", "/bin/true", "-simnode", "/bin/true", "-timing", "weight_load=1s"}, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.nodes) != 2 || o.nodes[1] != 8 || o.delays[1] != 20*time.Millisecond || !o.has(casePlan) || o.has(caseAnsibleSetup) {
		t.Errorf("options %+v", o)
	}
	b := &bench{opts: o}
	if got := b.simLoad(); got != 3*time.Second {
		t.Errorf("simLoad = %v, want 3s (weight_load 1s + defaults)", got)
	}
	if got := b.labName(shape{nodes: 32, delay: 20 * time.Millisecond}); got != "rfbench-32-20ms" {
		t.Errorf("labName = %q", got)
	}
}
