package raycli

import (
	"context"
	"strings"
	"testing"

	"github.com/rayform/rayform/resources/clitables"
)

// The stand-in answers every probe command line as the image's real Ray
// (with the click it was generated with) did when scripts/gen-flag-tables
// ran it through Ray's own entry point: a refusal with the same stderr and
// exit 2; an accepted `ray start` command line parses.
func TestStandInMatchesRealRay(t *testing.T) {
	table := clitables.MustRay(clitables.RayImage)
	checked := 0
	for _, pr := range table.Probes {
		code, _ := pr.ExitCode()
		name := strings.Join(pr.Args, " ")
		switch code {
		case 0:
			if _, err := startCommand().Parse(pr.Args[1:]); err != nil {
				t.Errorf("ray %s (%s): the stand-in refuses it:\n%s\nreal Ray %s accepts it", name, pr.Note, err.Format(), table.Version)
			}
		case 2:
			p, _, errb := proc(t, pr.Args...)
			if got := Main(context.Background(), p); got != 2 || errb.String() != pr.Stderr {
				t.Errorf("ray %s (%s): exit %d, stderr\n%s\nreal Ray %s: exit 2, stderr\n%s", name, pr.Note, got, errb.String(), table.Version, pr.Stderr)
			}
		default:
			t.Errorf("ray %s: unexpected recorded exit %d", name, code)
		}
		checked++
	}
	if checked < 60 {
		t.Errorf("only %d probes; the table has %d", checked, len(table.Probes))
	}
	// The stand-in knows exactly the table's options.
	cmd := startCommand()
	var names []string
	for _, o := range cmd.Options {
		names = append(names, o.Names...)
		if o.Off != "" {
			names = append(names, o.Off)
		}
	}
	if strings.Join(names, " ") != strings.Join(table.OptionStrings(), " ") {
		t.Errorf("ray start options:\n%s\ntable:\n%s", strings.Join(names, " "), strings.Join(table.OptionStrings(), " "))
	}
}
