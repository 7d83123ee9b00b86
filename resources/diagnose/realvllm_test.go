package diagnose

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realVLLMDir holds logs of the real vLLM 0.32.0 (the lab image's, run by
// hand or by the script next to them), each with its "# source:" (how it
// was produced: command, version) and "# cause:" (what rayform must name;
// "healthy" for a start that did not fail), in readFixture's format.
const realVLLMDir = "../../testdata/realvllm"

// TestRealVLLMLogs names the cause of every real-vLLM log: with no context
// (`rayform diagnose FILE`) and with the seeds' topology, whose
// management addresses the logs use. What each must say beyond the cause
// is in mustSay.
func TestRealVLLMLogs(t *testing.T) {
	mustSay := map[string][]string{
		"tp-heads.log":           {"tensor_parallel_size 3", "4 attention heads"},
		"kv-cache-too-small.log": {"max seq len (4096)", "estimated maximum model length is 1920", "sets --kv-cache-memory-bytes 4194304"},
		"c10d-mgmt-address.log":  {"10.1.230.180:55053"},
	}
	files, err := filepath.Glob(filepath.Join(realVLLMDir, "*.log"))
	if err != nil || len(files) < 5 {
		t.Fatalf("want the real-vLLM logs in %s, found %v (%v)", realVLLMDir, files, err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want, source string
			for _, l := range strings.Split(string(raw), "\n") {
				if v, ok := strings.CutPrefix(l, "# source: "); ok {
					source = v
				}
				if v, ok := strings.CutPrefix(l, "# cause: "); ok {
					want = v
				}
			}
			if want == "" || !strings.Contains(source, "0.32.0") {
				t.Fatalf("no # cause: line, or a # source: line that does not name vLLM 0.32.0 (%q)", source)
			}
			logs := readLogFile(t, f)
			for _, ctx := range []struct {
				name string
				c    Context
			}{{"no context", Context{}}, {"the seeds' topology", sparkCtx()}} {
				d := Classify(Input{Logs: logs, Context: ctx.c})
				got := string(d.Cause)
				if want == "healthy" {
					if d.Failure {
						t.Errorf("%s: a healthy start, got %s:\n%s", ctx.name, got, d.Text())
					}
					continue
				}
				if got != want {
					t.Errorf("%s: cause %s, want %s:\n%s", ctx.name, got, want, d.Text())
				}
				for _, s := range mustSay[name] {
					if !strings.Contains(d.Text(), s) {
						t.Errorf("%s: the diagnosis does not say %q:\n%s", ctx.name, s, d.Text())
					}
				}
			}
		})
	}
}
