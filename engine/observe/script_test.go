package observe

import (
	"bytes"
	"context"
	"flag"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/local"
)

var update = flag.Bool("update", false, "rewrite golden files")

// testdata is the repository's observe fixtures directory.
const testdata = "../../testdata/observe"

// headSpec and workerSpec are the two-node DGX Spark pair of the seeds.
func headSpec() HostSpec {
	return HostSpec{
		Project:    "spark",
		Images:     []string{"hellohal2064/vllm-qwen3.5-gb10:latest"},
		Containers: []string{"rayform-ray-head"},
		EnvKeys:    testEnvKeys,
		HTTP:       headProbes(testHeadName, 8265, 8000),
		Fabric:     Fabric{Interface: "enp1s0f1np1", CIDR: netip.MustParsePrefix("192.168.200.0/24")},
		Peers:      []Peer{{Host: "spark2", Addr: netip.MustParseAddr("192.168.200.13")}},
	}
}

func workerSpec() HostSpec {
	return HostSpec{
		Project:    "spark",
		Images:     []string{"hellohal2064/vllm-qwen3.5-gb10:latest"},
		Containers: []string{"rayform-ray-worker"},
		EnvKeys:    testEnvKeys,
		Fabric:     Fabric{Interface: "enp1s0f1np1", CIDR: netip.MustParsePrefix("192.168.200.0/24")},
		Peers:      []Peer{{Host: "spark1", Addr: netip.MustParseAddr("192.168.200.12"), Port: 6379}},
	}
}

// golden compares got with testdata/golden/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(testdata, "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run with -update and review the diff)\ngot:\n%s", name, got)
	}
}

func TestProbeScriptGolden(t *testing.T) {
	tests := []struct {
		name   string
		script string
	}{
		{"probe-head.sh", ProbeScript(headSpec())},
		{"probe-worker.sh", ProbeScript(workerSpec())},
		{"probe-bare.sh", ProbeScript(HostSpec{})},
		{"peer-worker.sh", PeerScript(workerSpec(), []netip.AddrPort{
			netip.MustParseAddrPort("192.168.200.12:6379"),
			netip.MustParseAddrPort("192.168.200.14:0"),
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			golden(t, tt.name, []byte(tt.script))
		})
	}
	// Deterministic: map iteration or time never leaks into the script.
	for range 20 {
		if ProbeScript(headSpec()) != tests[0].script {
			t.Fatal("ProbeScript is not deterministic")
		}
	}
}

// TestProbeScriptSyntax checks every generated script with the parsers of
// the shells a Debian/Ubuntu host may run it with.
func TestProbeScriptSyntax(t *testing.T) {
	scripts := map[string]string{
		"head":   ProbeScript(headSpec()),
		"worker": ProbeScript(workerSpec()),
		"bare":   ProbeScript(HostSpec{}),
		"peer":   PeerScript(workerSpec(), []netip.AddrPort{netip.MustParseAddrPort("192.168.200.12:6379")}),
	}
	shells := [][]string{{"sh", "-n"}, {"dash", "-n"}, {"bash", "--posix", "-n"}, {"busybox", "sh", "-n"}}
	ran := 0
	for _, sh := range shells {
		if _, err := exec.LookPath(sh[0]); err != nil {
			continue
		}
		for name, script := range scripts {
			t.Run(sh[0]+"/"+name, func(t *testing.T) {
				cmd := exec.Command(sh[0], append(sh[1:], "-c", script)...)
				if len(sh) > 2 && sh[1] == "sh" {
					cmd = exec.Command(sh[0], "sh", "-n", "-c", script)
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%s rejects the %s script: %v\n%s", strings.Join(sh, " "), name, err, out)
				}
			})
			ran++
		}
	}
	if ran == 0 {
		t.Fatal("no shell found to check the scripts with")
	}
}

// TestProbeScriptLeavesOutInvalid checks that words which could break out of
// their quoting or the output framing never reach the script.
func TestProbeScriptLeavesOutInvalid(t *testing.T) {
	bad := "x\n@@rayform@@ done"
	s := ProbeScript(HostSpec{
		Project:    bad,
		Images:     []string{bad, "ok/image:1"},
		Containers: []string{bad},
		EnvKeys:    []string{bad, "GOOD_KEY"},
	})
	if strings.Contains(s, "@@rayform@@ done'") || strings.Contains(s, "x\n@@") {
		t.Errorf("invalid word reached the script:\n%s", s)
	}
	if !strings.Contains(s, "rf_image ok/image:1") || !strings.Contains(s, `"GOOD_KEY"`) {
		t.Errorf("valid words were dropped:\n%s", s)
	}
	if err := (HostSpec{Images: []string{bad}}).Validate(); err == nil {
		t.Error("Validate accepted an image reference with a newline")
	}
}

// dockerFuncs are the template functions the docker CLI adds to Go's
// (docker/cli templates.basicFunctions), enough to run our formats.
func dockerFuncs() template.FuncMap {
	return template.FuncMap{
		"json": func(v any) string {
			var b bytes.Buffer
			enc := jsonEncoder(&b)
			_ = enc.Encode(v)
			return strings.TrimSpace(b.String())
		},
		"split": strings.Split,
		"join":  strings.Join,
		"lower": strings.ToLower,
		"upper": strings.ToUpper,
	}
}

// TestInspectTemplates runs the probe's docker templates the way the docker
// CLI does, on real `docker inspect` output, and checks that secrets stay on
// the host while everything else survives.
func TestInspectTemplates(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testdata, "docker-inspect-head.json"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	if err := jsonUnmarshal(raw, &objs); err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New("c").Funcs(dockerFuncs()).Parse(containerTemplate(headSpec().envKeys()))
	if err != nil {
		t.Fatalf("container template does not parse: %v", err)
	}
	var out bytes.Buffer
	for _, o := range objs {
		if err := tmpl.Execute(&out, o); err != nil {
			t.Fatalf("container template fails on real inspect output: %v", err)
		}
		out.WriteByte('\n')
	}
	for _, secret := range []string{"hf_SECRETTOKEN", "sk-SECRETKEY"} {
		if !bytes.Contains(raw, []byte(secret)) {
			t.Fatalf("fixture lost its secret %q", secret)
		}
		if bytes.Contains(out.Bytes(), []byte(secret)) {
			t.Errorf("secret %q crossed the template:\n%s", secret, out.Bytes())
		}
	}
	// The template's output parses to the same facts as the raw array.
	fromTemplate := parseContainers(&section{name: secContainers, attrs: []string{"envkeys=" + strings.Join(testEnvKeys, ",")}, complete: true,
		stdout: append([]byte(marker+" part inspect\n"), out.Bytes()...)})
	fromRaw := parseContainers(&section{name: secContainers, attrs: []string{"envkeys=" + strings.Join(testEnvKeys, ",")}, complete: true,
		stdout: append([]byte(marker+" part inspect\n"), raw...)})
	if d := diffJSON(fromRaw, fromTemplate); d != "" {
		t.Errorf("template output parses differently from raw inspect:\n%s", d)
	}
	if len(fromTemplate.List) != 2 || fromTemplate.List[0].Env["VLLM_HOST_IP"] != "192.168.200.12" ||
		fromTemplate.List[0].Env["HF_TOKEN"] != RedactedValue {
		t.Errorf("env not kept/redacted as the allow-list says: %+v", fromTemplate.List)
	}

	imgRaw, err := os.ReadFile(filepath.Join(testdata, "docker-image-inspect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var imgs []map[string]any
	if err := jsonUnmarshal(imgRaw, &imgs); err != nil {
		t.Fatal(err)
	}
	it, err := template.New("i").Funcs(dockerFuncs()).Parse(imageFormat)
	if err != nil {
		t.Fatalf("image template does not parse: %v", err)
	}
	out.Reset()
	if err := it.Execute(&out, imgs[0]); err != nil {
		t.Fatalf("image template fails on real image inspect output: %v", err)
	}
	if bytes.Contains(out.Bytes(), []byte("hf_BAKEDTOKEN")) {
		t.Errorf("image env value crossed the template:\n%s", out.Bytes())
	}
	img := parseImage(&section{name: secImage, attrs: []string{"ref=x"}, complete: true, stdout: out.Bytes()})
	if !img.Present || img.ID == "" || img.Err != "" {
		t.Errorf("image template output parsed to %+v", img)
	}
}

// runLocal runs script with /bin/sh on this machine through the local
// transport (the tests' stand-in for a host), with PATH set to path when
// non-empty.
func runLocal(t *testing.T, script, path string) []byte {
	t.Helper()
	return runLocalEnv(t, script, path, nil)
}

// runLocalEnv is runLocal with more variables in the probe's environment.
func runLocalEnv(t *testing.T, script, path string, env map[string]string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := transport.Cmd{Script: script, Env: map[string]string{}}
	maps.Copy(cmd.Env, env)
	if path != "" {
		cmd.Env["PATH"] = path
	}
	res, err := local.New(local.Options{}).Run(ctx, cmd)
	if err != nil {
		t.Fatalf("probe failed: %v\nstderr:\n%s", err, res.Stderr)
	}
	if len(res.Stderr) > 0 {
		t.Errorf("probe wrote to its own stderr (sections must capture it):\n%s", res.Stderr)
	}
	return res.Stdout
}
