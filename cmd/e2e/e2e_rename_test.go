//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2ERenameCluster is issue 33 item 4: renaming a ray_cluster (and
// pointing its serve at the new name). Before, plan failed with "port
// 8265/8000 already in use", held by the cluster the same plan destroys.
// Now plan shows the old cluster destroyed and the new one created, apply
// removes the old containers before the new head takes their ports, and
// the next plan is empty.
func TestE2ERenameCluster(t *testing.T) {
	t.Parallel()
	// Fast mode: the subject is the plan's port check and apply's order,
	// not Ray.
	_, dir, run := appliedFastLab(t, "rfe2eren")

	main := filepath.Join(dir, "main.hcl")
	src := mustRead(t, main)
	renamed := strings.Replace(strings.ReplaceAll(src, "ray_cluster.spark\n", "ray_cluster.spark2\n"), `ray_cluster "spark" {`, `ray_cluster "spark2" {`, 1)
	if renamed == src || strings.Contains(renamed, "ray_cluster.spark\n") {
		t.Fatalf("the rename did not apply:\n%s", renamed)
	}
	if err := os.WriteFile(main, []byte(renamed), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run("plan", "-detailed-exitcode")
	mustCode(t, "plan after the rename", r, exitChanges)
	mustContain(t, "plan after the rename", r.stdout, "# ray_cluster.spark will be destroyed", "# ray_cluster.spark2 will be created")
	if strings.Contains(r.stdout+r.stderr, "already in use") {
		t.Errorf("plan finds the old cluster's ports in use:\n%s", r)
	}
	mustCode(t, "apply after the rename", run("apply", "-auto-approve"), exitOK)
	mustCode(t, "plan after the renaming apply", run("plan", "-detailed-exitcode"), exitOK)
}
