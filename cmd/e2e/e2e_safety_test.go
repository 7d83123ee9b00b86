//go:build linux

package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestE2ESafety drives issue 22 ("apply never makes things worse, part
// 2") against one lab, on a copy of the lab's own rayform.hcl in another
// directory: the lab's configuration and outputs (item 8), a mistyped image
// and values no host takes, each leaving the running serve answering
// /health 200 throughout (items 1, 2), Ctrl-C at the approval prompt and
// destroy's questions (items 6, 7), logs without terminal control
// sequences (item 9), a re-run apply that verifies a serve still loading
// (item 4), and destroy with a node powered off (item 5). The subtests run
// in order and share the deployment.
func TestE2ESafety(t *testing.T) {
	// Fast mode: the subject is what apply and destroy do with a running
	// serve, prompts, Ctrl-C and bad values (issue 22), not Ray.
	l := startLab(t, "rfe2esafe", fastRay...)
	labHCL, err := os.ReadFile(filepath.Join(l.dir, "rayform.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	project := filepath.Base(l.dir)
	t.Cleanup(func() { os.RemoveAll("/var/tmp/rayform/" + project) })
	dir := filepath.Join(t.TempDir(), "copy")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// setConfig writes the copy's rayform.hcl: the lab's, edited.
	setConfig := func(t *testing.T, edits ...string) {
		t.Helper()
		src := string(labHCL)
		for i := 0; i+1 < len(edits); i += 2 {
			if !strings.Contains(src, edits[i]) {
				t.Fatalf("the lab's rayform.hcl has no %q to edit", edits[i])
			}
			src = strings.Replace(src, edits[i], edits[i+1], 1)
		}
		if err := os.WriteFile(filepath.Join(dir, "rayform.hcl"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) result { return l.rayform("", append([]string{"-chdir=" + dir}, args...)...) }
	headID := func(t *testing.T) string {
		t.Helper()
		out, err := l.ssh("spark1", "docker inspect -f '{{.Id}}' rayform-spark")
		if err != nil {
			t.Fatalf("inspecting the head: %v\n%s", err, out)
		}
		return strings.TrimSpace(out)
	}
	setConfig(t)

	t.Run("lab config and outputs", func(t *testing.T) {
		// The header's command, as written (only rayform's path added).
		var line string
		for _, l := range strings.Split(string(labHCL), "\n") {
			if strings.HasPrefix(l, "#   ip netns exec ") {
				line = strings.TrimPrefix(l, "#   ")
			}
		}
		if !strings.Contains(line, " rayform -chdir ") {
			t.Fatalf("no command in the header of the lab's rayform.hcl:\n%s", labHCL)
		}
		line = strings.Replace(line, " rayform -chdir ", " "+filepath.Join(l.bin, "rayform")+" -chdir ", 1)
		out, err := exec.Command("sh", "-c", line).CombinedOutput()
		if err != nil {
			t.Fatalf("the header's command %q: %v\n%s", line, err, out)
		}
		mustContain(t, "the header's command", string(out), "Plan: 2 to add")

		mustCode(t, "apply from the copy", run("apply", "-auto-approve"), exitOK)
		// The copy and the lab's directory are one project: the lab's
		// configuration sees the serve running, its port in use by it.
		r := l.rayform("", "-chdir="+l.dir, "plan", "-detailed-exitcode")
		mustCode(t, "plan from the lab's directory", r, exitOK)
		mustContain(t, "plan from the lab's directory", r.stdout, "No changes.")

		// A lost state rebuilt by a no-op apply records what output needs.
		if err := os.RemoveAll(filepath.Join(dir, ".rayform")); err != nil {
			t.Fatal(err)
		}
		r = run("apply", "-auto-approve")
		mustCode(t, "no-op apply without a state", r, exitOK)
		mustContain(t, "no-op apply without a state", r.stdout, "No changes.")
		r = run("output")
		mustCode(t, "output", r, exitOK)
		mustContain(t, "output", r.stdout, `endpoint = "http://192.168.200.12:8000/v1"`)
		r = run("output", "-json")
		var doc map[string]struct {
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || string(doc["endpoint"].Value) != `"http://192.168.200.12:8000/v1"` {
			t.Errorf("output -json lacks the endpoint (%v):\n%s", err, r)
		}
	})

	t.Run("mistyped image", func(t *testing.T) {
		before := headID(t)
		watch := l.watchHealth(t)
		setConfig(t, `"hellohal2064/vllm-qwen3.5-gb10"`, `"hellohal2064/vllm-qwen3.5-gb100"`)
		r := run("apply", "-auto-approve")
		watch.stop(t)
		mustCode(t, "apply of a mistyped image", r, exitError)
		mustContain(t, "apply of a mistyped image", r.stdout+r.stderr,
			"image hellohal2064/vllm-qwen3.5-gb100 does not exist: the registry mirror", "MANIFEST_UNKNOWN", "Nothing was changed",
			// Issue 33 item 8: the fix names what the mirror has, not a
			// command listing the tags of a repository that does not exist.
			"has no repository hellohal2064/vllm-qwen3.5-gb100 at all (a typo in the name?)")
		for _, bad := range []string{"Cause: registry", "is unreachable", "Replacement complete", "Destroying", "stop vllm serve", "remove container", "tags/list"} {
			if strings.Contains(r.stdout+r.stderr, bad) {
				t.Errorf("apply of a mistyped image printed %q\n%s", bad, r)
			}
		}
		if after := headID(t); after != before {
			t.Errorf("the head container was replaced (%s → %s)", before, after)
		}
		setConfig(t)
		mustCode(t, "plan after the failed apply", run("plan", "-detailed-exitcode"), exitOK)
	})

	t.Run("values no host takes", func(t *testing.T) {
		watch := l.watchHealth(t)
		for _, tt := range []struct {
			name string
			edit []string
			want string
		}{
			{"NUL in served_model_name", []string{`served_model_name      = "tiny"`, `served_model_name      = "tiny\u0000"`}, "Value with a NUL byte"},
			{"NUL in docker_args", []string{"  memory_monitor = false\n", "  memory_monitor = false\n  docker_args    = [\"--label\", \"x\\u0000y\"]\n"}, "Value with a NUL byte"},
			{"100 KB env value", []string{"  max_model_len          = 4096\n", "  max_model_len          = 4096\n  env = { NOTES = format(\"%0100000d\", 0) }\n"}, "Values too long for a command line"},
			{"malformed image", []string{`"hellohal2064/vllm-qwen3.5-gb10"`, `"hellohal2064/vllm qwen"`}, "Invalid image reference"},
		} {
			setConfig(t, tt.edit...)
			r := run("validate")
			mustCode(t, tt.name+": validate", r, exitError)
			mustContain(t, tt.name+": validate", r.stderr, tt.want, "on rayform.hcl line")
			r = run("apply", "-auto-approve")
			mustCode(t, tt.name+": apply", r, exitError)
			mustContain(t, tt.name+": apply", r.stderr, tt.want)
		}
		watch.stop(t)
		setConfig(t)
		mustCode(t, "plan after the refused applies", run("plan", "-detailed-exitcode"), exitOK)
	})

	t.Run("Ctrl-C at the approval prompt", func(t *testing.T) {
		setConfig(t, "max_model_len          = 4096", "max_model_len          = 2048")
		cmd, out, stdin := l.startWithStdin("-chdir="+dir, "apply")
		waitFor(t, "the approval prompt", 2*time.Minute, func() bool { return strings.Contains(out.String(), "Enter a value:") })
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		code := waitExit(t, cmd, out)
		stdin.Close()
		if code != exitError {
			t.Fatalf("apply interrupted at the prompt: exit %d, want %d\n%s", code, exitError, out)
		}
		mustContain(t, "apply interrupted at the prompt", out.String(), "Apply cancelled.")
		if strings.Contains(out.String(), "context canceled") {
			t.Errorf("apply interrupted at the prompt printed errors:\n%s", out)
		}
		// The locks went with it: the next apply takes them at once.
		mustCode(t, "apply after the interrupted prompt", run("apply", "-auto-approve"), exitOK)
		setConfig(t)
		mustCode(t, "apply back", run("apply", "-auto-approve"), exitOK)

		r := l.rayform("no\n", "-chdir="+dir, "destroy")
		mustCode(t, "destroy answered no", r, exitError)
		mustContain(t, "destroy answered no", r.stdout+r.stderr, "Do you really want to destroy all resources?", "Destroy cancelled.")
		if strings.Contains(r.stderr, "Apply cancelled.") {
			t.Errorf("destroy answered no says Apply cancelled.\n%s", r)
		}
		r = l.rayform("no\n", "-chdir="+dir, "destroy", "-target", "vllm_serve.qwen")
		mustCode(t, "destroy -target answered no", r, exitError)
		mustContain(t, "destroy -target answered no", r.stdout, "Do you really want to destroy the targeted resources?")
		if strings.Contains(r.stdout, "destroy all resources") {
			t.Errorf("destroy -target asks about all resources\n%s", r)
		}
	})

	t.Run("logs without terminal controls", func(t *testing.T) {
		hostLog := "/var/tmp/rayform/" + project + "/spark1/rayform-spark/serve-qwen.log"
		if o, err := l.ssh("spark1", `printf 'title\033]0;pwned\007 clip\033]52;c;ZXZpbA==\033\\ clear\033[2J\033[H end\n' >> `+hostLog); err != nil {
			t.Fatalf("appending to the serve log: %v\n%s", err, o)
		}
		r := run("logs", "vllm_serve.qwen", "-tail", "1")
		mustCode(t, "logs", r, exitOK)
		if r.stdout != "spark1 | title clip clear end\n" {
			t.Errorf("logs printed %q, want the text without its control sequences", r.stdout)
		}
	})

	t.Run("apply verifies a serve still loading", func(t *testing.T) {
		slow := []string{"  max_model_len          = 4096\n", "  max_model_len          = 4096\n  ready_timeout          = \"15s\"\n  env                    = { SIMNODE_WEIGHT_LOAD = \"70s\" }\n"}
		setConfig(t, slow...)
		// -atomic=false: a replacement not ready within its ready_timeout
		// is otherwise stopped and the serve before it put back (issue
		// 39); here the slow serve must go on loading.
		r := run("apply", "-auto-approve", "-atomic=false")
		mustCode(t, "apply of a serve slower than its ready_timeout", r, exitError)
		mustContain(t, "apply of a serve slower than its ready_timeout", r.stderr, "is not ready after 15s (ready_timeout)")
		// Run again while it loads: no change to make, and still no
		// success until the serve answers.
		r = run("apply", "-auto-approve")
		mustCode(t, "apply again while the serve loads", r, exitError)
		mustContain(t, "apply again while the serve loads", r.stdout+r.stderr, "wait for vllm serve qwen on spark1 to be ready", "is not ready after 15s (ready_timeout)")
		if strings.Contains(r.stdout, "Apply complete!") {
			t.Errorf("apply reported success for a serve still loading\n%s", r)
		}
		r = run("plan", "-detailed-exitcode")
		mustCode(t, "plan while the serve loads", r, exitChanges)
		mustContain(t, "plan while the serve loads", r.stdout, "Not converged yet: vllm_serve.qwen is still starting")
		// ready_timeout changes nothing on the hosts: with a longer one
		// the same no-op apply follows the load to its end.
		setConfig(t, slow[0], strings.Replace(slow[1], `"15s"`, `"3m"`, 1))
		r = run("apply", "-auto-approve")
		mustCode(t, "apply waiting long enough", r, exitOK)
		mustContain(t, "apply waiting long enough", r.stdout, "No changes.", "Application startup complete.", "Apply complete! Resources: 0 added, 0 changed, 0 destroyed.")
		mustCode(t, "plan once the serve answers", run("plan", "-detailed-exitcode"), exitOK)
		setConfig(t)
		mustCode(t, "apply back", run("apply", "-auto-approve"), exitOK)
	})

	t.Run("destroy with a node powered off", func(t *testing.T) {
		labOp := func(op string) {
			if o, err := l.rflab(op, "-name", l.name, "spark2").CombinedOutput(); err != nil {
				t.Fatalf("lab %s spark2: %v\n%s", op, err, o)
			}
		}
		labOp("poweroff")
		r := run("destroy", "-auto-approve")
		mustCode(t, "destroy with spark2 off", r, exitError)
		mustContain(t, "destroy with spark2 off", r.stdout+r.stderr, "cannot reach spark2", "destroy could not reach every host", "ray_cluster.spark on spark2")
		for _, bad := range []string{"Destroy complete!", "apply did not converge"} {
			if strings.Contains(r.stdout+r.stderr, bad) {
				t.Errorf("destroy with spark2 off printed %q\n%s", bad, r)
			}
		}
		if st, err := os.ReadFile(filepath.Join(dir, ".rayform", "state.json")); err != nil || !strings.Contains(string(st), `"ray_cluster.spark"`) || !strings.Contains(string(st), `"spark2"`) {
			t.Errorf("the state forgot ray_cluster.spark on spark2 (%v):\n%s", err, st)
		}
		labOp("poweron")
		r = run("destroy", "-auto-approve")
		mustCode(t, "destroy with spark2 back", r, exitOK)
		mustContain(t, "destroy with spark2 back", r.stdout, "removed rayform-spark on spark2", "Destroy complete!")
		if out, err := l.ssh("spark2", "docker ps -a --filter label=rayform.managed=true --format '{{.Names}}'; echo end"); err != nil || strings.TrimSpace(out) != "end" {
			t.Errorf("containers left on spark2 after destroy: %v\n%s", err, out)
		}
	})
}

// healthWatch samples a serve's /health from the client namespace.
type healthWatch struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	codes []string
	done  chan struct{}
}

// watchHealth samples the lab serve's /health five times a second until
// stop, as a client on the fabric does (spark2, at the head's fabric
// address: vLLM listens there only, listen's default).
func (l *e2eLab) watchHealth(t *testing.T) *healthWatch {
	t.Helper()
	script := "while :; do curl -s -o /dev/null -m 2 -w '%{http_code}\\n' http://192.168.200.12:8000/health; sleep 0.2; done"
	cmd := exec.Command("ip", "netns", "exec", l.name+"-spark2", "sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &healthWatch{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			w.mu.Lock()
			w.codes = append(w.codes, s.Text())
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	// The first sample is taken before what is watched begins.
	waitFor(t, "the first /health sample", 30*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.codes) > 0
	})
	return w
}

// stop takes one more sample, after what was watched, ends the sampling
// and fails t unless every answer was 200.
func (w *healthWatch) stop(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	n := len(w.codes)
	w.mu.Unlock()
	waitFor(t, "a /health sample after the run", 30*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.codes) > n
	})
	syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
	w.cmd.Wait()
	<-w.done
	bad := 0
	for _, c := range w.codes {
		if c != "200" {
			bad++
		}
	}
	if bad > 0 || len(w.codes) < 2 {
		t.Errorf("/health answered other than 200 in %d of %d samples: %v", bad, len(w.codes), w.codes)
	}
}

// startWithStdin runs the binary in the background with a stdin that
// stays open until closed, as a terminal's.
func (l *e2eLab) startWithStdin(args ...string) (*exec.Cmd, *syncBuffer, interface{ Close() error }) {
	l.t.Helper()
	argv := append([]string{"netns", "exec", l.name + "-client", "env", "HOME=" + filepath.Join(l.dir, "client-home"), "NO_COLOR=1",
		filepath.Join(l.bin, "rayform")}, args...)
	cmd := exec.Command("ip", argv...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	return cmd, out, stdin
}

// waitExit waits for cmd and returns its exit code; a run that does not
// end within a minute is killed and fails t (the old binary waited at the
// prompt for ever).
func waitExit(t *testing.T, cmd *exec.Cmd, out *syncBuffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the run did not end within a minute of the interrupt\n%s", out)
		return -1
	}
}
