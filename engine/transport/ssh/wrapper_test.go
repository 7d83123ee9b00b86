package ssh

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestMarkerWriter(t *testing.T) {
	tests := []struct {
		name      string
		writes    []string
		wantOut   string
		wantPID   int
		wantPGID  int
		wantFound bool
	}{
		{"marker only", []string{"rayform-pid 10 10\n"}, "", 10, 10, true},
		{"marker then output", []string{"rayform-pid 10 7\nerr1\n", "err2"}, "err1\nerr2", 10, 7, true},
		{"split marker", []string{"rayform-p", "id 12 ", "12\nx"}, "x", 12, 12, true},
		{"noise before marker", []string{"bashrc says hi\nrayform-pid 5 5\nafter\n"}, "bashrc says hi\nafter\n", 5, 5, true},
		{"no marker", []string{"sh: 1: exec: /bin/sh: not found\n", "partial"}, "sh: 1: exec: /bin/sh: not found\npartial", 0, 0, false},
		{"bad marker", []string{"rayform-pid x 1\n"}, "rayform-pid x 1\n", 0, 0, false},
		{"pid 1 refused", []string{"rayform-pid 1 1\n"}, "rayform-pid 1 1\n", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			m := newMarkerWriter(&lockedTee{buf: &buf})
			for _, w := range tt.writes {
				if n, err := m.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			m.flush()
			pid, pgid, found := m.ids()
			if buf.String() != tt.wantOut || pid != tt.wantPID || pgid != tt.wantPGID || found != tt.wantFound {
				t.Errorf("out %q pid %d pgid %d found %v; want %q %d %d %v", buf.String(), pid, pgid, found, tt.wantOut, tt.wantPID, tt.wantPGID, tt.wantFound)
			}
			select {
			case <-m.found:
				if !tt.wantFound {
					t.Errorf("found channel closed without a marker")
				}
			default:
				if tt.wantFound {
					t.Errorf("found channel not closed")
				}
			}
		})
	}
}

func TestWireStringsCarryNoSecret(t *testing.T) {
	env := map[string]string{"TOKEN": "s3cret\nline2", "EMPTY": ""}
	exec := execString("echo hi", "rayform-env-end-x", time.Second)
	if strings.Contains(exec, "s3cret") {
		t.Errorf("exec string contains the secret: %q", exec)
	}
	hdr := string(envHeader([]string{"EMPTY", "TOKEN"}, env, "END"))
	if want := "export EMPTY=''\nexport TOKEN='s3cret\nline2'\nEND\n"; hdr != want {
		t.Errorf("header = %q, want %q", hdr, want)
	}
}

func TestKillScript(t *testing.T) {
	tests := []struct {
		pid, pgid int
		target    string
	}{
		{100, 100, "t=-100\n"}, // group leader: the whole group
		{100, 50, "t=100\n"},   // not a leader: only the process
	}
	for _, tt := range tests {
		s := killScript(tt.pid, tt.pgid, 3*time.Second)
		if !strings.HasPrefix(s, tt.target) || !strings.Contains(s, "-gt 30 ]") {
			t.Errorf("killScript(%d, %d) = %q", tt.pid, tt.pgid, s)
		}
	}
}
