package configtest_test

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources"
	"github.com/rayform/rayform/resources/resourcestest"
)

// load is config.Load with the resource kinds registered, as the CLI
// loads configurations, seen through the kinds' Go types.
func load(dir string, opts config.Options) (*resourcestest.Blocks, hcl.Diagnostics) {
	return resourcestest.Load(dir, opts)
}

// loadFiles is config.LoadFiles with the resource kinds registered.
func loadFiles(files map[string][]byte, opts config.Options) (*resourcestest.Blocks, hcl.Diagnostics) {
	return resourcestest.LoadFiles(files, opts)
}

var update = flag.Bool("update", false, "rewrite golden files")

// repoRoot is the repository root relative to this package.
const repoRoot = "../.."

// caseOptions reads a test case's optional args.txt ("var NAME=VALUE" or
// "var-file FILE" per line) and env.txt ("KEY=VALUE" per line).
func caseOptions(t *testing.T, dir string) config.Options {
	t.Helper()
	var opts config.Options
	for _, line := range readLines(t, filepath.Join(dir, "args.txt")) {
		flag, value, _ := strings.Cut(line, " ")
		switch flag {
		case "var":
			opts.Args = append(opts.Args, config.VarArg{Value: value})
		case "var-file":
			opts.Args = append(opts.Args, config.VarArg{File: true, Value: value})
		default:
			t.Fatalf("%s/args.txt: bad line %q", dir, line)
		}
	}
	opts.Env = readLines(t, filepath.Join(dir, "env.txt"))
	return opts
}

// caseFacts reads a test case's optional facts.txt ("NODE ADDRESS" per line).
func caseFacts(t *testing.T, dir string) (kind.Facts, bool) {
	t.Helper()
	lines := readLines(t, filepath.Join(dir, "facts.txt"))
	f := kind.Facts{FabricAddrs: map[string]netip.Addr{}}
	for _, line := range lines {
		node, addr, _ := strings.Cut(line, " ")
		f.FabricAddrs[node] = netip.MustParseAddr(addr)
	}
	return f, len(lines) > 0
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// loadCase loads a case directory from inside it, so that file names in
// diagnostics are relative ("main.hcl").
func loadCase(t *testing.T, dir string) (*resourcestest.Blocks, hcl.Diagnostics) {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := caseOptions(t, abs)
	t.Chdir(abs)
	return load(".", opts)
}

func renderDiags(t *testing.T, cfg *resourcestest.Blocks, diags hcl.Diagnostics) string {
	t.Helper()
	var buf bytes.Buffer
	w := hcl.NewDiagnosticTextWriter(&buf, cfg.Files, 78, false)
	if err := w.WriteDiagnostics(diags); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s does not match (run go test -update to accept)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func caseDirs(t *testing.T, glob string) []string {
	t.Helper()
	dirs, err := filepath.Glob(glob)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatalf("no test cases match %s", glob)
	}
	return dirs
}

// TestInvalidGolden loads every malformed configuration and compares its
// rendered diagnostics with diagnostics.golden.
func TestInvalidGolden(t *testing.T) {
	dirs := caseDirs(t, filepath.Join(repoRoot, "testdata/config/invalid/*"))
	if len(dirs) < 25 {
		t.Errorf("only %d invalid cases; want at least 25", len(dirs))
	}
	for _, dir := range dirs {
		golden, err := filepath.Abs(filepath.Join(dir, "diagnostics.golden"))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg, diags := loadCase(t, dir)
			if !diags.HasErrors() {
				t.Fatalf("no errors; diagnostics:\n%s", renderDiags(t, cfg, diags))
			}
			for _, d := range diags {
				if d.Summary == "" || d.Detail == "" {
					t.Errorf("diagnostic without summary or detail: %+v", d)
				}
			}
			checkGolden(t, golden, renderDiags(t, cfg, diags))
		})
	}
}

// TestValidGolden loads every valid configuration (and the examples) and
// compares a dump of the decoded configuration, before and after applying
// facts.txt, with config.golden.
func TestValidGolden(t *testing.T) {
	dirs := caseDirs(t, filepath.Join(repoRoot, "testdata/config/valid/*"))
	for _, dir := range dirs {
		golden, err := filepath.Abs(filepath.Join(dir, "config.golden"))
		if err != nil {
			t.Fatal(err)
		}
		abs, _ := filepath.Abs(dir)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg, diags := loadCase(t, abs)
			if diags.HasErrors() {
				t.Fatalf("unexpected errors:\n%s", renderDiags(t, cfg, diags))
			}
			got := renderDiags(t, cfg, diags) + dump(cfg)
			if facts, ok := caseFacts(t, abs); ok {
				observed, diags := cfg.WithFacts(facts)
				if diags.HasErrors() {
					t.Fatalf("unexpected errors with facts:\n%s", renderDiags(t, cfg, diags))
				}
				got += "\n# with facts\n" + dump(observed)
			}
			checkGolden(t, golden, got)
		})
	}
}

// TestExamples loads and validates every example.
func TestExamples(t *testing.T) {
	for _, dir := range caseDirs(t, filepath.Join(repoRoot, "examples/*")) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg, diags := load(dir, config.Options{})
			if len(diags) > 0 {
				t.Fatalf("diagnostics:\n%s", renderDiags(t, cfg, diags))
			}
			if len(cfg.RayClusters) == 0 || len(cfg.Serves) == 0 {
				t.Errorf("example declares %d clusters and %d servers; want at least one of each", len(cfg.RayClusters), len(cfg.Serves))
			}
			if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
				if b, _ := os.ReadFile(filepath.Join(dir, "main.hcl")); !bytes.HasPrefix(b, []byte("#")) {
					t.Errorf("example has neither README.md nor a comment header in main.hcl")
				}
			}
		})
	}
}

// TestExampleGraph pins the DAG of the DGX Spark pair.
func TestExampleGraph(t *testing.T) {
	cfg, diags := load(filepath.Join(repoRoot, "examples/dgx-spark-pair"), config.Options{})
	if diags.HasErrors() {
		t.Fatalf("diagnostics:\n%s", renderDiags(t, cfg, diags))
	}
	g := cfg.Graph()
	order, err := g.TopoOrder()
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	for _, e := range [][2]string{
		{"ray_cluster.spark", "node.spark1"},
		{"ray_cluster.spark", "node.spark2"},
		{"ray_cluster.spark", "network.fabric"},
		{"vllm_serve.qwen", "ray_cluster.spark"},
	} {
		if pos[e[0]] <= pos[e[1]] {
			t.Errorf("%s must come after %s in %v", e[0], e[1], order)
		}
	}
	checkGolden(t, filepath.Join(repoRoot, "testdata/config/dgx-spark-pair.dot"), g.DOT())
}

// dump renders a configuration deterministically for golden files.
func dump(c *resourcestest.Blocks) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(c.Variables)) {
		v := c.Variables[name]
		val := v.Value
		if v.Sensitive {
			val = val.Mark(config.Sensitive)
		}
		fmt.Fprintf(&b, "var.%s = %s (%s)\n", name, plan.FormatValue(val), v.Source)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Locals)) {
		l := c.Locals[name]
		val := l.Value
		if l.Sensitive {
			val = val.Mark(config.Sensitive)
		}
		fmt.Fprintf(&b, "local.%s = %s\n", name, plan.FormatValue(val))
	}
	decl := func(d *config.Decl) {
		fmt.Fprintf(&b, "  range=%s depends_on=%v", d.DeclRange, d.DependsOn)
		if len(d.Sensitive) > 0 {
			fmt.Fprintf(&b, " sensitive=%v", d.Sensitive)
		}
		if len(d.Unknown) > 0 {
			fmt.Fprintf(&b, " unknown=%v", d.Unknown)
		}
		b.WriteString("\n")
	}
	for _, name := range slices.Sorted(maps.Keys(c.Nodes)) {
		n := c.Nodes[name]
		fmt.Fprintf(&b, "%s block=%s key=%q host=%q user=%q port=%d identity_file=%q bastion=%q gpus=%d labels=%v\n",
			n.Addr, n.Block, n.Key, n.Host, n.User, n.Port, n.IdentityFile, n.Bastion, n.GPUs, n.Labels)
		decl(&n.Decl)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Networks)) {
		n := c.Networks[name]
		fmt.Fprintf(&b, "%s cidr=%s interface=%q interfaces=%v ib_hca=%q mtu=%d nodes=%v addresses=%v\n",
			n.Addr, n.CIDR, n.Interface, n.Interfaces, n.IBHCA, n.MTU, n.Nodes, n.Addresses)
		decl(&n.Decl)
	}
	for _, name := range slices.Sorted(maps.Keys(c.RayClusters)) {
		r := c.RayClusters[name]
		addr, _ := r.Address()
		fmt.Fprintf(&b, "%s image=%q head=%q workers=%q network=%q port=%d dashboard_port=%d memory_monitor=%t shm_size=%q env=%v volumes=%q docker_args=%q container_name=%q address=%q\n",
			r.Addr, r.Image, r.Head, r.Workers, r.Network, r.Port, r.DashboardPort, r.MemoryMonitor, r.ShmSize, r.Env, r.Volumes, r.DockerArgs, r.ContainerName, addr)
		decl(&r.Decl)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Serves)) {
		s := c.Serves[name]
		fmt.Fprintf(&b, "%s cluster=%q model=%q served_model_name=%q tp=%d pp=%d gpu_memory_utilization=%g max_model_len=%d port=%d env=%v extra_args=%q ready_timeout=%s endpoint=%q\n",
			s.Addr, s.Cluster, s.Model, s.ServedModelName, s.TensorParallelSize, s.PipelineParallelSize, s.GPUMemoryUtilization, s.MaxModelLen, s.Port, s.Env, s.ExtraArgs, s.ReadyTimeout, s.Endpoint)
		decl(&s.Decl)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Outputs)) {
		o := c.Outputs[name]
		val := o.Value
		if o.Sensitive {
			val = val.Mark(config.Sensitive)
		}
		fmt.Fprintf(&b, "output.%s = %s\n", name, plan.FormatValue(val))
	}
	b.WriteString("graph:\n")
	g := c.Graph()
	for _, n := range g.Nodes() {
		deps := g.DependenciesOf(n)
		sort.Strings(deps)
		fmt.Fprintf(&b, "  %s -> %v\n", n, deps)
	}
	return b.String()
}

// TestWithFacts checks that observed addresses make exports known.
func TestWithFacts(t *testing.T) {
	const unknown = "(known after apply)"
	cfg, diags := load(filepath.Join(repoRoot, "examples/dgx-spark-pair"), config.Options{})
	if diags.HasErrors() {
		t.Fatalf("diagnostics:\n%s", renderDiags(t, cfg, diags))
	}
	tests := []struct {
		name  string
		facts map[string]string
		want  map[string]string // output → formatted value
	}{
		{
			name: "before observe",
			want: map[string]string{
				"endpoint":         unknown,
				"ray_address":      unknown,
				"fabric_addresses": "{\n    \"spark1\" = (known after apply)\n    \"spark2\" = (known after apply)\n}",
			},
		},
		{
			name:  "head observed",
			facts: map[string]string{"spark1": "192.168.200.12"},
			want: map[string]string{
				"endpoint":         `"http://192.168.200.12:8000/v1"`,
				"ray_address":      `"192.168.200.12:6379"`,
				"fabric_addresses": "{\n    \"spark1\" = \"192.168.200.12\"\n    \"spark2\" = (known after apply)\n}",
			},
		},
		{
			name:  "both observed",
			facts: map[string]string{"spark1": "192.168.200.12", "spark2": "192.168.200.13"},
			want: map[string]string{
				"endpoint":         `"http://192.168.200.12:8000/v1"`,
				"ray_address":      `"192.168.200.12:6379"`,
				"fabric_addresses": "{\n    \"spark1\" = \"192.168.200.12\"\n    \"spark2\" = \"192.168.200.13\"\n}",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := kind.Facts{FabricAddrs: map[string]netip.Addr{}}
			for n, a := range tt.facts {
				f.FabricAddrs[n] = netip.MustParseAddr(a)
			}
			got, diags := cfg.WithFacts(f)
			if diags.HasErrors() {
				t.Fatalf("diagnostics:\n%s", renderDiags(t, cfg, diags))
			}
			for name, want := range tt.want {
				if v := plan.FormatValue(got.Outputs[name].Value); v != want {
					t.Errorf("output %s\ngot:  %s\nwant: %s", name, v, want)
				}
			}
			if _, known := got.RayClusters["spark"].Address(); known != (tt.facts["spark1"] != "") {
				t.Errorf("cluster address known = %v", known)
			}
		})
	}
	if v := plan.FormatValue(cfg.Outputs["endpoint"].Value); v != unknown {
		t.Errorf("WithFacts modified the receiver: endpoint = %s", v)
	}
}

func TestVariablePrecedence(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hclFile := write("a.rfvars", `x = "file-hcl"`)
	jsonFile := write("b.json", `{"x": "file-json"}`)
	src := map[string][]byte{"main.hcl": []byte(`
variable "x" {
  default = "default"
}
variable "n" {
  type    = number
  default = 1
}
variable "m" {
  type    = map(number)
  default = {}
}
output "x" { value = var.x }
`)}
	env := []string{"RAYFORM_VAR_x=env", "RAYFORM_VAR_undeclared=ignored", "OTHER=1"}
	tests := []struct {
		name       string
		opts       config.Options
		want, from string
	}{
		{"default", config.Options{}, "default", "default"},
		{"env over default", config.Options{Env: env}, "env", "env"},
		{"-var over env", config.Options{Env: env, Args: []config.VarArg{{Value: "x=flag"}}}, "flag", "-var"},
		{"later -var-file over earlier -var", config.Options{Env: env, Args: []config.VarArg{{Value: "x=flag"}, {File: true, Value: hclFile}}}, "file-hcl", hclFile},
		{"later -var over earlier -var-file", config.Options{Args: []config.VarArg{{File: true, Value: jsonFile}, {Value: "x=flag"}}}, "flag", "-var"},
		{"json var file", config.Options{Args: []config.VarArg{{File: true, Value: jsonFile}}}, "file-json", jsonFile},
		{"value with equals sign", config.Options{Args: []config.VarArg{{Value: "x=a=b"}}}, "a=b", "-var"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := loadFiles(src, tt.opts)
			if diags.HasErrors() {
				t.Fatalf("diagnostics:\n%s", renderDiags(t, cfg, diags))
			}
			v := cfg.Variables["x"]
			if !v.Value.RawEquals(cty.StringVal(tt.want)) || v.Source != tt.from {
				t.Errorf("wrong value\ngot:  %#v from %s\nwant: %q from %s", v.Value, v.Source, tt.want, tt.from)
			}
		})
	}
	t.Run("primitive types convert from strings, others parse as expressions", func(t *testing.T) {
		cfg, diags := loadFiles(src, config.Options{Args: []config.VarArg{{Value: "n=3"}, {Value: "m={ a = 1 + 1 }"}}})
		if diags.HasErrors() {
			t.Fatalf("diagnostics:\n%s", renderDiags(t, cfg, diags))
		}
		if got := cfg.Variables["n"].Value; !got.RawEquals(cty.NumberIntVal(3)) {
			t.Errorf("n = %#v, want 3", got)
		}
		if got := cfg.Variables["m"].Value; !got.RawEquals(cty.MapVal(map[string]cty.Value{"a": cty.NumberIntVal(2)})) {
			t.Errorf("m = %#v, want { a = 2 }", got)
		}
	})
}

func TestFunctions(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token.txt"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ expr, want string }{
		{`cidrhost("192.168.200.0/24", 12)`, `"192.168.200.12"`},
		{`cidrhost("192.168.200.0/24", -2)`, `"192.168.200.254"`},
		{`cidrhost("fd00::/64", 5)`, `"fd00::5"`},
		{`format("%s:%d", "h", 80)`, `"h:80"`},
		{`join(",", ["a", "b"])`, `"a,b"`},
		{`concat(["a"], ["b"])`, "[\n    \"a\",\n    \"b\",\n]"},
		{`merge({ a = 1 }, { b = 2 })`, "{\n    a = 1\n    b = 2\n}"},
		{`lookup({ a = "x" }, "b", "d")`, `"d"`},
		{`length("héllo")`, `5`},
		{`length({ a = 1, b = 2 })`, `2`},
		{`length([1, 2, 3])`, `3`},
		{`toset(["b", "a", "b"])`, "[\n    \"a\",\n    \"b\",\n]"},
		{`tolist(toset(["a"]))`, "[\n    \"a\",\n]"},
		{`range(3)`, "[\n    0,\n    1,\n    2,\n]"},
		{`file("token.txt")`, `"abc"`},
		{`can(cidrhost("x", 1))`, `false`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			src := map[string][]byte{"main.hcl": []byte("output \"o\" {\n  value = " + tt.expr + "\n}\n")}
			cfg, diags := loadFiles(src, config.Options{BaseDir: dir})
			if diags.HasErrors() {
				t.Fatalf("diagnostics:\n%s", renderDiags(t, cfg, diags))
			}
			if got := plan.FormatValue(cfg.Outputs["o"].Value); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	errs := []struct{ expr, want string }{
		{`cidrhost("192.168.200.0/24", 256)`, "out of range"},
		{`cidrhost("192.168.200.0/33", 1)`, "invalid CIDR"},
		{`file("missing.txt")`, "cannot read file"},
		{`file("/dev/zero")`, "not a regular file"},
		{`length(1)`, "must be a string, a collection"},
	}
	for _, tt := range errs {
		t.Run(tt.expr, func(t *testing.T) {
			src := map[string][]byte{"main.hcl": []byte("output \"o\" {\n  value = " + tt.expr + "\n}\n")}
			cfg, diags := loadFiles(src, config.Options{BaseDir: dir})
			if !diags.HasErrors() || !strings.Contains(renderDiags(t, cfg, diags), tt.want) {
				t.Errorf("want an error containing %q, got:\n%s", tt.want, renderDiags(t, cfg, diags))
			}
		})
	}
}

func TestSensitiveTracking(t *testing.T) {
	src := map[string][]byte{"main.hcl": []byte(`
variable "token" {
  default   = "s3cret"
  sensitive = true
}
locals {
  env = { HF_TOKEN = var.token, PLAIN = "x" }
}
node "a" {
  host = "a"
  gpus = 1
}
network "n" {
  cidr = "10.0.0.0/8"
}
ray_cluster "c" {
  image   = "img"
  head    = node.a
  network = network.n
  env     = local.env
}
vllm_serve "s" {
  cluster    = ray_cluster.c
  model      = "m"
  extra_args = ["--enforce-eager"]
  api_key    = var.token
}
output "token" {
  value     = var.token
  sensitive = true
}
`)}
	cfg, diags := loadFiles(src, config.Options{})
	if diags.HasErrors() {
		t.Fatalf("diagnostics:\n%s", renderDiags(t, cfg, diags))
	}
	rc, s := cfg.RayClusters["c"], cfg.Serves["s"]
	checks := []struct {
		d    *config.Decl
		path string
		want bool
	}{
		{&rc.Decl, `env["HF_TOKEN"]`, true},
		{&rc.Decl, `env`, true},
		{&rc.Decl, `env["PLAIN"]`, false},
		{&rc.Decl, `image`, false},
		{&s.Decl, `api_key`, true},
		{&s.Decl, `extra_args[0]`, false},
	}
	for _, c := range checks {
		if got := c.d.IsSensitive(c.path); got != c.want {
			t.Errorf("%s: IsSensitive(%s) = %v, want %v (sensitive paths %v)", c.d.Addr, c.path, got, c.want, c.d.Sensitive)
		}
	}
	if rc.Env["HF_TOKEN"] != "s3cret" || s.APIKey != "s3cret" {
		t.Errorf("the decoded value must stay usable; env = %v", rc.Env)
	}
	if !cfg.Locals["env"].Sensitive {
		t.Errorf("local.env must be sensitive")
	}
}

// TestLoadWithoutKinds checks that the resource block types come only from
// the registered kinds: without them a configuration is refused, and a
// block type no kind registers is unsupported.
func TestLoadWithoutKinds(t *testing.T) {
	src := map[string][]byte{"main.hcl": []byte("node \"a\" {\n  host = \"h\"\n}\n")}
	_, diags := config.LoadFiles(src, config.Options{})
	if !diags.HasErrors() || diags[0].Summary != "No resource kinds" {
		t.Errorf("LoadFiles without kinds: %v, want No resource kinds", diags)
	}
	var onlyNodes []config.Kind
	for _, k := range resources.Kinds().Schemas() {
		if k.Type == "node" {
			onlyNodes = append(onlyNodes, k)
		}
	}
	src["main.hcl"] = append(src["main.hcl"], []byte("network \"f\" {\n  cidr = \"10.0.0.0/24\"\n}\n")...)
	_, diags = config.LoadFiles(src, config.Options{Kinds: onlyNodes})
	if !diags.HasErrors() || diags[0].Summary != "Unsupported block type" {
		t.Errorf("a block of an unregistered kind: %v, want Unsupported block type", diags)
	}
}
