package kindstest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources/clitables"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/modelfit"
	"github.com/rayform/rayform/resources/serve"
)

// flagWord is an option name in a command line or a text: --word, up to
// '=' or whatever ends it.
var flagWord = regexp.MustCompile(`--[a-z][a-z0-9-]*[a-z0-9]`)

// versionConstraints are the flags rayform names that do not exist in every
// version it targets, with the words of the text that say which versions
// have them; the test requires every text naming the flag to say so.
var versionConstraints = map[string]string{
	// vLLM removed --swap-space in 0.18; the image's 0.17.1 has it.
	"--swap-space": "before 0.18",
}

// otherTools are flags the diagnose texts name that belong to another
// program than `vllm serve` and `ray start` (or to the texts' own prose).
var otherTools = map[string]string{
	"--gpus": "docker run", "--rm": "docker run", "--ipc": "docker run", "--shm-size": "docker run", "--network": "docker run",
	"--entrypoint": "docker run", "--runtime": "nvidia-ctk", "--format": "docker inspect / nvidia-smi / ray list",
	"--query-compute-apps": "nvidia-smi", "--since": "docker events", "--version": "vllm / ray", "--help": "vllm serve --help=all",
	"--tail": "docker logs", "--type": "docker inspect", "--label": "docker run", "--name": "docker run", "--env": "docker run",
	"--env-file": "docker run", "--restart": "docker run", "--detach": "docker run", "--net": "docker run", "--ulimit": "docker run",
	"--limit": "ray list", "--opt": "prose: --opt=value", "--flag": "prose: --flag=VALUE",
	"--device": "docker run", "--privileged": "docker run",
	"--require": "nvidia-container-cli (the container runtime's cuda>= requirement)", "--add-port": "firewall-cmd",
}

// versionLess compares dotted release numbers ("0.17.1" < "0.18.0").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// removedOptions reads diagnose's table of removed `vllm serve` options
// (rules_serve.go: var removedOptions, entries {flag, absentSince, ...}):
// flag -> the first release said to refuse it.
func removedOptions(t *testing.T, f *ast.File) map[string]string {
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "removedOptions" || len(vs.Values) != 1 {
			return true
		}
		list, ok := vs.Values[0].(*ast.CompositeLit)
		if !ok {
			t.Fatal("diagnose's removedOptions is not a composite literal")
		}
		for _, e := range list.Elts {
			entry, ok := e.(*ast.CompositeLit)
			if !ok || len(entry.Elts) < 2 {
				t.Fatalf("diagnose's removedOptions entry %T is not {flag, absentSince, ...}", e)
			}
			var fields []string
			for _, x := range entry.Elts[:2] {
				lit, ok := x.(*ast.BasicLit)
				if !ok {
					t.Fatal("diagnose's removedOptions entry is not string literals")
				}
				v, _ := strconv.Unquote(lit.Value)
				fields = append(fields, v)
			}
			out[fields[0]] = fields[1]
		}
		return false
	})
	return out
}

// flagTables are the option strings of both versions of each tool.
type flagTables struct {
	vllm, ray map[string]map[string]bool // version -> option string
}

func loadFlagTables(t *testing.T) flagTables {
	t.Helper()
	ft := flagTables{vllm: map[string]map[string]bool{}, ray: map[string]map[string]bool{}}
	for _, v := range []string{clitables.VLLMImage, clitables.VLLMLab, clitables.VLLMNewest} {
		ft.vllm[v] = map[string]bool{}
		for _, s := range clitables.MustVLLM(v).OptionStrings() {
			ft.vllm[v][s] = true
		}
	}
	for _, v := range []string{clitables.RayImage, clitables.RayNewest} {
		ft.ray[v] = map[string]bool{}
		for _, s := range clitables.MustRay(v).OptionStrings() {
			ft.ray[v][s] = true
		}
	}
	return ft
}

// missing lists the versions of tables that lack flag.
func missing(tables map[string]map[string]bool, flag string) []string {
	var out []string
	for _, v := range slices.Sorted(maps.Keys(tables)) {
		if !tables[v][flag] {
			out = append(out, v)
		}
	}
	return out
}

func flagsOf(argv []string) []string {
	var out []string
	for _, a := range argv {
		if strings.HasPrefix(a, "--") {
			name, _, _ := strings.Cut(a, "=")
			out = append(out, name)
		}
	}
	return out
}

// Every flag rayform puts on a `ray start` or `vllm serve` command line, and
// every vLLM option it manages in extra_args, exists in every version of
// the generated tables of resources/clitables: the image's, the lab's real
// vLLM and the newest.
func TestEmittedFlagsExistInBothVersions(t *testing.T) {
	ft := loadFlagTables(t)
	loaded, diags := LoadFiles(map[string][]byte{"main.hcl": benchConfig(2)}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	addrs := map[string]netip.Addr{}
	ifaces := map[string]string{}
	for i, node := range loaded.RayClusters["main"].Nodes() {
		addrs[node] = netip.AddrFrom4([4]byte{192, 168, 0, byte(10 + i)})
		ifaces[node] = "ib0"
	}
	cfg, diags := loaded.WithFacts(Facts{FabricAddrs: addrs})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var rayFlags, vllmFlags []string
	for _, spec := range cluster.ClusterSpecs(cluster.View(cfg.Config), cfg.RayClusters["main"], addrs, ifaces) {
		args := spec.RayStartArgs()
		if !slices.Equal(args[:2], []string{"ray", "start"}) {
			t.Fatalf("ray start args: %q", args)
		}
		rayFlags = append(rayFlags, flagsOf(args)...)
	}
	spec, err := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves["llama"])
	if err != nil {
		t.Fatal(err)
	}
	vllmFlags = append(vllmFlags, flagsOf(spec.Args)...)
	for name := range serve.ManagedServeOptions() {
		vllmFlags = append(vllmFlags, name)
	}
	for _, want := range []string{"--head", "--address", "--node-ip-address", "--num-gpus", "--block"} {
		if !slices.Contains(rayFlags, want) {
			t.Errorf("the ray start command lines lack %s: %q", want, rayFlags)
		}
	}
	for _, want := range []string{"--tensor-parallel-size", "--distributed-executor-backend", "--max-model-len"} {
		if !slices.Contains(vllmFlags, want) {
			t.Errorf("the vllm serve command line lacks %s: %q", want, vllmFlags)
		}
	}
	for _, f := range rayFlags {
		if m := missing(ft.ray, f); len(m) > 0 {
			t.Errorf("rayform runs `ray start %s`, which Ray %s does not have", f, strings.Join(m, ", "))
		}
	}
	for _, f := range vllmFlags {
		if m := missing(ft.vllm, f); len(m) > 0 {
			t.Errorf("rayform runs or manages `vllm serve %s`, which vLLM %s does not have", f, strings.Join(m, ", "))
		}
	}
}

// Every flag a diagnosis names (its titles, explanations and fixes: all the
// string literals of resources/diagnose) is an option of `vllm serve` or
// `ray start` in both versions of each, or a flag of another program listed
// in otherTools, or a flag with its version constraint stated where it is
// named (versionConstraints).
func TestDiagnoseFlagsExistInBothVersions(t *testing.T) {
	ft := loadFlagTables(t)
	files, err := filepath.Glob(filepath.Join("..", "diagnose", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	var parsed []*ast.File
	removed := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		for flag, since := range removedOptions(t, f) {
			removed[flag] = since
		}
	}
	// diagnose names removed options as removed: each must be absent from
	// every table of a release at or after the one it gives.
	for flag, since := range removed {
		for _, v := range slices.Sorted(maps.Keys(ft.vllm)) {
			if !versionLess(v, since) && ft.vllm[v][flag] {
				t.Errorf("diagnose says vLLM refuses %s since %s, yet vLLM %s has it", flag, since, v)
			}
		}
	}
	if len(removed) == 0 {
		t.Log("diagnose has no removedOptions table")
	}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if _, ok := removed[s]; ok {
				return true // the flag of a removedOptions entry, checked above
			}
			for _, flag := range flagWord.FindAllString(s, -1) {
				seen[flag] = true
				where := fset.Position(lit.Pos()).String()
				inVLLM := len(missing(ft.vllm, flag)) < len(ft.vllm)
				inRay := len(missing(ft.ray, flag)) < len(ft.ray)
				switch {
				case versionConstraints[flag] != "":
					if !strings.Contains(s, versionConstraints[flag]) {
						t.Errorf("%s: names %s without its version constraint (%q): %q", where, flag, versionConstraints[flag], s)
					}
				case inVLLM || inRay:
					if m := missing(ft.vllm, flag); inVLLM && len(m) > 0 {
						t.Errorf("%s: names vllm serve %s, which vLLM %s does not have: %q", where, flag, strings.Join(m, ", "), s)
					}
					if m := missing(ft.ray, flag); inRay && len(m) > 0 {
						t.Errorf("%s: names ray start %s, which Ray %s does not have: %q", where, flag, strings.Join(m, ", "), s)
					}
				case otherTools[flag] == "":
					t.Errorf("%s: names %s, which neither vllm serve nor ray start has in any version; a flag of another program goes into otherTools with its program: %q", where, flag, s)
				}
			}
			return true
		})
	}
	for flag, c := range versionConstraints {
		if m := missing(ft.vllm, flag); len(m) == 0 {
			t.Errorf("%s is listed with the constraint %q, yet both vLLM versions have it: drop the entry", flag, c)
		}
	}
	for _, want := range []string{"--node-ip-address", "--enforce-eager", "--object-store-memory"} {
		if !seen[want] {
			t.Errorf("no diagnose text names %s: the scan of the string literals is broken", want)
		}
	}
}

// The lab's real-vLLM configuration (`rflab up -vllm real`, golden in
// testdata/lab/rayform-vllm-real.hcl) runs a `vllm serve` command line
// whose every option, rayform's and extra_args', the lab's vLLM 0.32.0
// has (its table was generated from the lab image's own layers).
func TestLabRealVLLMFlagsExistInLabVLLM(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "lab", "rayform-vllm-real.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	// A pinned revision, as apply resolves the hub's "main": the command
	// line then carries --revision.
	pinned := strings.Replace(string(src), `revision = "main"`, `revision = "79f3677718146553e2c501b859f748feb9488aec"`, 1)
	if pinned == string(src) {
		t.Fatal(`the lab's configuration no longer has revision = "main"`)
	}
	loaded, diags := LoadFiles(map[string][]byte{"main.hcl": []byte(pinned)}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	cfg, diags := loaded.WithFacts(Facts{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	spec, err := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves["qwen"])
	if err != nil {
		t.Fatal(err)
	}
	lab := map[string]bool{}
	for _, s := range clitables.MustVLLM(clitables.VLLMLab).OptionStrings() {
		lab[s] = true
	}
	flags := flagsOf(spec.Args)
	for _, want := range []string{"--tensor-parallel-size", "--distributed-executor-backend", "--revision", "--kv-cache-memory-bytes", "--dtype"} {
		if !slices.Contains(flags, want) {
			t.Errorf("the lab's vllm serve command line lacks %s: %q", want, spec.Args)
		}
	}
	for _, f := range flags {
		if !lab[f] {
			t.Errorf("the lab runs `vllm serve %s`, which its vLLM %s does not have", f, clitables.VLLMLab)
		}
	}
}

// What plan predicts for the lab's real-vLLM serve (its golden
// configuration, the lab's tiny Llama, vLLM's CPU build) is the line the
// real vLLM 0.32.0 logged for the same arguments
// (testdata/realvllm/capacity-tp2-64M.log: tensor_parallel_size 2,
// --kv-cache-memory-bytes 64M, max_model_len 4096).
func TestLabRealVLLMCapacityPrediction(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "lab", "rayform-vllm-real.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	loaded, diags := LoadFiles(map[string][]byte{"main.hcl": src}, config.Options{BaseDir: "."})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	cfg, diags := loaded.WithFacts(Facts{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	sv := cfg.Serves["qwen"]
	s := serve.FitServe(sv, cfg.RayClusters[sv.Cluster])
	s.CPU, s.PlatformKnown = true, true
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "realvllm", "tiny-llama-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	mc, err := modelfit.ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	capy, ok := modelfit.KVCapacity(mc, s)
	if !ok || !capy.Exact {
		t.Fatalf("no exact prediction for the lab's serve %+v", s)
	}
	logged, err := os.ReadFile(filepath.Join("..", "..", "testdata", "realvllm", "capacity-tp2-64M.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logged), "] "+capy.LogLine()+"\n") {
		t.Errorf("plan predicts %q (%s); the real vLLM's log has no such line", capy.LogLine(), capy)
	}
}
