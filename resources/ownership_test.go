package resources

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/rayform/rayform/engine/config"
)

// Issue 23, item 5: docker_args cannot set rayform's labels (a container
// labelled with another project was created and orphaned); validate
// refuses them at the argument's file:line.
func TestDockerArgsCannotSetRayformLabels(t *testing.T) {
	for _, tc := range []struct {
		name, args string
		summary    string // "" when the arguments pass
	}{
		{"--label KEY=VALUE", `["--label", "rayform.project=other"]`, "Label managed by rayform"},
		{"--label=", `["--label=rayform.resource=ray_cluster.x"]`, "Label managed by rayform"},
		{"-l", `["-l", "rayform.managed=false"]`, "Label managed by rayform"},
		{"-l=", `["-l=rayform.project=other"]`, "Label managed by rayform"},
		{"-lVALUE", `["-lrayform.project=other"]`, "Label managed by rayform"},
		{"-l in a cluster", `["-tl", "rayform.spec-hash=x"]`, "Label managed by rayform"},
		{"key in capitals", `["--label", "Rayform.Project=other"]`, "Label managed by rayform"},
		{"key alone", `["--label", "rayform.project"]`, "Label managed by rayform"},
		{"--label-file", `["--label-file", "/etc/labels"]`, "Label file refused"},
		{"--label-file=", `["--label-file=/etc/labels"]`, "Label file refused"},
		{"own label", `["--label", "team=infer", "-l", "owner=me"]`, ""},
		{"the value of another option", `["-e", "--label=rayform.x"]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(kindsBase, `container_name = "ray-main"`, "container_name = \"ray-main\"\n  docker_args    = "+tc.args, 1)
			_, diags := config.LoadFiles(map[string][]byte{"main.hcl": []byte(src)}, config.Options{BaseDir: ".", Kinds: Kinds()})
			var found *hcl.Diagnostic
			for _, d := range diags {
				if d.Severity == hcl.DiagError && strings.HasPrefix(d.Summary, "Label") {
					found = d
				}
			}
			switch {
			case tc.summary == "" && found != nil:
				t.Fatalf("refused: %v", found)
			case tc.summary == "":
			case found == nil || found.Summary != tc.summary:
				t.Fatalf("no %q; diagnostics: %v", tc.summary, diags)
			case found.Subject == nil || found.Subject.Filename != "main.hcl" || found.Subject.Start.Line != 23:
				t.Fatalf("diagnostic at %v, want main.hcl:23", found.Subject)
			}
		})
	}
}
