package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/engine/run"
)

// statusItem is a kind's status of one resource that renders as line.
func statusItem(addr, line string) run.KindStatus {
	return run.KindStatus{Address: addr, Value: map[string]string{"address": addr},
		Render: func(w io.Writer) { fmt.Fprintln(w, line) }}
}

// testReport is an unhealthy report of one reachable node with a
// container, one unreachable node, one node whose GPU is simulated, and
// two kinds' resources.
func testReport() *run.StatusReport {
	return &run.StatusReport{Project: "lab", Problems: []string{"vllm_serve.two: down"},
		Nodes: []run.StatusNode{
			{Name: "a", Host: "10.0.0.1", Reachable: true, GPUs: []string{"GB10"}, MemoryTotalBytes: 4 << 30, MemoryAvailableBytes: 2 << 30,
				FabricAddress: "192.168.200.1", Containers: []run.StatusContainer{{Name: "rayform-main", State: "running", Image: "img"}}},
			{Name: "b", Host: "10.0.0.2", Error: "connection refused"},
			{Name: "c", Host: "10.0.0.3", Reachable: true, GPUs: []string{"NVIDIA GB10"}, GPUSimulator: "rayform simnode", MemoryTotalBytes: 4 << 30, MemoryAvailableBytes: 2 << 30},
		},
		Kinds: []run.StatusKind{
			{Key: "clusters", Items: []run.KindStatus{statusItem("ray_cluster.main", "Ray main")}},
			{Key: "serves", Items: []run.KindStatus{statusItem("vllm_serve.two", "Serve two")}},
		}}
}

// TestStatusViews: the text view shows the verdict, each node, the
// project's containers, each kind's resources in order and the problems
// (after clearing the screen with -watch); the JSON view the document.
func TestStatusViews(t *testing.T) {
	var text bytes.Buffer
	if err := NewStatus(arguments.ViewHuman, NewView(&text, nil), false).Show(testReport()); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{"Project lab: NOT HEALTHY (1 problems)", "a          10.0.0.1         reachable  1 GPU (GB10)  memory 4.0 GiB (2.0 GiB available)  fabric 192.168.200.1",
		"b          10.0.0.2         UNREACHABLE: connection refused",
		// Node c's nvidia-smi said it is simnode (GPUSimulator): marked.
		"c          10.0.0.3         reachable  1 GPU (NVIDIA GB10) (simulated)  memory 4.0 GiB", "rayform-main", "Ray main\nServe two\n", "  - vllm_serve.two: down", "Run rayform plan"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.HasPrefix(out, "\x1b[H") {
		t.Error("text without -watch clears the screen")
	}
	text.Reset()
	NewStatus(arguments.ViewHuman, NewView(&text, nil), true).Show(testReport())
	if !strings.HasPrefix(text.String(), "\x1b[H\x1b[2J") {
		t.Errorf("-watch text does not clear the screen: %q", text.String()[:10])
	}
	var doc bytes.Buffer
	if err := NewStatus(arguments.ViewJSON, NewView(&doc, nil), false).Show(testReport()); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Project string              `json:"project"`
		Healthy bool                `json:"healthy"`
		Serves  []map[string]string `json:"serves"`
	}
	if err := json.Unmarshal(doc.Bytes(), &got); err != nil || got.Project != "lab" || got.Healthy || len(got.Serves) != 1 || got.Serves[0]["address"] != "vllm_serve.two" {
		t.Errorf("json view: %+v, %v\n%s", got, err, doc.String())
	}
}
