//go:build linux

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/cmd/rflab/lab"
	"github.com/rayform/rayform/engine/transport/shell"
)

// TestE2EClosedByDefault is issue 38's attacker on the management network
// (real Ray 2.53, with its token authentication): after an apply of the
// lab's cluster, from the client namespace (the operator's laptop's
// network) and from spark3, a lab node on the management network that is
// no member of the cluster, with the cluster's own image but without the
// deployment's token:
//   - a job posted to the dashboard's Jobs API does not run: the dashboard
//     answers on the head's loopback only (before: --dashboard-host=0.0.0.0,
//     and POST /api/jobs/ ran a shell command as root in the head);
//   - Ray's node table is not readable (ray status --address HEAD:6379);
//   - no foreign node can join (ray start --address=HEAD:6379);
//   - the vLLM endpoint answers no one beyond the fabric: listen's default
//     is the head's fabric address; listen = "all" without a key is an
//     explicit choice that plan warns about, and only then does the
//     management network get an answer;
//
// and rayform's own plan, status and apply work with authentication on.
func TestE2EClosedByDefault(t *testing.T) {
	l := startLab(t, "rfe2eshut", "-nodes", "3")
	cfg := clusterConfig("enp1s0f1np1", seedImage, false, 0.85)
	dir := l.config(cfg)
	mustCode(t, "apply", l.rayform("", "-chdir="+dir, "apply", "-auto-approve"), exitOK)
	mustCode(t, "plan after apply", l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode"), exitOK)
	st := l.rayform("", "-chdir="+dir, "status")
	mustCode(t, "status", st, exitOK)
	mustContain(t, "status", st.stdout, "ALIVE", "Listening beyond loopback and the fabric:")
	exposure := func() map[string]string {
		t.Helper()
		r := l.rayform("", "-chdir="+dir, "status", "-json")
		var doc struct {
			Clusters []struct {
				Exposure []struct{ Node, Addr, Process, Auth string } `json:"exposure"`
			} `json:"clusters"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Clusters) != 1 {
			t.Fatalf("status -json: %v\n%s", err, r)
		}
		out := map[string]string{}
		for _, e := range doc.Clusters[0].Exposure {
			out[e.Node+" "+e.Addr] = e.Auth
		}
		return out
	}
	// Ray's GCS answers every address, and demands the token; nothing of
	// the cluster answers beyond the fabric without a key.
	before := exposure()
	if before["spark1 0.0.0.0:6379"] != "ray token" {
		t.Errorf("status's exposure report does not show the GCS as token-checked: %v", before)
	}
	for where, auth := range before {
		if auth == "none" {
			t.Errorf("status reports %s open without a key", where)
		}
	}

	client := func(argv ...string) (string, error) {
		out, err := exec.Command("ip", append([]string{"netns", "exec", l.name + "-client"}, argv...)...).CombinedOutput()
		return string(out), err
	}
	const headMgmt, headFabric = "10.1.230.180", "192.168.200.12"

	// The Jobs API, as CVE-2023-48022's exploit posts to it.
	job := `{"entrypoint":"touch /tmp/rayform-pwned"}`
	for _, url := range []string{"http://" + headMgmt + ":8265/api/jobs/"} {
		if out, err := client("curl", "-sS", "-m", "5", "-X", "POST", "-H", "Content-Type: application/json", "-d", job, url); err == nil {
			t.Errorf("the dashboard answered a job from the management network at %s:\n%s", url, out)
		}
	}
	// From a node on the fabric, at the head's fabric address: refused too.
	if out, err := l.ssh("spark2", "curl -sS -m 5 -X POST -H 'Content-Type: application/json' -d '"+job+"' http://"+headFabric+":8265/api/jobs/"); err == nil {
		t.Errorf("the dashboard answered a job on the fabric:\n%s", out)
	}
	if out, _ := l.ssh("spark1", "docker exec rayform-spark ls /tmp/rayform-pwned"); !strings.Contains(out, "No such file") {
		t.Fatalf("a posted job ran in the head's container: %s", out)
	}

	// Ray itself (GCS, raylets) demands the token: a client with Ray and
	// the cluster's image, on the management network, without the token.
	foreign := func(args string) (string, error) {
		return l.ssh("spark3", "docker run --rm --network host --entrypoint sh "+seedImage+" -c "+shell.Quote(args))
	}
	if out, err := foreign("timeout 120 ray status --address " + headMgmt + ":6379"); err == nil || strings.Contains(out, "Node status") {
		t.Errorf("ray status from the management network read the cluster (err %v):\n%s", err, out)
	}
	if out, err := foreign("RAY_AUTH_MODE=token RAY_AUTH_TOKEN=" + strings.Repeat("0", 64) + " timeout 120 ray status --address " + headMgmt + ":6379"); err == nil || strings.Contains(out, "Node status") {
		t.Errorf("ray status with a wrong token read the cluster (err %v):\n%s", err, out)
	}
	out, _ := foreign("timeout 120 ray start --address=" + headMgmt + ":6379 --disable-usage-stats; ray stop --force >/dev/null 2>&1; true")
	rows := l.rayTable(t)
	if len(rows) != 2 {
		t.Fatalf("Ray's node table has %d nodes after a foreign ray start, want the cluster's 2:\n%v\n%s", len(rows), rows, out)
	}

	// The dashboard on loopback, vLLM on the fabric, from the head's own view.
	ss, err := l.ssh("spark1", "ss -Hltn")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(ss, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		switch {
		case strings.HasSuffix(f[3], ":8265") && f[3] != "127.0.0.1:8265":
			t.Errorf("the dashboard listens on %s, want the head's loopback only", f[3])
		case strings.HasSuffix(f[3], ":8000") && f[3] != headFabric+":8000":
			t.Errorf("vLLM listens on %s, want the head's fabric address only", f[3])
		}
	}
	if out, err := client("curl", "-sS", "-m", "5", "http://"+headMgmt+":8000/v1/models"); err == nil {
		t.Errorf("vLLM answered the management network without listen = \"all\":\n%s", out)
	}
	if out, err := l.ssh("spark2", "curl -sS -m 5 http://"+headFabric+":8000/v1/models"); err != nil || !strings.Contains(out, "qwen3.5-122b") {
		t.Errorf("vLLM does not answer on the fabric: %v\n%s", err, out)
	}

	// Rotation is one command: a new token under the lock, the containers
	// that hold the old one replaced, the cluster converged with the new.
	lb, err := lab.Load(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	bearer := filepath.Join(lb.Nodes[0].Home, ".rayform", "locks", filepath.Base(dir)+".spark.bearer")
	old, err := os.ReadFile(bearer)
	if err != nil {
		t.Fatalf("the deployment's token file on the head: %v", err)
	}
	rot := l.rayform("", "-chdir="+dir, "apply", "-auto-approve", "-rotate-token")
	mustCode(t, "apply -rotate-token", rot, exitOK)
	mustContain(t, "apply -rotate-token", rot.stdout, "ray_cluster.spark must be replaced")
	if now, err := os.ReadFile(bearer); err != nil || string(now) == string(old) {
		t.Errorf("apply -rotate-token kept the token (%v)", err)
	}
	mustCode(t, "plan after the rotation", l.rayform("", "-chdir="+dir, "plan", "-detailed-exitcode"), exitOK)
	if rows := l.rayTable(t); len(rows) < 2 {
		t.Errorf("Ray's node table after the rotation: %v", rows)
	}

	// Opening it is a choice in the configuration, and plan says so.
	main := filepath.Join(dir, "main.hcl")
	b, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	opened := strings.Replace(string(b), "  ready_timeout          = \"2m\"\n", "  ready_timeout          = \"2m\"\n  listen                 = \"all\"\n", 1)
	if err := os.WriteFile(main, []byte(opened), 0o644); err != nil {
		t.Fatal(err)
	}
	p := l.rayform("", "-chdir="+dir, "plan")
	mustContain(t, "plan of listen = all", p.stdout+p.stderr, "answers anyone who reaches spark1 on port 8000, without a key", `~ listen = "fabric" -> "all" # forces replacement`)
	mustCode(t, "apply of listen = all", l.rayform("", "-chdir="+dir, "apply", "-auto-approve"), exitOK)
	if out, err := client("curl", "-sS", "-m", "5", "http://"+headMgmt+":8000/v1/models"); err != nil || !strings.Contains(out, "qwen3.5-122b") {
		t.Errorf("with listen = \"all\", vLLM does not answer the management network: %v\n%s", err, out)
	}
	// vLLM's wildcard socket: "0.0.0.0:8000", or "*:8000" as ss prints a
	// dual-stack one.
	after := exposure()
	if after["spark1 0.0.0.0:8000"] != "none" && after["spark1 *:8000"] != "none" {
		t.Errorf("status does not report vLLM open without a key on every address: %v", after)
	}
	mustCode(t, "destroy", l.rayform("", "-chdir="+dir, "destroy", "-auto-approve"), exitOK)
}
