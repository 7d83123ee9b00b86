package observe

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/transport/shell"
)

func TestParseProcessRecord(t *testing.T) {
	const rec = `{"resource":"vllm_serve.qwen","spec_hash":"abc123"}`
	tests := []struct {
		name string
		out  []byte
		want ProcessRecord
	}{
		{"alive", newOut().sec("record name=serve-qwen", rec+"\nalive", "", 0).done(),
			ProcessRecord{Found: true, Resource: "vllm_serve.qwen", SpecHash: "abc123", Alive: true}},
		{"attrs", newOut().sec("record name=serve-qwen", `{"resource":"vllm_serve.qwen","spec_hash":"abc123","attrs":{"max_model_len":32768}}`+"\nalive", "", 0).done(),
			ProcessRecord{Found: true, Resource: "vllm_serve.qwen", SpecHash: "abc123", Alive: true, Attrs: map[string]string{"max_model_len": "32768"}}},
		{"dead", newOut().sec("record name=serve-qwen", rec+"\ndead", "", 0).done(),
			ProcessRecord{Found: true, Resource: "vllm_serve.qwen", SpecHash: "abc123"}},
		// The host lacked flock: the liveness came from docker exec, with
		// the reason on stderr.
		{"flock missing, asked the container", newOut().sec("record name=serve-qwen", rec+"\nalive", "rayform: flock: not installed", 0).done(),
			ProcessRecord{Found: true, Resource: "vllm_serve.qwen", SpecHash: "abc123", Alive: true}},
		{"never started (host dir)", newOut().sec("record name=serve-qwen", "", "cat: /var/tmp/rayform/p/spark1/rayform-spark/serve-qwen.json: No such file or directory", 1).done(),
			ProcessRecord{}},
		{"never started (in the container)", newOut().sec("record name=serve-qwen", "", "cat: can't open '/tmp/rayform/serve-qwen.json': No such file or directory", 1).done(),
			ProcessRecord{}},
		{"record unreadable", newOut().sec("record name=serve-qwen", "", "cat: /var/tmp/rayform/p/spark1/rayform-spark/serve-qwen.json: Permission denied", 1).done(),
			ProcessRecord{Err: "cat: /var/tmp/rayform/p/spark1/rayform-spark/serve-qwen.json: Permission denied"}},
		{"record garbled", newOut().sec("record name=serve-qwen", "{\"resource\":\nalive", "", 0).done(),
			ProcessRecord{Err: "record: unexpected end of JSON input"}},
		{"container gone", newOut().sec("record name=serve-qwen", "", "Error response from daemon: No such container: rayform-spark", 1).done(),
			ProcessRecord{Err: "Error response from daemon: No such container: rayform-spark"}},
		// The record is on the host, but neither flock nor docker could
		// tell whether the serve runs.
		{"liveness unknown", newOut().sec("record name=serve-qwen", rec, "rayform: flock: not installed\nrayform: docker unavailable", 1).done(),
			ProcessRecord{Found: true, Resource: "vllm_serve.qwen", SpecHash: "abc123", Err: "whether the process runs is unknown: docker unavailable"}},
		{"skipped", newOut().skip("record name=serve-qwen", "docker unavailable").done(),
			ProcessRecord{Err: "not probed: docker unavailable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse(tt.out)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := f.Records["serve-qwen"]
			if !ok {
				t.Fatalf("no Records[serve-qwen] in %+v", f.Records)
			}
			if got.Found != tt.want.Found || got.Resource != tt.want.Resource || got.SpecHash != tt.want.SpecHash || got.Alive != tt.want.Alive || got.Err != tt.want.Err {
				t.Fatalf("Records[serve-qwen] = %+v, want %+v", got, tt.want)
			}
			if len(got.Attrs) != len(tt.want.Attrs) || got.Attrs["max_model_len"] != tt.want.Attrs["max_model_len"] {
				t.Fatalf("Attrs = %v, want %v", got.Attrs, tt.want.Attrs)
			}
		})
	}
}

const testServeHostDir = "/var/tmp/rayform/spark/spark1/rayform-spark"

// testRecord is the record probe of serve qwen in the head container, as
// resources asks for it.
func testRecord(name, hostDir string) RecordProbe {
	return RecordProbe{Name: "serve-" + name, HostDir: hostDir, Container: "rayform-spark", Dir: "/tmp/rayform/serve", LegacyDir: "/tmp/rayform"}
}

func TestServeProbeGolden(t *testing.T) {
	var b strings.Builder
	writeRecords(&b, "spark", []RecordProbe{testRecord("qwen", testServeHostDir), testRecord("llama-2", testServeHostDir)})
	golden(t, "serve-records.sh", []byte(b.String()))
}

func TestProbeScriptReadsProcessRecords(t *testing.T) {
	s := ProbeScript(HostSpec{Records: []RecordProbe{testRecord("qwen", testServeHostDir), testRecord("bad name;rm", testServeHostDir)}})
	want := "rf_sec 'record name=serve-qwen' rf_rec serve-qwen " + testServeHostDir + " rayform-spark /tmp/rayform/serve /tmp/rayform\n"
	if !strings.Contains(s, want) || !strings.Contains(s, "rf_rec() {") {
		t.Fatalf("probe does not read the serve record (want %q):\n%s", want, s)
	}
	if strings.Contains(s, "bad name") {
		t.Fatal("an invalid record name reached the script")
	}
	if strings.Contains(ProbeScript(HostSpec{HTTP: []HTTPProbe{{URL: testHealthURL}}}), "rf_rec") {
		t.Fatal("a probe without records defines rf_rec")
	}
}

func TestServeHostDirValidated(t *testing.T) {
	for _, dir := range []string{"relative/dir", "/var/tmp/../etc", "/var/tmp/rayform/a b", "/var/tmp/$(reboot)", "/var/tmp/x;rm", "/var/tmp/rayform/p/..", "/a/b\n", "/var/tmp/é"} {
		t.Run(dir, func(t *testing.T) {
			hs := HostSpec{Records: []RecordProbe{testRecord("qwen", dir)}}
			if err := hs.Validate(); err == nil || !strings.Contains(err.Error(), "host dir") {
				t.Errorf("Validate() = %v, want a host dir error", err)
			}
			if s := ProbeScript(hs); strings.Contains(s, dir) {
				t.Errorf("the invalid host dir %q reached the script", dir)
			}
		})
	}
	for _, dir := range []string{testServeHostDir, "/var/tmp/rayform/my.project/node_1/rayform-x..y", ""} {
		if err := (HostSpec{Records: []RecordProbe{testRecord("qwen", dir)}}).Validate(); err != nil {
			t.Errorf("Validate(%q) = %v", dir, err)
		}
	}
}

// serveShells are the shells the serve fragment is run with: the probe is
// plain POSIX sh.
func serveShells(t *testing.T) [][]string {
	var shells [][]string
	for _, sh := range [][]string{{"sh"}, {"bash"}, {"busybox", "sh"}} {
		if p, err := exec.LookPath(sh[0]); err == nil {
			shells = append(shells, append([]string{p}, sh[1:]...))
		}
	}
	if len(shells) == 0 {
		t.Skip("no shell")
	}
	return shells
}

// serveHost is a host for the serve fragment: a record directory, a PATH
// of chosen tools and a fake docker that logs its arguments and answers
// with a canned reply.
type serveHost struct {
	dir, bin, dockerLog string
	// labels is what `docker inspect` of the container answers
	// (managed, project, resource); "" stands for rayform's own.
	labels string
}

func newServeHost(t *testing.T, tools ...string) *serveHost {
	t.Helper()
	// Not t.TempDir: the name of a subtest may put bytes into the path
	// that validServeHostDir rejects.
	root, err := os.MkdirTemp("", "rfserve")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	h := &serveHost{dir: filepath.Join(root, "var", "tmp", "rayform", "p", "spark1", "rayform-spark"),
		bin: toolDir(t, tools...), dockerLog: filepath.Join(root, "docker.log")}
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return h
}

// fakeDocker installs a docker that answers `docker inspect` with the
// container's labels (h.labels) and, for anything else, logs "$@" and
// prints reply.
func (h *serveHost) fakeDocker(t *testing.T, reply string) {
	t.Helper()
	labels := h.labels
	if labels == "" {
		labels = "true p ray_cluster.spark"
	}
	script := "#!/bin/sh\nif [ \"$1\" = inspect ]; then printf '%s\\n' " + shell.Quote(labels) + "; exit 0; fi\n" +
		"printf '%s\\n' \"$*\" >> " + shell.Quote(h.dockerLog) + "\nprintf '%s\\n' " + shell.Quote(reply) + "\n"
	if err := os.WriteFile(filepath.Join(h.bin, "docker"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (h *serveHost) dockerCalls(t *testing.T) string {
	b, err := os.ReadFile(h.dockerLog)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func (h *serveHost) write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// probe runs the serve fragment with sh and parses its output.
func (h *serveHost) probe(t *testing.T, sh []string, hostDir string) ProcessRecord {
	t.Helper()
	var b strings.Builder
	b.WriteString(prelude)
	b.WriteString("rf_t=\nrf_dok=1\n")
	b.WriteString("printf '%s probe 1\\n' \"$M\"\n")
	writeRecords(&b, "p", []RecordProbe{testRecord("qwen", hostDir)})
	b.WriteString("printf '%s done\\n' \"$M\"\n")
	cmd := exec.Command(sh[0], append(sh[1:], "-c", b.String())...)
	cmd.Env = []string{"PATH=" + h.bin}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", sh, err, out)
	}
	f, err := Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	r, ok := f.Records["serve-qwen"]
	if !ok {
		t.Fatalf("no serve record section:\n%s", out)
	}
	return r
}

// holdLock starts a process that takes an exclusive lock on path the way
// the serve start script does (exec 9>>LOCK; flock 9) and then execs a
// long-lived program, as the script execs vllm serve. It returns once the
// process holds the lock: the process says so on a pipe after flock
// returned.
func holdLock(t *testing.T, sh []string, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(sh[0], append(sh[1:], "-c", `exec 9>>"$1" && flock 9 && echo locked && exec cat`, "holder", path)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe() // cat reads it: the holder lives until killed
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("lock holder: %q, %v", line, err)
	}
	return cmd
}

const serveRecordJSON = `{"resource":"vllm_serve.qwen","spec_hash":"abc123"}`

// TestProcessRecordOnTheHost runs the probe's serve fragment through real
// shells and util-linux's flock(1): the record and the lock are read on
// the host, docker is never called.
func TestProcessRecordOnTheHost(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) is not installed")
	}
	for _, sh := range serveShells(t) {
		t.Run(filepath.Base(strings.Join(sh, " ")), func(t *testing.T) {
			h := newServeHost(t, "cat", "flock", "timeout")
			h.fakeDocker(t, "unexpected")

			if r := h.probe(t, sh, h.dir); r.Found || r.Err != "" {
				t.Fatalf("no record: %+v, want not found", r)
			}

			h.write(t, "serve-qwen.json", serveRecordJSON+"\n")
			lock := filepath.Join(h.dir, "serve-qwen.lock")
			holder := holdLock(t, sh, lock)
			if r := h.probe(t, sh, h.dir); !r.Found || !r.Alive || r.SpecHash != "abc123" || r.Err != "" {
				t.Fatalf("while the lock is held: %+v, want found and alive", r)
			}

			if err := holder.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = holder.Wait()
			if r := h.probe(t, sh, h.dir); !r.Found || r.Alive || r.Err != "" {
				t.Fatalf("after the holder was killed: %+v, want found and dead", r)
			}
			if calls := h.dockerCalls(t); calls != "" {
				t.Fatalf("docker was called:\n%s", calls)
			}
		})
	}
}

// TestProcessRecordFallsBackToDockerExec covers the cases where the host
// cannot answer alone.
func TestProcessRecordFallsBackToDockerExec(t *testing.T) {
	sh := serveShells(t)[0]
	t.Run("flock missing on the host", func(t *testing.T) {
		h := newServeHost(t, "cat")
		h.fakeDocker(t, "alive")
		h.write(t, "serve-qwen.json", serveRecordJSON+"\n")
		h.write(t, "serve-qwen.lock", "")
		r := h.probe(t, sh, h.dir)
		if !r.Found || !r.Alive || r.Err != "" {
			t.Fatalf("%+v, want found and alive (from docker exec)", r)
		}
		want := `exec rayform-spark sh -c kill -0 "$(cat /tmp/rayform/serve/serve-qwen.pid)" 2>/dev/null && echo alive || echo dead` + "\n"
		if got := h.dockerCalls(t); got != want {
			t.Fatalf("docker calls:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("no lock file (an image without flock)", func(t *testing.T) {
		h := newServeHost(t, "cat", "flock")
		h.fakeDocker(t, "dead")
		h.write(t, "serve-qwen.json", serveRecordJSON+"\n")
		r := h.probe(t, sh, h.dir)
		if !r.Found || r.Alive || r.Err != "" {
			t.Fatalf("%+v, want found and dead (from docker exec)", r)
		}
		if got := h.dockerCalls(t); !strings.HasPrefix(got, "exec rayform-spark sh -c kill -0") {
			t.Fatalf("docker calls:\n%s", got)
		}
		if _, err := os.Stat(filepath.Join(h.dir, "serve-qwen.lock")); !os.IsNotExist(err) {
			t.Fatalf("the probe created the lock file: %v", err)
		}
	})
	t.Run("no host dir (a container from before host records)", func(t *testing.T) {
		h := newServeHost(t, "cat", "flock")
		h.fakeDocker(t, serveRecordJSON+"\nalive")
		r := h.probe(t, sh, filepath.Join(h.dir, "absent"))
		if !r.Found || !r.Alive || r.SpecHash != "abc123" {
			t.Fatalf("%+v, want found and alive (from docker exec)", r)
		}
		want := `exec rayform-spark sh -c d=/tmp/rayform/serve; [ -f $d/serve-qwen.json ] || [ -z '/tmp/rayform' ] || d=/tmp/rayform; cat $d/serve-qwen.json && { kill -0 "$(cat $d/serve-qwen.pid)" 2>/dev/null && echo alive || echo dead; }` + "\n"
		if got := h.dockerCalls(t); got != want {
			t.Fatalf("docker calls:\n%s\nwant:\n%s", got, want)
		}
	})
	// Issue 23, item 4: a container named by a forged state entry, without
	// rayform's labels of the project, is never looked into.
	for _, labels := range []string{"  ", "true other ray_cluster.spark", "false p ray_cluster.spark", "true p "} {
		t.Run("container not the project's: "+labels, func(t *testing.T) {
			h := newServeHost(t, "cat", "flock")
			h.labels = labels
			h.fakeDocker(t, serveRecordJSON+"\nalive")
			r := h.probe(t, sh, filepath.Join(h.dir, "absent"))
			if r.Found || r.Alive || !strings.Contains(r.Err, "does not carry the labels of a resource of project p") {
				t.Fatalf("%+v, want an error saying the container is not rayform's", r)
			}
			if got := h.dockerCalls(t); got != "" {
				t.Fatalf("docker calls:\n%s\nwant none but inspect", got)
			}
		})
	}
	t.Run("record unreadable", func(t *testing.T) {
		h := newServeHost(t, "cat", "flock")
		h.fakeDocker(t, "unexpected")
		// A directory in the record's place: cat fails even for root.
		if err := os.Mkdir(filepath.Join(h.dir, "serve-qwen.json"), 0o755); err != nil {
			t.Fatal(err)
		}
		r := h.probe(t, sh, h.dir)
		if r.Found || !strings.Contains(r.Err, "Is a directory") {
			t.Fatalf("%+v, want an error", r)
		}
		if got := h.dockerCalls(t); got != "" {
			t.Fatalf("docker was called:\n%s", got)
		}
	})
}
