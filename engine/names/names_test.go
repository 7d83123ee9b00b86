package names

import "testing"

func TestSegment(t *testing.T) {
	tests := []struct{ name, want string }{
		// names that already are segments stay as they are: the lock
		// files, project names and serve directories of existing
		// deployments keep their paths.
		{"spark1", "spark1"},
		{"rayform-spark", "rayform-spark"},
		{"dgx-spark-pair-spark", "dgx-spark-pair-spark"},
		{"a.b_c-D9", "a.b_c-D9"},
		{"-x-", "-x-"},
		{"proj.", "proj."},
		{"...", "..."},
		// others are made safe and told apart by a digest
		{`gpu["h1"]`, `gpu__h1__-4daf8f6b`},
		{`gpu["h 1"]`, `gpu__h_1__-53c619fb`},
		{"a b", "a_b-c8687a08"},
		{"a/b", "a_b-c14cddc0"},
		{"", "-e3b0c442"},
		{".", ".-cdb4ee2a"},
		{"..", "..-5ec1f7e7"},
	}
	for _, tt := range tests {
		got := Segment(tt.name)
		if got != tt.want {
			t.Errorf("Segment(%q) = %q, want %q", tt.name, got, tt.want)
		}
		for i := 0; i < len(got); i++ {
			if !Safe(got[i]) {
				t.Errorf("Segment(%q) = %q holds %q", tt.name, got, got[i])
			}
		}
	}
	if Segment("a b") == Segment("a/b") || Segment("a_b") == Segment("a b") {
		t.Error("different names share a segment")
	}
}
