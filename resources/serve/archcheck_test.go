package serve

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/state"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
	"github.com/rayform/rayform/resources/modelfit"
	"github.com/rayform/rayform/resources/stepenv"
)

// archReply is the query's output for a registry fixture of
// testdata/modelfit, as the image prints it.
func archReply(t *testing.T, fixture string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "modelfit", fixture))
	if err != nil {
		t.Fatal(err)
	}
	var a archAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	line, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return archMarker + string(line) + "\n"
}

func archModel(t *testing.T, model string) modelfit.ModelConfig {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "modelfit", model, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := modelfit.ParseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestArchStep: apply asks each image once, by image ID, and keeps the
// answer in the state; a second serve on the same image reads the state;
// a misfit stops before vllm serve with the model's file:line; an image
// without vLLM is "not checked" and stops nothing.
func TestArchStep(t *testing.T) {
	const (
		newID  = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
		oldID  = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
		labID  = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
		rayNew = "rayform-new"
		rayOld = "rayform-old"
		rayLab = "rayform-lab"
	)
	fake := transporttest.NewFake(t, "h1")
	inspect := func(c, id string) {
		fake.Expect(transporttest.Argv("docker", "inspect", "--format", "{{.Image}} {{.Config.Image}}", c)).Return(id + " vllm/vllm-openai:" + c + "\n")
	}
	query := func(c string) transporttest.Matcher {
		return transporttest.HasPrefix("docker exec " + c + " sh -c ")
	}
	inspect(rayNew, newID)
	inspect(rayOld, oldID)
	inspect(rayLab, labID)
	fake.Expect(query(rayNew)).ReturnResult(transport.Result{Stdout: []byte(archReply(t, "registry-new-image.json")),
		Stderr: []byte("None of PyTorch, TensorFlow >= 2.0, or Flax have been found. Models won't be available and only tokenizers, configuration and file/data utilities can be used.\n")}).Times(1)
	fake.Expect(query(rayOld)).Return(archReply(t, "registry-old-image.json")).Times(1)
	fake.Expect(query(rayLab)).Return(archMarker + `{"transformers": "4.57.1", "model_types": ["llama"], "vllm_error": "ModuleNotFoundError: No module named 'vllm'"}` + "\n").Times(1)

	st, err := state.New("p")
	if err != nil {
		t.Fatal(err)
	}
	env := (&stepenv.StepEnv{Conns: map[string]transport.Conn{"h1": fake}, State: st}).WithDefaults()
	qwen := &ArchCheck{Config: archModel(t, "qwen2.5-7b-instruct"), At: "main.hcl:47", Source: "From the model's config.json on h1."}
	run := func(container string) (string, error) {
		w := &kind.Work{Address: "vllm_serve.m", Action: plan.Create, Do: &ServeWork{Spec: ServeSpec{Name: "m", Container: container, Node: "h1"}, Start: true, Arch: qwen}}
		r := newServeRun(env, w)
		var lines []string
		err := newArchStep(r).Run(context.Background(), func(l string) { lines = append(lines, l) })
		return strings.Join(lines, "\n"), err
	}

	// The new image knows Qwen2: asked once, then read from the state.
	for i := range 2 {
		out, err := run(rayNew)
		if err != nil {
			t.Fatalf("run %d on the new image: %v\n%s", i, err, out)
		}
		if !strings.Contains(out, "the image's vLLM 0.11.0 and transformers 4.57.1 know Qwen2ForCausalLM (qwen2)") {
			t.Errorf("run %d: %s", i, out)
		}
		if asked := strings.Contains(out, "asked the image 111111111111"); asked != (i == 0) {
			t.Errorf("run %d asked the image: %v\n%s", i, asked, out)
		}
	}
	if im, ok := st.Image(newID); !ok || answerOf(im).VLLM != "0.11.0" || len(answerOf(im).Architectures) != 11 || len(answerOf(im).ModelTypes) != 421 || !st.ImagesChanged() {
		t.Fatalf("state holds %+v, %v for the new image", answerOf(im), ok)
	}
	if id, _, ok := st.ImageByRef("vllm/vllm-openai:" + rayNew); !ok || id != newID {
		t.Errorf("ImageByRef = %s, %v; want %s", id, ok, newID)
	}

	// The old image: the serve is not started, at the model's line.
	_, err = run(rayOld)
	if err == nil || !strings.Contains(err.Error(), "vllm serve m was not started") || !strings.Contains(err.Error(), `main.hcl:47: the image's vLLM and transformers do not know the model: architecture Qwen2ForCausalLM, model_type "qwen2" (vLLM 0.1.2, transformers 4.31.0)`) {
		t.Fatalf("old image: %v", err)
	}
	if _, err := run(rayOld); err == nil {
		t.Fatal("old image, from the state: no error")
	}

	// No vLLM in the image: not checked, recorded, nothing stops.
	for range 2 {
		out, err := run(rayLab)
		if err != nil || !strings.Contains(out, "not checked: the image's python3 cannot import vLLM's model registry (ModuleNotFoundError: No module named 'vllm')") {
			t.Fatalf("lab image: %v\n%s", err, out)
		}
	}
	// Every query is read-only and bounded inside the container.
	for _, c := range fake.Calls() {
		if c.Cmd.Mutating {
			t.Errorf("mutating call %s", c.Line())
		}
		if strings.HasPrefix(c.Cmd.String(), "docker exec") && !strings.Contains(c.Cmd.String(), "timeout 120 python3 -c") {
			t.Errorf("unbounded query %s", c.Line())
		}
	}
}

// TestImageAnswerHoldsNoValues pins the fields of the answer the serve
// kind records in the state (state.Image.Answer): an image's public names
// and versions, nothing that could carry configuration values
// (environment, variables, tokens). If this fails, keep the value out of
// the state.
func TestImageAnswerHoldsNoValues(t *testing.T) {
	// CUDA holds versions, arch names and the path of the libcuda the
	// image loads: no configuration value.
	want := []string{"Query", "VLLM", "Platform", "Transformers", "Architectures", "ModelTypes", "VLLMConfigTypes", "Unchecked", "CUDA"}
	var got []string
	for f := range reflect.TypeFor[imageAnswer]().Fields() {
		got = append(got, f.Name)
		if k := f.Type.Kind(); k == reflect.Map || k == reflect.Interface {
			t.Errorf("imageAnswer.%s is a %v: it could hold values", f.Name, k)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("imageAnswer fields = %v, want exactly %v", got, want)
	}
}

// The image's answer records the distribution's version, local segment
// included, and vLLM's platform: the lab's real vLLM says __version__
// "0.32.0", its distribution "0.32.0+cpu" (issue 39: plan recorded
// "0.32.0" and used the CUDA block size). An older query's answer, without
// either, is not current: apply asks the image again.
func TestParseArchAnswerVersionAndPlatform(t *testing.T) {
	for _, tc := range []struct {
		name, line        string
		version, platform string
		cpu, current      bool
	}{
		{"cpu build", `{"vllm":"0.32.0","vllm_dist":"0.32.0+cpu","platform":"cpu","transformers":"4.57.1"}`, "0.32.0+cpu", "cpu", true, true},
		{"cuda image", `{"vllm":"0.17.1","vllm_dist":"0.17.1","platform":"cuda","transformers":"4.57.1"}`, "0.17.1", "cuda", false, true},
		{"no metadata", `{"vllm":"0.17.1","platform":"cuda"}`, "0.17.1", "cuda", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, ok := parseArchAnswer([]byte("INFO noise\n" + archMarker + tc.line + "\n"))
			a := answerOf(im)
			if !ok || a.VLLM != tc.version || a.Platform != tc.platform || a.cpu() != tc.cpu || answerCurrent(im) != tc.current {
				t.Errorf("parsed %+v (ok %v, cpu %v, current %v), want version %q platform %q cpu %v current %v", a, ok, a.cpu(), answerCurrent(im), tc.version, tc.platform, tc.cpu, tc.current)
			}
		})
	}
	old := state.Image{Answer: json.RawMessage(`{"vllm":"0.32.0","transformers":"4.57.1"}`)}
	if answerCurrent(old) || answerOf(old).cpu() {
		t.Errorf("an answer of the first query is current or CPU: %+v", answerOf(old))
	}
}

// The serve's last measured load time is read back from its recipe on the
// head, as apply wrote it (keepGood): plan's downtime estimate.
func TestLastLoadFromRecipe(t *testing.T) {
	spec := ServeSpec{Name: "qwen", Node: "spark1", Container: "rayform-spark"}
	at := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	b, err := json.Marshal(recipe{Spec: ServeSpec{Args: []string{"vllm", "serve", "m"}}, Hash: "h", LoadSeconds: 45.2, At: at})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		read    observe.ReadResult
		want    float64
		wantAny bool
	}{
		{"measured", observe.ReadResult{Exists: true, Content: string(b)}, 45.2, true},
		{"none", observe.ReadResult{}, 0, false},
		{"truncated", observe.ReadResult{Exists: true, Content: string(b), Truncated: true}, 0, false},
	} {
		hf := &observe.HostFacts{Reads: map[string]observe.ReadResult{spec.HostGoodPath("p"): tc.read}}
		secs, gotAt, ok := lastLoad(hf, spec, "p")
		if ok != tc.wantAny || secs != tc.want || ok && !gotAt.Equal(at) {
			t.Errorf("%s: lastLoad = %v, %v, %v; want %v, %v", tc.name, secs, gotAt, ok, tc.want, tc.wantAny)
		}
	}
}
