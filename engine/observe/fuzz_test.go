package observe

import (
	"bytes"
	"testing"
)

// FuzzParse feeds Parse arbitrary bytes: it must never panic, and must be
// deterministic.
func FuzzParse(f *testing.F) {
	f.Add(headOutput(f))
	f.Add(h200Output(f))
	f.Add(peerOutput(f))
	f.Add([]byte(marker + " probe 1\n" + marker + " begin docker.containers\n" + marker + " part inspect\n" + marker + " part\n"))
	f.Add([]byte(marker + " probe 1\n" + marker + " begin\n" + marker + " stderr\n" + marker + " end x\n" + marker + " skip\n"))
	f.Add([]byte(marker + " probe 1\n" + marker + " begin vllm.models via=curl\n{\"data\":[{}]}\n200\n" + marker + " stderr\n\n" + marker + " end 0\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		a, errA := Parse(out)
		b, errB := Parse(out)
		if (errA == nil) != (errB == nil) || (errA == nil && (a == nil || !bytes.Equal(mustJSON(t, a), mustJSON(t, b)))) {
			t.Fatalf("Parse is not deterministic on %q", out)
		}
	})
}
