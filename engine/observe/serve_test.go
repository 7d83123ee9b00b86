package observe

import (
	"strings"
	"testing"
)

func TestParseServeRecord(t *testing.T) {
	frame := func(body, stderr string, rc string) string {
		return "@@rayform@@ probe 1\n@@rayform@@ begin serve.record name=qwen\n" + body +
			"\n@@rayform@@ stderr\n" + stderr + "\n@@rayform@@ end " + rc + "\n@@rayform@@ done\n"
	}
	tests := []struct {
		name string
		out  string
		want ServeRecord
	}{
		{"alive", frame(`{"resource":"vllm_serve.qwen","spec_hash":"abc123"}`+"\nalive", "", "0"),
			ServeRecord{Found: true, Resource: "vllm_serve.qwen", SpecHash: "abc123", Alive: true}},
		{"attrs", frame(`{"resource":"vllm_serve.qwen","spec_hash":"abc123","attrs":{"max_model_len":32768}}`+"\nalive", "", "0"),
			ServeRecord{Found: true, Resource: "vllm_serve.qwen", SpecHash: "abc123", Alive: true, Attrs: map[string]string{"max_model_len": "32768"}}},
		{"dead", frame(`{"resource":"vllm_serve.qwen","spec_hash":"abc123"}`+"\ndead", "", "0"),
			ServeRecord{Found: true, Resource: "vllm_serve.qwen", SpecHash: "abc123"}},
		{"never started", frame("", "cat: can't open '/tmp/rayform/serve-qwen.json': No such file or directory", "1"),
			ServeRecord{}},
		{"container gone", frame("", "Error response from daemon: No such container: rayform-spark", "1"),
			ServeRecord{Err: "Error response from daemon: No such container: rayform-spark"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.out))
			if err != nil {
				t.Fatal(err)
			}
			got := f.Serves["qwen"]
			if got.Found != tt.want.Found || got.Resource != tt.want.Resource || got.SpecHash != tt.want.SpecHash || got.Alive != tt.want.Alive || got.Err != tt.want.Err {
				t.Fatalf("Serves[qwen] = %+v, want %+v", got, tt.want)
			}
			if len(got.Attrs) != len(tt.want.Attrs) || got.Attrs["max_model_len"] != tt.want.Attrs["max_model_len"] {
				t.Fatalf("Attrs = %v, want %v", got.Attrs, tt.want.Attrs)
			}
		})
	}
}

func TestProbeScriptReadsServeRecords(t *testing.T) {
	s := ProbeScript(HostSpec{Head: true, HeadContainer: "rayform-spark", Serves: []string{"qwen", "bad name;rm"}, ServePort: 8000})
	if !strings.Contains(s, "serve.record name=qwen") || !strings.Contains(s, "/tmp/rayform/serve-qwen.json") {
		t.Fatalf("probe does not read the serve record:\n%s", s)
	}
	if strings.Contains(s, "bad name") {
		t.Fatal("an invalid serve name reached the script")
	}
}
