//go:build linux

package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayform/rayform/cmd/rflab/lab"
)

// TestE2ESecretsStaySecret gives a sensitive token to the cluster's env,
// the serve's env and the serve's api_key, as it is and derived through
// templates, functions, a local and a for expression, and looks for it
// (and its upper-cased form) everywhere it must not be (issue 12, findings
// 6-8; issue 23, item 6): plan text, plan -json, the saved plan, the
// state, trace logs, error output, `rayform logs`, `output`, `status`,
// `show` (text and -json), every process's argv on
// the nodes while apply runs, `docker inspect` of the containers and
// Docker's own record of them on the host's disk (config.v2.json: issue
// 30, item 8, where -e put the cluster's env values), and the files
// rayform writes on the hosts (serve logs and records, the SSH user's
// home) after success, failure and kill -9. The containers' processes
// (Ray's, vLLM's) must still get the env. vLLM must still get the key: /v1/models
// refuses a request without it. Before that, a configuration that puts
// values derived from the token in served_model_name, model,
// container_name, docker_args and volumes is refused by validate, plan,
// plan -json and apply, at the arguments' lines, and creates nothing.
func TestE2ESecretsStaySecret(t *testing.T) {
	// Fast mode: the subject is where a secret goes (argv, files,
	// outputs, logs), not Ray.
	l := startLab(t, "rfe2esec", fastRay...)
	var b [12]byte
	rand.Read(b[:])
	secret := "rfSECRET" + hex.EncodeToString(b[:])
	varFile := filepath.Join(t.TempDir(), "secret.rfvars")
	if err := os.WriteFile(varFile, []byte(fmt.Sprintf("token = %q\n", secret)), 0o600); err != nil {
		t.Fatal(err)
	}
	body := `
variable "token" {
  type      = string
  sensitive = true
}

locals {
  derived = join(",", [for t in [var.token] : "x-${t}"])
}

output "auth" {
  value     = "Bearer ${var.token}"
  sensitive = true
}
` + strings.Replace(strings.Replace(clusterConfig("enp1s0f1np1", seedImage, false, 0.85),
		"  memory_monitor = false\n", "  memory_monitor = false\n  env            = { HF_TOKEN = var.token, AUTH = \"Bearer ${upper(var.token)}\", DERIVED = local.derived }\n", 1),
		"  ready_timeout          = \"2m\"\n", "  ready_timeout          = \"2m\"\n  api_key                = trimspace(var.token)\n  env                    = { HF_TOKEN = var.token, TOKEN = format(\"t-%s\", var.token) }\n", 1)
	dir := l.config(body)
	project := filepath.Base(dir)
	lb, err := lab.Load(l.dir)
	if err != nil {
		t.Fatal(err)
	}

	var seen []string // everything to scan, with where it came from
	keep := func(where, text string) { seen = append(seen, where+"\x00"+text) }
	run := func(what string, args ...string) result {
		t.Helper()
		argv := append([]string{"-chdir=" + dir, "-log-level=trace", args[0], "-var-file=" + varFile}, args[1:]...)
		r := l.rayform("", argv...)
		keep(what, r.stdout+r.stderr)
		return r
	}
	// psWhile samples every process's argv on both nodes until stop.
	psWhile := func(stop <-chan struct{}) *sync.WaitGroup {
		return l.sampleArgv(stop, 200*time.Millisecond, keep, "spark1", "spark2")
	}
	// hostFiles keeps every file rayform may write on the hosts: the SSH
	// user's home and the project's serve records and logs, and checks the
	// serve logs are 0600.
	hostFiles := func(when string) {
		t.Helper()
		roots := []string{"/var/tmp/rayform/" + project}
		for _, n := range lb.Nodes {
			roots = append(roots, n.Home)
		}
		for _, root := range roots {
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !d.Type().IsRegular() {
					return nil
				}
				b, _ := os.ReadFile(p)
				keep(when+": "+p, string(b))
				if strings.HasSuffix(p, ".log") && strings.Contains(p, "/serve-") {
					if fi, err := os.Stat(p); err == nil && fi.Mode().Perm() != 0o600 {
						t.Errorf("%s: serve log %s has mode %04o, want 0600", when, p, fi.Mode().Perm())
					}
				}
				return nil
			})
		}
	}

	// Values derived from the token where they would reach a command
	// line, a container's name or label, or a mount: refused before any
	// host is touched, at each argument's line, without the value.
	refused := map[string]string{
		"served_model_name": `"s${var.token}"`,
		"model":             `substr(var.token, 0, 8)`,
		"container_name":    `format("ray-%s", var.token)`,
		"docker_args":       `["--label", "tok=${var.token}"]`,
		"volumes":           `[for t in [var.token] : "/tmp/${t}:/x"]`,
	}
	// Two configurations: a serve is not evaluated once its cluster is
	// refused, so the serve's arguments are refused with a valid cluster.
	badCluster := l.config(strings.Replace(body, "  memory_monitor = false\n",
		"  memory_monitor = false\n  container_name = "+refused["container_name"]+"\n  docker_args    = "+refused["docker_args"]+"\n  volumes        = "+refused["volumes"]+"\n", 1))
	badServe := l.config(strings.NewReplacer(
		`  served_model_name      = "qwen3.5-122b"`, `  served_model_name      = `+refused["served_model_name"],
		`  model                  = "Qwen/Qwen3.5-122B-A10B-FP8"`, `  model                  = `+refused["model"],
	).Replace(body))
	for _, badDir := range []string{badCluster, badServe} {
		src, _ := os.ReadFile(filepath.Join(badDir, "main.hcl"))
		for _, cmd := range [][]string{{"validate"}, {"plan"}, {"plan", "-json"}, {"apply", "-auto-approve"}} {
			what := "refused config: " + strings.Join(cmd, " ")
			argv := append([]string{"-chdir=" + badDir, "-log-level=trace", cmd[0]}, cmd[1:]...)
			if cmd[0] != "validate" { // validate checks without variable values
				argv = append(argv, "-var-file="+varFile)
			}
			r := l.rayform("", argv...)
			out := r.stdout + r.stderr
			keep(what, out)
			mustCode(t, what, r, exitError)
			for arg, expr := range refused {
				line := 0
				for i, ln := range strings.Split(string(src), "\n") {
					if strings.Contains(ln, expr) {
						line = i + 1
					}
				}
				if line == 0 {
					continue // the other configuration's
				}
				mustContain(t, what, out, "Sensitive value in "+arg)
				if !strings.Contains(out, fmt.Sprintf("on main.hcl line %d", line)) && !strings.Contains(out, fmt.Sprintf(`"line":%d`, line)) {
					t.Errorf("%s: the error for %s does not name main.hcl line %d:\n%s", what, arg, line, out)
				}
			}
		}
	}
	for _, node := range []string{"spark1", "spark2"} {
		out, _ := l.ssh(node, "docker ps -a --format '{{.Names}} {{.Labels}}'")
		keep("docker ps -a on "+node+" after the refused config", out)
		if strings.Contains(out, filepath.Base(badCluster)) || strings.Contains(out, filepath.Base(badServe)) {
			t.Errorf("the refused configuration created a container on %s:\n%s", node, out)
		}
	}
	// inspect keeps what `docker inspect` shows of rayform's containers on
	// every node, their environment included, and Docker's record of each
	// on the host's disk.
	inspect := func(when string) {
		t.Helper()
		for _, node := range []string{"spark1", "spark2"} {
			out, _ := l.ssh(node, `for c in $(docker ps -aq --filter label=rayform.project=`+project+`); do docker inspect "$c"; done`)
			keep(fmt.Sprintf("docker inspect on %s %s", node, when), out)
			if !strings.Contains(out, `"Env"`) {
				t.Errorf("docker inspect on %s %s shows no environment: %s", node, when, out)
			}
			disk, _ := l.ssh(node, `r=$(docker info --format '{{.DockerRootDir}}') && for c in $(docker ps -aq --no-trunc --filter label=rayform.project=`+project+`); do cat "$r/containers/$c/config.v2.json"; done`)
			keep(fmt.Sprintf("config.v2.json on %s %s", node, when), disk)
			if !strings.Contains(disk, `"Config"`) {
				t.Errorf("no config.v2.json of a rayform container on %s %s: %.200s", node, when, disk)
			}
			// The rayform.attrs label is base64url: scan it decoded too.
			labels, _ := l.ssh(node, `docker ps -aq --filter label=rayform.project=`+project+` | xargs -r docker inspect --format '{{index .Config.Labels "rayform.attrs"}}'`)
			for _, v := range strings.Fields(labels) {
				if b, err := base64.RawURLEncoding.DecodeString(v); err == nil {
					keep(fmt.Sprintf("rayform.attrs on %s %s", node, when), string(b))
				}
			}
			if !strings.Contains(out, "rayform") {
				t.Errorf("docker inspect on %s %s shows no rayform container: %s", node, when, out)
			}
		}
	}

	planFile := filepath.Join(t.TempDir(), "secret.plan")
	mustCode(t, "plan -out", run("plan", "plan", "-out", planFile), exitOK)
	mustCode(t, "plan -json", run("plan -json", "plan", "-json"), exitOK)
	pf, err := os.ReadFile(planFile)
	if err != nil {
		t.Fatal(err)
	}
	keep("saved plan", string(pf))

	// A successful apply, watched by ps on the nodes.
	stop := make(chan struct{})
	wg := psWhile(stop)
	r := run("apply", "apply", planFile)
	close(stop)
	wg.Wait()
	mustCode(t, "apply", r, exitOK)
	st, _ := os.ReadFile(filepath.Join(dir, ".rayform", "state.json"))
	keep("state", string(st))
	hostFiles("after success")
	inspect("after success")
	// Issue 23, item 7: the deployment's secret-digest key, made 0600 by
	// the lock holder on every host it fenced.
	for _, n := range lb.Nodes {
		key := filepath.Join(n.Home, ".rayform", "locks", project+".spark.key")
		if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("secret-digest key on %s: %v (want mode 0600)", n.Name, err)
		}
	}
	// The derived env value reached the containers' processes intact:
	// Ray's (the container's first process) on every node, and vLLM's,
	// started by docker exec, on the head (read, not kept for the scan:
	// a process's environment is where it belongs).
	for _, node := range []string{"spark1", "spark2"} {
		out, err := l.ssh(node, `docker exec rayform-spark sh -c 'tr "\0" "\n" < /proc/1/environ'`)
		if !slices.Contains(strings.Split(out, "\n"), "AUTH=Bearer "+strings.ToUpper(secret)) {
			t.Errorf("Ray's process on %s has no AUTH=\"Bearer \" and the upper-cased token in its environment (err %v)", node, err)
		}
	}
	vllmEnv, err := l.ssh("spark1", `docker exec rayform-spark sh -c 'for p in /proc/[0-9]*; do [ $p = /proc/$$ ] && continue; if tr "\0" " " < $p/cmdline 2>/dev/null | grep -q "vllm serve"; then tr "\0" "\n" < $p/environ; fi; done'`)
	if lines := strings.Split(vllmEnv, "\n"); !slices.Contains(lines, "AUTH=Bearer "+strings.ToUpper(secret)) || !slices.Contains(lines, "HF_TOKEN="+secret) {
		t.Errorf("vllm serve on spark1 lacks the cluster's AUTH or its own HF_TOKEN in its environment (err %v; %d lines)", err, len(lines))
	}
	mustCode(t, "logs of the serve", run("logs of the serve", "logs", "vllm_serve.qwen"), exitOK)
	mustCode(t, "logs of the cluster", run("logs of the cluster", "logs", "ray_cluster.spark"), exitOK)
	mustCode(t, "output", run("output", "output"), exitOK)
	// (output -json prints sensitive outputs' values, as Terraform's does
	// for scripts, so it is not scanned.)
	mustCode(t, "status", run("status", "status"), exitOK)
	mustCode(t, "status -json", run("status -json", "status", "-json"), exitOK)
	for _, args := range [][]string{{"show", planFile}, {"show", "-json", planFile}, {"show"}} {
		r := l.rayform("", append([]string{"-chdir=" + dir}, args...)...)
		keep(strings.Join(args, " "), r.stdout+r.stderr)
		mustCode(t, strings.Join(args, " "), r, exitOK)
	}
	// vLLM got the key: without it /v1/models is refused.
	if out, _ := l.ssh("spark1", "curl -s -o /dev/null -w '%{http_code}' http://192.168.200.12:8000/v1/models"); strings.TrimSpace(out) != "401" {
		t.Errorf("/v1/models without the API key answered %q, want 401", out)
	}

	// A failing apply (the model does not fit in 5% of the memory) and its
	// error output.
	mustCode(t, "plan again", run("plan after apply", "plan", "-detailed-exitcode"), exitOK)
	src, _ := os.ReadFile(filepath.Join(dir, "main.hcl"))
	os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(strings.Replace(string(src), "gpu_memory_utilization = 0.85", "gpu_memory_utilization = 0.05", 1)), 0o644)
	r = run("failing apply", "apply", "-auto-approve")
	t.Logf("the failing apply exited %d", r.code)
	hostFiles("after a failed apply")
	os.WriteFile(filepath.Join(dir, "main.hcl"), src, 0o644)

	// kill -9 while the workers start.
	mustCode(t, "destroy", run("destroy", "destroy", "-auto-approve"), exitOK)
	killed, killedOut := l.start("-chdir="+dir, "-log-level=trace", "apply", "-var-file="+varFile, "-auto-approve")
	stop = make(chan struct{})
	wg = psWhile(stop)
	waitFor(t, "the apply to start the workers", 2*time.Minute, func() bool { return strings.Contains(killedOut.String(), "start ray workers") })
	killed.Process.Kill()
	killed.Wait()
	close(stop)
	wg.Wait()
	keep("killed apply", killedOut.String())
	hostFiles("after kill -9")
	mustCode(t, "apply after kill -9", run("apply after kill -9", "apply", "-auto-approve"), exitOK)
	mustCode(t, "plan after kill -9", run("plan after kill -9", "plan", "-detailed-exitcode"), exitOK)
	hostFiles("after the last apply")
	inspect("after the last apply")

	// Issue 23, item 7: no unkeyed digest either (an offline guess would
	// cost one hash): not of the token, of a value derived from it, or of
	// the -var-file that holds only it (a saved plan held that one whole).
	forms := []string{secret, strings.ToUpper(secret)}
	varFileContent, _ := os.ReadFile(varFile)
	for _, v := range []string{secret, "Bearer " + strings.ToUpper(secret), "t-" + secret, "x-" + secret, `"` + secret + `"`, string(varFileContent)} {
		sum := sha256.Sum256([]byte(v))
		forms = append(forms, hex.EncodeToString(sum[:]), hex.EncodeToString(sum[:8]))
	}
	keyed := false
	scanned := 0
	for _, s := range seen {
		where, text, _ := strings.Cut(s, "\x00")
		scanned += len(text)
		keyed = keyed || strings.Contains(text, "hmac-sha256:")
		for _, form := range forms {
			if i := strings.Index(text, form); i >= 0 {
				lo, hi := max(0, i-120), min(len(text), i+len(form)+40)
				t.Errorf("the secret (or an unkeyed digest of it) appears in %s: …%s…", where, strings.ReplaceAll(text[lo:hi], form, "<SECRET>"))
			}
		}
	}
	if !keyed {
		t.Error("no keyed digest (hmac-sha256:) in anything scanned: the secrets were not digested with the deployment's key")
	}
	if scanned == 0 || !strings.Contains(strings.Join(seen, ""), "vllm serve") {
		t.Fatal("nothing of substance was scanned: the test proves nothing")
	}
	t.Logf("scanned %d texts, %d bytes", len(seen), scanned)
}

// sampleArgv hands keep every process's argv on each of nodes ("ps -eo
// args"), every interval until stop is closed; wait on the group it
// returns before reading what keep gathered.
func (l *e2eLab) sampleArgv(stop <-chan struct{}, every time.Duration, keep func(where, text string), nodes ...string) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			for _, node := range nodes {
				out, _ := l.ssh(node, "ps -eo args")
				keep(fmt.Sprintf("ps on %s (sample %d)", node, n), out)
			}
			select {
			case <-stop:
				return
			case <-time.After(every):
			}
		}
	}()
	return &wg
}
