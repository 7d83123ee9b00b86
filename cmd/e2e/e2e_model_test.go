//go:build linux

package e2e

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

// End-to-end tests of the model kind (issue 24): the weights staged on
// every node of the serve's cluster before vLLM starts, from a node that
// has them over the fabric, or from the lab hub.

// modelLabConfig writes a configuration of n lab nodes (spark1 the head)
// serving the model block modelBlock declares as model "m" (the lab's tiny
// repository has 2 layers: at most 2 pipeline stages), and returns its
// directory.
func (l *e2eLab) modelConfig(n int, modelBlock string, extra string) string {
	l.t.Helper()
	tmp := l.t.TempDir()
	dir := filepath.Join(tmp, l.name+"-"+filepath.Base(tmp))
	if err := os.Mkdir(dir, 0o755); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { os.RemoveAll("/var/tmp/rayform/" + filepath.Base(dir)) })
	var b strings.Builder
	var workers []string
	for i := range n {
		name := fmt.Sprintf("spark%d", i+1)
		fmt.Fprintf(&b, "node %q {\n  host          = \"10.1.230.%d\"\n  user          = \"root\"\n  identity_file = %q\n  gpus          = 1\n}\n\n",
			name, 180+i, filepath.Join(l.dir, "id_ed25519"))
		if i > 0 {
			workers = append(workers, "node."+name)
		}
	}
	fmt.Fprintf(&b, `network "fabric" {
  cidr      = "192.168.200.0/24"
  interface = %q
}

ray_cluster "spark" {
  image           = %q
  head            = node.spark1
  workers         = [%s]
  network         = network.fabric
  memory_monitor  = false
  dataplane_check = false
}

%s

vllm_serve "s" {
  cluster                = ray_cluster.spark
  model                  = model.m.source
  served_model_name      = "m"
  pipeline_parallel_size = %d
  gpu_memory_utilization = 0.85
  max_model_len          = 4096
  ready_timeout          = "2m"
}
%s`, lab.DefaultFabricIfname, seedImage, strings.Join(workers, ", "), modelBlock, min(n, 2), extra)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(b.String()), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return dir
}

// snapshotSums lists, on node, every file of repo's snapshot in the
// node's model cache with its size and sha256, sorted.
func (l *e2eLab) snapshotSums(t *testing.T, node, repo string) string {
	t.Helper()
	dir := "/var/lib/rayform/huggingface/hub/models--" + strings.ReplaceAll(repo, "/", "--") + "/snapshots"
	out, err := l.ssh(node, "cd "+dir+" && find -L . -type f -printf '%p %s ' -exec sha256sum {} \\; | awk '{print $1, $2, $3}' | sort")
	if err != nil {
		t.Fatalf("%s: listing %s: %v\n%s", node, dir, err, out)
	}
	return out
}

var stageProgressRE = regexp.MustCompile(`model\.m: (spark\d): ([0-9.]+ [kMG]?B) of ([0-9.]+ [kMG]?B) \(100%\), done`)

// TestE2EModelStagedFromTheHead: a 3-node lab where only the head has the
// model (lab up seeds rayform-lab/tiny there). plan shows the head
// complete and each worker "absent, N MB to stage from spark1 over the
// fabric"; apply stages it over the fabric with every worker's progress
// before the serve starts (offline, from the cache), and serves; the next
// plan -detailed-exitcode exits 0; every node's files match the head's by
// size and sha256.
func TestE2EModelStagedFromTheHead(t *testing.T) {
	// Fast mode: the subject is the model kind (staging, download, the
	// nodes' model caches), not Ray.
	l := startLab(t, "rfe2emdl", append([]string{"-nodes", "3"}, fastRay...)...)
	dir := l.modelConfig(3, fmt.Sprintf("model \"m\" {\n  source   = %q\n  endpoint = \"http://%s\"\n}", lab.HubRepoTiny, lab.HubAddr()), "")
	plan := l.rayform("", "-chdir", dir, "plan", "-detailed-exitcode")
	mustCode(t, "plan", plan, 2)
	mustContain(t, "plan", plan.stdout,
		"# model.m will be updated in-place",
		"# (spark1: complete)",
		"# (spark2: absent, 25.2 MB to stage from spark1 over the fabric (",
		"# (spark3: absent, 25.2 MB to stage from spark1 over the fabric (")

	// The images pulled first (the cluster alone does not depend on the
	// model), so that the two applies timed below differ by the staging.
	mustCode(t, "apply -target the cluster", l.rayform("", "-chdir", dir, "apply", "-auto-approve", "-target=ray_cluster.spark"), 0)
	mustCode(t, "destroy the cluster", l.rayform("", "-chdir", dir, "destroy", "-auto-approve"), 0)
	loadStaged := loadAvg()
	apply := l.rayform("", "-chdir", dir, "apply", "-auto-approve")
	mustCode(t, "apply", apply, 0)
	out := apply.stdout
	mustContain(t, "apply", out, "model.m: stage rayform-lab/tiny (25.2 MB) from spark1 to spark2, spark3 over the fabric")
	done := map[string]bool{}
	for _, m := range stageProgressRE.FindAllStringSubmatch(out, -1) {
		if m[2] != m[3] {
			t.Errorf("%s ended at %s of %s", m[1], m[2], m[3])
		}
		done[m[1]] = true
	}
	if !done["spark2"] || !done["spark3"] || done["spark1"] {
		t.Errorf("final progress of %v, want spark2 and spark3:\n%s", done, out)
	}
	staged := strings.Index(out, "model.m: stage ")
	serve := strings.Index(out, "vllm_serve.s: Creating...")
	if staged < 0 || serve < 0 || staged > serve {
		t.Errorf("staging (at %d) must come before the serve starts (at %d):\n%s", staged, serve, out)
	}

	again := l.rayform("", "-chdir", dir, "plan", "-detailed-exitcode")
	mustCode(t, "second plan", again, 0)
	status := l.rayform("", "-chdir", dir, "status")
	mustCode(t, "status", status, 0)
	mustContain(t, "status", status.stdout, "Model model.m: rayform-lab/tiny@main (", "  spark1: complete", "  spark2: complete", "  spark3: complete")

	head := l.snapshotSums(t, "spark1", lab.HubRepoTiny)
	if strings.Count(head, "\n") < 3 {
		t.Fatalf("the head's snapshot lists too little:\n%s", head)
	}
	for _, n := range []string{"spark2", "spark3"} {
		if got := l.snapshotSums(t, n, lab.HubRepoTiny); got != head {
			t.Errorf("%s's files differ from the head's:\n%s\nhead:\n%s", n, got, head)
		}
	}
	// The serve loads from the cache, offline.
	env, err := l.ssh("spark1", `for p in $(docker top rayform-spark -eo pid,args | awk '/vllm serve/ {print $1}'); do tr '\0' '\n' < /proc/$p/environ; done | grep ^HF_HUB_ | sort -u`)
	if err != nil {
		t.Fatalf("reading the serve's environment: %v\n%s", err, env)
	}
	mustContain(t, "serve environment", env, "HF_HUB_OFFLINE=1", "HF_HUB_CACHE=/var/lib/rayform/huggingface/hub")
	if testing.Verbose() {
		t.Log(apply.stdout)
	}

	// The same apply from nothing running, every node holding the model:
	// the time from apply to serving without staging (BENCHMARKS.md).
	mustCode(t, "destroy", l.rayform("", "-chdir", dir, "destroy", "-auto-approve"), 0)
	loadPlain := loadAvg()
	plain := l.rayform("", "-chdir", dir, "apply", "-auto-approve")
	mustCode(t, "apply without staging", plain, 0)
	if strings.Contains(plain.stdout, "model.m: stage") {
		t.Errorf("the apply after destroy staged again:\n%s", plain.stdout)
	}
	t.Logf("apply to serving (3 nodes, images present, %s): with staging to 2 nodes %s (load average %s), without staging %s (load average %s)",
		lab.HubRepoTiny, apply.elapsed.Round(100*time.Millisecond), loadStaged, plain.elapsed.Round(100*time.Millisecond), loadPlain)
}

// TestE2EModelDownloaded: a lab where no node has the model (lab up
// -model-seed=false), a gated repository of the lab hub and the token in a
// sensitive variable. With a wrong token plan and apply stop with the
// hub's 401, its cause and fix, before any container exists; with the
// right one apply downloads it onto the head and stages it from there to
// the worker over the fabric, then serves, and the next plan has nothing
// to do. The token is in no output (trace logs included), no process's
// argv on the nodes while apply runs, no file rayform writes (state,
// configuration directory, the nodes' homes and model caches).
func TestE2EModelDownloaded(t *testing.T) {
	// Fast mode: the subject is the model kind (staging, download, the
	// nodes' model caches), not Ray.
	l := startLab(t, "rfe2emdd", append([]string{"-model-seed=false", "-hub-big-mib", "64"}, fastRay...)...)
	lb, err := lab.Load(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	token := lb.HubToken()
	if token == "" {
		t.Fatal("the lab hub has no token")
	}
	dir := l.modelConfig(2, fmt.Sprintf(`variable "hf_token" {
  type      = string
  sensitive = true
}

model "m" {
  source   = %q
  endpoint = "http://%s"
  token    = var.hf_token
}`, lab.HubRepoBig, lab.HubAddr()), "")
	vars := t.TempDir()
	wrongFile, rightFile := filepath.Join(vars, "wrong.rfvars"), filepath.Join(vars, "right.rfvars")
	wrong := "hf_wrong" + strings.Repeat("x", 24)
	os.WriteFile(wrongFile, []byte(fmt.Sprintf("hf_token = %q\n", wrong)), 0o600)
	os.WriteFile(rightFile, []byte(fmt.Sprintf("hf_token = %q\n", token)), 0o600)

	var seen []string
	keep := func(where, text string) { seen = append(seen, where+"\x00"+text) }
	run := func(what, varFile string, args ...string) result {
		t.Helper()
		argv := append([]string{"-chdir=" + dir, "-log-level=trace", args[0], "-var-file=" + varFile}, args[1:]...)
		r := l.rayform("", argv...)
		keep(what, r.stdout+r.stderr)
		return r
	}
	noContainers := func(when string) {
		t.Helper()
		for _, n := range []string{"spark1", "spark2"} {
			out, err := l.ssh(n, "docker ps -aq")
			if err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("%s: containers on %s: %q %v", when, n, out, err)
			}
		}
	}

	for _, cmd := range [][]string{{"plan"}, {"apply", "-auto-approve"}} {
		r := run(cmd[0]+" with a wrong token", wrongFile, cmd...)
		mustCode(t, cmd[0]+" with a wrong token", r, 1)
		mustContain(t, cmd[0]+" with a wrong token", r.stdout+r.stderr,
			"the hub's list of rayform-lab/big@main could not be read",
			"the hub answered 401: it refused the token",
			"Fix: set the model's token to a valid token with read access")
		if strings.Contains(r.stdout+r.stderr, wrong) {
			t.Errorf("%s prints the wrong token", cmd[0])
		}
	}
	noContainers("after the refused apply")

	plan := run("plan", rightFile, "plan", "-detailed-exitcode")
	mustCode(t, "plan", plan, 2)
	mustContain(t, "plan", plan.stdout, "# model.m will be created",
		"# (spark1: absent, 67.1 MB to stage, downloaded from the hub (",
		"# (spark2: absent, 67.1 MB to stage from spark1 over the fabric, once it has downloaded it (")

	stop := make(chan struct{})
	wg := l.sampleArgv(stop, 100*time.Millisecond, keep, "spark1", "spark2")
	apply := run("apply", rightFile, "apply", "-auto-approve")
	close(stop)
	wg.Wait()
	mustCode(t, "apply", apply, 0)
	mustContain(t, "apply", apply.stdout,
		"model.m: download rayform-lab/big@",
		") to spark1 from the hub http://"+lab.HubAddr(),
		"model.m: spark1: 67.1 MB of 67.1 MB (100%), done",
		"model.m: stage rayform-lab/big (67.1 MB) from spark1 to spark2 over the fabric",
		"model.m: spark2: 67.1 MB of 67.1 MB (100%), done",
		"Apply complete!")
	mustCode(t, "second plan", run("second plan", rightFile, "plan", "-detailed-exitcode"), 0)
	if a, b := l.snapshotSums(t, "spark1", lab.HubRepoBig), l.snapshotSums(t, "spark2", lab.HubRepoBig); a != b {
		t.Errorf("the nodes' files differ:\n%s\n%s", a, b)
	}

	// Files rayform wrote: state and configuration directory, the nodes'
	// homes, serve records and logs, and their model caches.
	roots := []string{dir, "/var/tmp/rayform/" + filepath.Base(dir)}
	for _, n := range lb.Nodes {
		roots = append(roots, n.Home, n.ModelCacheHostDir())
	}
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !d.Type().IsRegular() {
				return nil
			}
			if fi, err := d.Info(); err == nil && fi.Size() > 64<<20 {
				return nil // a shard: generated content
			}
			b, _ := os.ReadFile(p)
			keep(p, string(b))
			return nil
		})
	}
	scanned := 0
	for _, s := range seen {
		where, text, _ := strings.Cut(s, "\x00")
		scanned += len(text)
		if strings.Contains(text, token) {
			t.Errorf("the token is in %s", where)
		}
	}
	t.Logf("scanned %d places, %d bytes; apply (download and staging, then serve) took %s", len(seen), scanned, apply.elapsed)
}

// TestE2EModelDiskFull: every node's model cache is a 30 MiB filesystem
// (lab up -model-disk), the model (seeded on the head) 25.2 MB, and a 12
// MiB file fills part of the worker's. plan refuses it before anything
// runs, naming the node, the need and the free space. With a corrupt
// partial shard there (sparse: it takes no space, so plan counts its
// bytes as already transferred and lets apply start), staging finds the
// hash wrong, fetches the shard again and fills the disk mid-copy: apply
// ends with the node, the cause and the fix, before any container exists,
// and nothing is left under a final name that is not whole (the next plan
// shows the worker partial, not complete). Once the filler is gone, the
// next apply converges and the files match the head's.
func TestE2EModelDiskFull(t *testing.T) {
	// Fast mode: the subject is the model kind (staging, download, the
	// nodes' model caches), not Ray.
	l := startLab(t, "rfe2emdf", append([]string{"-model-disk", "30M"}, fastRay...)...)
	if out, err := l.ssh("spark2", "head -c 12M /dev/zero > /var/lib/rayform/huggingface/filler"); err != nil {
		t.Fatalf("filling the disk: %v\n%s", err, out)
	}
	dir := l.modelConfig(2, fmt.Sprintf("model \"m\" {\n  source   = %q\n  endpoint = \"http://%s\"\n}", lab.HubRepoTiny, lab.HubAddr()), "")

	plan := l.rayform("", "-chdir", dir, "plan")
	mustCode(t, "plan on a small disk", plan, 1)
	mustContain(t, "plan on a small disk", plan.stdout,
		`Error: not enough disk space on spark2 for rayform-lab/tiny`,
		"25.2 MB to stage into /var/lib/rayform/huggingface/hub/models--rayform-lab--tiny, but its filesystem has 18.")

	// A corrupt partial of the first shard, as long as the shard.
	repo := "/var/lib/rayform/huggingface/hub/models--rayform-lab--tiny"
	blob, err := l.ssh("spark1", "basename $(readlink "+repo+"/snapshots/*/model-00001-of-00002.safetensors)")
	if err != nil {
		t.Fatalf("the head's shard: %v\n%s", err, blob)
	}
	blob = strings.TrimSpace(blob)
	if out, err := l.ssh("spark2", "mkdir -p "+repo+"/blobs && truncate -s 16M "+repo+"/blobs/"+blob+".incomplete"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	plan = l.rayform("", "-chdir", dir, "plan")
	mustCode(t, "plan with the partial", plan, 0)
	mustContain(t, "plan with the partial", plan.stdout, "(16.8 MB already transferred)")

	apply := l.rayform("", "-chdir", dir, "apply", "-auto-approve")
	mustCode(t, "apply that fills the disk", apply, 1)
	if testing.Verbose() {
		t.Logf("the apply that filled the disk:\n%s", apply.stderr)
	}
	mustContain(t, "apply that fills the disk", apply.stdout+apply.stderr,
		"spark2: staging rayform-lab/tiny from spark1",
		"free space there (or give the model a larger cache_dir) and apply again",
		"Nothing was changed")
	for _, n := range []string{"spark1", "spark2"} {
		if out, err := l.ssh(n, "docker ps -aq"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("containers on %s after the failed staging: %q %v", n, out, err)
		}
	}
	plan = l.rayform("", "-chdir", dir, "plan")
	mustContain(t, "plan after the failure", plan.stdout, "# (spark2: partial, ")

	if out, err := l.ssh("spark2", "rm /var/lib/rayform/huggingface/filler"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	apply = l.rayform("", "-chdir", dir, "apply", "-auto-approve")
	mustCode(t, "apply with the space", apply, 0)
	mustCode(t, "plan after", l.rayform("", "-chdir", dir, "plan", "-detailed-exitcode"), 0)
	if a, b := l.snapshotSums(t, "spark1", lab.HubRepoTiny), l.snapshotSums(t, "spark2", lab.HubRepoTiny); a != b {
		t.Errorf("the nodes' files differ:\n%s\n%s", a, b)
	}
}

// TestE2EModelLinkCut: no node has the model (the lab hub's gated 1 GiB
// repository); apply downloads it onto the head, then stages it to the
// worker over the fabric, and the worker's fabric link is cut mid-copy.
// apply ends with the node, the cause and that the next apply resumes,
// before any container exists; the next plan shows the worker partial
// with bytes already transferred (nothing under a final name that is not
// whole); once the link is back, the next apply resumes and converges,
// and the files match.
func TestE2EModelLinkCut(t *testing.T) {
	// Fast mode: the subject is the model kind (staging, download, the
	// nodes' model caches), not Ray.
	l := startLab(t, "rfe2emdc", append([]string{"-model-seed=false"}, fastRay...)...)
	lb, err := lab.Load(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	varFile := filepath.Join(t.TempDir(), "hub.rfvars")
	os.WriteFile(varFile, []byte(fmt.Sprintf("hf_token = %q\n", lb.HubToken())), 0o600)
	dir := l.modelConfig(2, fmt.Sprintf(`variable "hf_token" {
  type      = string
  sensitive = true
}

model "m" {
  source   = %q
  endpoint = "http://%s"
  token    = var.hf_token
}`, lab.HubRepoBig, lab.HubAddr()), "")
	labCmd := func(op string) {
		t.Helper()
		if out, err := l.rflab(op, "-name", l.name, "spark2").CombinedOutput(); err != nil {
			t.Fatalf("lab %s: %v\n%s", op, err, out)
		}
	}
	t.Cleanup(func() { l.rflab("uncut", "-name", l.name, "spark2").Run() })

	// The lab's fabric moves the 1.1 GB in about two seconds, one
	// progress interval: spark1's fabric link is slowed (240 Mbit/s) so
	// that the cut lands mid-copy, and restored after.
	var spark1 lab.Node
	for _, n := range lb.Nodes {
		if n.Name == "spark1" {
			spark1 = n
		}
	}
	tc := func(args ...string) {
		t.Helper()
		argv := append([]string{"netns", "exec", spark1.Netns, "tc", "qdisc"}, args...)
		if out, err := exec.Command("ip", argv...).CombinedOutput(); err != nil {
			t.Fatalf("tc %v: %v\n%s", args, err, out)
		}
	}
	tc("add", "dev", spark1.FabricIfname, "root", "tbf", "rate", "240mbit", "burst", "256kb", "latency", "400ms")
	cmd, out := l.start("-chdir="+dir, "apply", "-var-file="+varFile, "-auto-approve")
	receiving := regexp.MustCompile(`model\.m: spark2: [1-9][0-9.]* [kMG]B of `)
	for deadline := time.Now().Add(5 * time.Minute); !receiving.MatchString(out.String()); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 5m0s waiting for spark2 receiving over the fabric; apply so far:\n%s", out.String())
		}
	}
	labCmd("cut")
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("apply with the cut: %v, want exit 1\n%s", err, out.String())
	}
	mustContain(t, "apply with the cut", out.String(),
		"model.m: stage rayform-lab/big (1.1 GB) from spark1 to spark2 over the fabric failed",
		"spark2: staging rayform-lab/big from spark1 (192.168.200.12)",
		"the next apply resumes it",
		"Nothing was changed")
	if strings.Contains(out.String(), "spark2: 1.1 GB of 1.1 GB (100%), done") {
		t.Fatalf("staging ended before the cut:\n%s", out.String())
	}
	for _, n := range []string{"spark1", "spark2"} {
		if o, err := l.ssh(n, "docker ps -aq"); err != nil || strings.TrimSpace(o) != "" {
			t.Errorf("containers on %s after the cut: %q %v", n, o, err)
		}
	}
	labCmd("uncut")
	tc("del", "dev", spark1.FabricIfname, "root")
	plan := l.rayform("", "-chdir", dir, "plan", "-var-file="+varFile)
	mustContain(t, "plan after the cut", plan.stdout, "# (spark1: complete)", "# (spark2: partial, ", "already transferred)")

	apply := l.rayform("", "-chdir", dir, "apply", "-var-file="+varFile, "-auto-approve")
	mustCode(t, "apply after the cut", apply, 0)
	mustCode(t, "plan after", l.rayform("", "-chdir", dir, "plan", "-var-file="+varFile, "-detailed-exitcode"), 0)
	if a, b := l.snapshotSums(t, "spark1", lab.HubRepoBig), l.snapshotSums(t, "spark2", lab.HubRepoBig); a != b {
		t.Errorf("the nodes' files differ:\n%s\n%s", a, b)
	}
	if testing.Verbose() {
		t.Logf("the apply cut short:\n%s\nthe next:\n%s", out.String(), apply.stdout)
	}
}

// TestE2EModelStagedWhileServing: a serve runs on spark1 and spark2 with
// the model; spark3 joins the cluster. apply stages the model to spark3
// before it changes anything, and while it stages (the fabric slowed so
// that it takes seconds) the running serve keeps answering; then the
// cluster grows, the serve is restarted, and the next plan is empty.
func TestE2EModelStagedWhileServing(t *testing.T) {
	// Fast mode: the subject is the model kind (staging, download, the
	// nodes' model caches), not Ray.
	l := startLab(t, "rfe2emdw", append([]string{"-nodes", "3"}, fastRay...)...)
	block := fmt.Sprintf("model \"m\" {\n  source   = %q\n  endpoint = \"http://%s\"\n}", lab.HubRepoTiny, lab.HubAddr())
	dir := l.modelConfig(2, block, "")
	mustCode(t, "first apply", l.rayform("", "-chdir", dir, "apply", "-auto-approve"), 0)
	three, err := os.ReadFile(filepath.Join(l.modelConfig(3, block, ""), "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), three, 0o644); err != nil {
		t.Fatal(err)
	}
	plan := l.rayform("", "-chdir", dir, "plan")
	mustContain(t, "plan with spark3", plan.stdout, "# (spark1: complete)", "# (spark2: complete)", "# (spark3: absent, 25.2 MB to stage from spark1 over the fabric (")

	lb, err := lab.Load(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	spark1 := lb.Nodes[0]
	tc := func(args ...string) {
		t.Helper()
		argv := append([]string{"netns", "exec", spark1.Netns, "tc", "qdisc"}, args...)
		if out, err := exec.Command("ip", argv...).CombinedOutput(); err != nil {
			t.Fatalf("tc %v: %v\n%s", args, err, out)
		}
	}
	tc("add", "dev", spark1.FabricIfname, "root", "tbf", "rate", "24mbit", "burst", "64kb", "latency", "400ms")
	defer tc("del", "dev", spark1.FabricIfname, "root")
	health := func() string {
		// vLLM listens on the head's fabric address (listen's default):
		// asked from spark2, on the fabric.
		out, _ := exec.Command("ip", "netns", "exec", lb.Nodes[1].Netns, "curl", "-s", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
			"http://"+spark1.FabricIP+":8000/health").Output()
		return string(out)
	}
	if got := health(); got != "200" {
		t.Fatalf("the serve answers %q before the apply", got)
	}
	cmd, out := l.start("-chdir="+dir, "apply", "-auto-approve")
	receiving := regexp.MustCompile(`model\.m: spark3: [1-9][0-9.]* [kMG]B of `)
	waitFor(t, "spark3 receiving over the fabric", 3*time.Minute, func() bool { return receiving.MatchString(out.String()) })
	during := health()
	stillStaging := !strings.Contains(out.String(), "model.m: spark3: 25.2 MB of 25.2 MB (100%), done")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	if !stillStaging {
		t.Fatalf("staging ended before the serve was asked:\n%s", out.String())
	}
	if during != "200" {
		t.Errorf("while spark3 received the model the serve answered %q, want 200\n%s", during, out.String())
	}
	o := out.String()
	if done, changed := strings.Index(o, "model.m: spark3: 25.2 MB of 25.2 MB (100%), done"), strings.Index(o, "ray_cluster.spark: Modifying..."); done < 0 || changed < 0 || done > changed {
		t.Errorf("staging must end (at %d) before the cluster changes (at %d):\n%s", done, changed, o)
	}
	mustCode(t, "plan after", l.rayform("", "-chdir", dir, "plan", "-detailed-exitcode"), 0)
}

// TestE2EModelPlanWithoutTheHub: after a converged apply (the head
// seeded, the worker staged from it), each node holds the manifest its
// copy was verified against. With the hub unreachable (the model's
// endpoint a closed port on the lab's management network), plan
// -detailed-exitcode exits 0 and warns, naming the hub, the cause and the
// node and time of the record; status still judges every copy. A model
// whose nodes hold no record is an error with its cause and fix. With a
// hub that answers 503, plan warns the same way; plan -destroy and destroy
// never ask it.
func TestE2EModelPlanWithoutTheHub(t *testing.T) {
	// Fast mode: the subject is the model kind, not Ray.
	l := startLab(t, "rfe2emdh", fastRay...)
	up := fmt.Sprintf("model \"m\" {\n  source   = %q\n  endpoint = \"http://%s\"\n}", lab.HubRepoTiny, lab.HubAddr())
	dir := l.modelConfig(2, up, "")
	apply := l.rayform("", "-chdir", dir, "apply", "-auto-approve")
	mustCode(t, "apply", apply, 0)
	mustContain(t, "apply", apply.stdout, "model.m: stage rayform-lab/tiny (25.2 MB) from spark1 to spark2 over the fabric")
	for _, n := range []string{"spark1", "spark2"} {
		rec, err := l.ssh(n, "cat /var/lib/rayform/huggingface/hub/models--rayform-lab--tiny/.rayform/manifests/main.json")
		if err != nil || !strings.Contains(rec, `"repo": "rayform-lab/tiny"`) || !strings.Contains(rec, `"sha256"`) {
			t.Errorf("%s's record: %v\n%s", n, err, rec)
		}
	}

	// The hub's port closed: nothing listens on HubPort+1 there.
	down := fmt.Sprintf("http://%s:%d", lab.ClientIP(), lab.HubPort+1)
	hcl := filepath.Join(dir, "main.hcl")
	src, err := os.ReadFile(hcl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hcl, []byte(strings.Replace(string(src), "http://"+lab.HubAddr(), down, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := l.rayform("", "-chdir", dir, "plan", "-detailed-exitcode")
	mustCode(t, "plan without the hub", plan, 0)
	mustContain(t, "plan without the hub", plan.stdout+plan.stderr,
		"Warning: the hub at "+down+" did not answer: judging the nodes against the list of rayform-lab/tiny@main recorded on spark",
		"connection refused",
		"No changes.")
	if !regexp.MustCompile(`was recorded on spark\d at 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ`).MatchString(plan.stdout + plan.stderr) {
		t.Errorf("the warning does not say where and when the list was recorded:\n%s%s", plan.stdout, plan.stderr)
	}
	status := l.rayform("", "-chdir", dir, "status")
	mustContain(t, "status without the hub", status.stdout, "  spark1: complete", "  spark2: complete", "judged against the list recorded on spark")

	// Another model, recorded nowhere: the hub's silence is an error.
	other := strings.Replace(string(src), "http://"+lab.HubAddr(), down, 1)
	other = strings.Replace(other, "source   = \""+lab.HubRepoTiny+"\"", "source   = \""+lab.HubRepoBig+"\"", 1)
	if err := os.WriteFile(hcl, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	refused := l.rayform("", "-chdir", dir, "plan")
	mustCode(t, "plan of a model recorded nowhere", refused, 1)
	mustContain(t, "plan of a model recorded nowhere", refused.stdout+refused.stderr,
		"the hub's list of rayform-lab/big@main could not be read", "connection refused",
		"no node holds a list of rayform-lab/big@main recorded by an earlier apply",
		"Fix: make the hub at "+down+" reachable from this machine")

	// A hub on the loopback of the namespace rayform runs in, that
	// answers every request 503 and counts them: plan judges the nodes by
	// their records; destroy never asks it.
	var asked atomic.Int32
	ln, err := lab.ListenIn(l.name+"-client", "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	busy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	busy.Listener.Close()
	busy.Listener = ln
	busy.Start()
	defer busy.Close()
	if err := os.WriteFile(hcl, []byte(strings.Replace(string(src), "http://"+lab.HubAddr(), busy.URL, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	busyPlan := l.rayform("", "-chdir", dir, "plan", "-detailed-exitcode")
	mustCode(t, "plan with the hub answering 503", busyPlan, 0)
	mustContain(t, "plan with the hub answering 503", busyPlan.stdout+busyPlan.stderr, "Warning: the hub at "+busy.URL+" did not answer", "it answered 503 Service Unavailable")
	if asked.Load() == 0 {
		t.Error("plan did not ask the hub")
	}
	asked.Store(0)
	for _, args := range [][]string{{"plan", "-destroy"}, {"destroy", "-auto-approve"}} {
		mustCode(t, strings.Join(args, " ")+" without the hub", l.rayform("", append([]string{"-chdir", dir}, args...)...), 0)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("plan -destroy and destroy asked the hub %d times", n)
	}
	for _, n := range []string{"spark1", "spark2"} {
		if out, err := l.ssh(n, "docker ps -aq"); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("containers on %s after destroy: %q %v", n, out, err)
		}
	}
}

// TestE2EModelTwoNetworks: two clusters on two networks (the lab's fabric
// split in two subnets: spark1 and spark2 on 192.168.200.12/31, spark3
// and spark4 on 192.168.200.14/31) serve the same model, which only the
// head of the first holds. plan shows per node its source: spark2 from
// spark1 over network a; network b has no complete copy, so spark3
// downloads it from the hub and spark4 receives it from spark3 over
// network b. apply does so, both serves serve, every copy matches the
// head's, and the next plan has nothing to do.
func TestE2EModelTwoNetworks(t *testing.T) {
	// Fast mode: the subject is the model kind, not Ray.
	l := startLab(t, "rfe2emd2", append([]string{"-nodes", "4"}, fastRay...)...)
	tmp := t.TempDir()
	dir := filepath.Join(tmp, l.name+"-"+filepath.Base(tmp))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll("/var/tmp/rayform/" + filepath.Base(dir)) })
	var b strings.Builder
	for i := range 4 {
		fmt.Fprintf(&b, "node \"spark%d\" {\n  host          = \"10.1.230.%d\"\n  user          = \"root\"\n  identity_file = %q\n  gpus          = 1\n}\n\n",
			i+1, 180+i, filepath.Join(l.dir, "id_ed25519"))
	}
	for i, c := range []struct{ name, cidr, head, worker string }{{"a", "192.168.200.12/31", "spark1", "spark2"}, {"b", "192.168.200.14/31", "spark3", "spark4"}} {
		fmt.Fprintf(&b, `network %[1]q {
  cidr      = %[2]q
  interface = %[3]q
}

ray_cluster %[1]q {
  image           = %[4]q
  head            = node.%[5]s
  workers         = [node.%[6]s]
  network         = network.%[1]s
  memory_monitor  = false
  dataplane_check = false
}

vllm_serve %[1]q {
  cluster                = ray_cluster.%[1]s
  model                  = model.m.source
  served_model_name      = "m%[7]d"
  pipeline_parallel_size = 2
  gpu_memory_utilization = 0.85
  max_model_len          = 4096
  ready_timeout          = "2m"
}

`, c.name, c.cidr, lab.DefaultFabricIfname, seedImage, c.head, c.worker, i)
	}
	fmt.Fprintf(&b, "model \"m\" {\n  source   = %q\n  endpoint = \"http://%s\"\n}\n", lab.HubRepoTiny, lab.HubAddr())
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	plan := l.rayform("", "-chdir", dir, "plan", "-detailed-exitcode")
	mustCode(t, "plan", plan, 2)
	mustContain(t, "plan", plan.stdout,
		"# (spark1: complete)",
		"# (spark2: absent, 25.2 MB to stage from spark1 over network a (",
		"# (spark3: absent, 25.2 MB to stage, downloaded from the hub (",
		"# (spark4: absent, 25.2 MB to stage from spark3 over network b, once it has downloaded it (")
	apply := l.rayform("", "-chdir", dir, "apply", "-auto-approve")
	mustCode(t, "apply", apply, 0)
	mustContain(t, "apply", apply.stdout,
		"model.m: stage rayform-lab/tiny (25.2 MB) from spark1 to spark2 over the fabric",
		"model.m: download rayform-lab/tiny@",
		") to spark3 from the hub http://"+lab.HubAddr(),
		"model.m: stage rayform-lab/tiny (25.2 MB) from spark3 to spark4 over the fabric",
		"Apply complete!")
	if strings.Contains(apply.stdout, "from spark1 to spark3") || strings.Contains(apply.stdout, "from spark1 to spark2, spark3") {
		t.Errorf("network b staged from spark1, across networks:\n%s", apply.stdout)
	}
	mustCode(t, "plan after", l.rayform("", "-chdir", dir, "plan", "-detailed-exitcode"), 0)
	head := l.snapshotSums(t, "spark1", lab.HubRepoTiny)
	for _, n := range []string{"spark2", "spark3", "spark4"} {
		if got := l.snapshotSums(t, n, lab.HubRepoTiny); got != head {
			t.Errorf("%s's files differ from the head's:\n%s\nhead:\n%s", n, got, head)
		}
	}
}

// loadAvg is this machine's 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// TestE2EModelBenchApplyToServing measures, for BENCHMARKS.md, the time
// from apply to serving on a 3-node lab with the lab hub's 1 GiB
// repository on the head only: with staging it to the two workers, and,
// after destroy, without (every node holds it). The images are pulled
// before either. Set RAYFORM_E2E_MODEL_BENCH=1 to run it.
func TestE2EModelBenchApplyToServing(t *testing.T) {
	if os.Getenv("RAYFORM_E2E_MODEL_BENCH") == "" {
		t.Skip("set RAYFORM_E2E_MODEL_BENCH=1 to measure")
	}
	// Fast mode: the subject is the model kind (staging, download, the
	// nodes' model caches), not Ray.
	l := startLab(t, "rfe2emdb", append([]string{"-nodes", "3", "-model-seed=false"}, fastRay...)...)
	lb, err := lab.Load(l.dir)
	if err != nil {
		t.Fatal(err)
	}
	varFile := filepath.Join(t.TempDir(), "hub.rfvars")
	os.WriteFile(varFile, []byte(fmt.Sprintf("hf_token = %q\n", lb.HubToken())), 0o600)
	block := fmt.Sprintf(`variable "hf_token" {
  type      = string
  sensitive = true
}

model "m" {
  source   = %q
  endpoint = "http://%s"
  token    = var.hf_token
}`, lab.HubRepoBig, lab.HubAddr())
	// The head alone first: its cluster is spark1, so the model goes
	// there only (downloaded from the hub).
	dir := l.modelConfig(1, block, "")
	mustCode(t, "download onto the head", l.rayform("", "-chdir", dir, "apply", "-var-file="+varFile, "-auto-approve", "-target=model.m"), 0)
	three, err := os.ReadFile(filepath.Join(l.modelConfig(3, block, ""), "main.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), three, 0o644); err != nil {
		t.Fatal(err)
	}
	mustCode(t, "pull the images", l.rayform("", "-chdir", dir, "apply", "-var-file="+varFile, "-auto-approve", "-target=ray_cluster.spark"), 0)
	mustCode(t, "destroy", l.rayform("", "-chdir", dir, "destroy", "-var-file="+varFile, "-auto-approve"), 0)

	loadStaged := loadAvg()
	staged := l.rayform("", "-chdir", dir, "apply", "-var-file="+varFile, "-auto-approve")
	mustCode(t, "apply with staging", staged, 0)
	mustContain(t, "apply with staging", staged.stdout, "model.m: stage rayform-lab/big (1.1 GB) from spark1 to spark2, spark3 over the fabric")
	mustCode(t, "destroy", l.rayform("", "-chdir", dir, "destroy", "-var-file="+varFile, "-auto-approve"), 0)
	loadPlain := loadAvg()
	plain := l.rayform("", "-chdir", dir, "apply", "-var-file="+varFile, "-auto-approve")
	mustCode(t, "apply without staging", plain, 0)
	if strings.Contains(plain.stdout, "model.m: stage") {
		t.Errorf("the apply after destroy staged again:\n%s", plain.stdout)
	}
	t.Logf("apply to serving (3 nodes, images present, %s 1.1 GB on the head): with staging to 2 nodes %s (load average %s), without staging %s (load average %s)",
		lab.HubRepoBig, staged.elapsed.Round(100*time.Millisecond), loadStaged, plain.elapsed.Round(100*time.Millisecond), loadPlain)
	var rates []string
	for _, line := range strings.Split(staged.stdout, "\n") {
		if strings.Contains(line, "(100%)") && !strings.HasSuffix(line, "done") && strings.Contains(line, "model.m: spark") {
			rates = append(rates, strings.TrimPrefix(line, "model.m: "))
		}
	}
	t.Logf("last rates reported: %s", strings.Join(rates, "; "))
}
