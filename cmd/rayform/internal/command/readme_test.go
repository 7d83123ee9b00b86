package command

import (
	"os"
	"regexp"
	"testing"
)

// TestReadmeListsEveryCommandOnce checks README's CLI rows (a row whose
// first cell is one code span, "| `plan` |"; the HCL reference's rows
// have two): one per command, none twice, inside the table or strayed
// out of it (issue 22, item 8: force-unlock was listed twice).
func TestReadmeListsEveryCommandOnce(t *testing.T) {
	src, err := os.ReadFile("../../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z-]+)(?: [^`]*)?` \\|").FindAllStringSubmatch(string(src), -1) {
		rows[m[1]]++
	}
	for _, cmd := range commands() {
		if n := rows[cmd.Name]; n != 1 {
			t.Errorf("README's CLI table has %d rows for %s, want 1", n, cmd.Name)
		}
	}
}
