package views

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/engine/lock"
)

// TestParseErrorRendering: -help prints the usage and exits 0; a bad flag
// prints the flag package's error then the usage; arguments that do not
// fit print "Error: ..." alone; all on stderr.
func TestParseErrorRendering(t *testing.T) {
	usage := "Usage: rayform plan [options]\n\nOptions:\n  -json\n"
	tests := []struct {
		name       string
		err        *arguments.ParseError
		wantCode   int
		wantStderr string
	}{
		{"help", &arguments.ParseError{Help: true, Usage: usage}, 0, usage},
		{"bad flag", &arguments.ParseError{Flag: errors.New("flag provided but not defined: -x"), Usage: usage}, 1, "flag provided but not defined: -x\n" + usage},
		{"misfit", &arguments.ParseError{Err: errors.New("plan takes no arguments"), Usage: usage}, 1, "Error: plan takes no arguments\n"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		if code := NewView(&out, &errb).ParseError(tt.err); code != tt.wantCode || errb.String() != tt.wantStderr || out.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d, %q", tt.name, code, out.String(), errb.String(), tt.wantCode, tt.wantStderr)
		}
	}
}

// TestViewMessages: the messages every view shares, on stderr.
func TestViewMessages(t *testing.T) {
	var out, errb bytes.Buffer
	v := NewView(&out, &errb)
	v.Error(errors.New("boom"))
	v.Warning(errors.New("careful"))
	v.Notes([]string{"n1"})
	v.OrphansEnded("spark1", "p.main", 3, []lock.Ended{{PID: 42}})
	v.OrphansEnded("spark2", "p.main", 0, nil)
	want := "Error: boom\nWarning: careful\nNote: n1\n" +
		"Warning: ended on spark1 1 command(s) that an earlier rayform run (lock \"p.main\", fence generation 3) left running there:\n  " +
		lock.Ended{PID: 42}.String() + "\n" +
		"Warning: ended on spark2 0 command(s) that an earlier rayform run (lock \"p.main\") left running there:\n"
	if out.Len() != 0 || errb.String() != want {
		t.Errorf("stdout %q, stderr %q; want %q", out.String(), errb.String(), want)
	}
}

// TestMainUsage: the usage lists the commands in the order given, and an
// unknown command is named, with the suggestion, before it.
func TestMainUsage(t *testing.T) {
	cmds := []CommandSynopsis{{"apply", "Apply it"}, {"plan", "Plan it"}}
	var out, errb bytes.Buffer
	m := NewMain(NewView(&out, &errb))
	m.Usage(true, cmds)
	if !strings.HasPrefix(out.String(), "Usage: rayform [global options] <command> [args]\n\nCommands:\n  apply      Apply it\n  plan       Plan it\nGlobal options:\n") {
		t.Errorf("usage %q", out.String())
	}
	m.UnknownCommand("plna", "plan", cmds)
	if !strings.HasPrefix(errb.String(), "Error: unknown command \"plna\". Did you mean \"plan\"?\n\nUsage: rayform") {
		t.Errorf("unknown command: %q", errb.String())
	}
}
