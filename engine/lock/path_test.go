package lock

import "testing"

// TestPath: the lock file of a valid name (project "-" cluster) is the
// path every rayform so far used; names that need changing still get
// a lock file each.
func TestPath(t *testing.T) {
	for name, want := range map[string]string{
		"dgx-spark-pair-spark": Dir + "/dgx-spark-pair-spark.lock",
		"lab-main":             Dir + "/lab-main.lock",
		"gx-big.cluster_2":     Dir + "/gx-big.cluster_2.lock",
	} {
		if got := Path(name); got != want {
			t.Errorf("Path(%q) = %q, want %q", name, got, want)
		}
	}
	seen := map[string]string{}
	for _, name := range []string{`p-c["a"]`, `p-c_"a"_`, `p-c__a__`, "p-c a", "p-c/a", "p-c_a"} {
		p := Path(name)
		if other, ok := seen[p]; ok {
			t.Errorf("%q and %q share the lock file %s", other, name, p)
		}
		seen[p] = name
	}
}
