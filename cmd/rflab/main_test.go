//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no subcommand", nil, exitError, "Usage: rflab <subcommand>"},
		{"help", []string{"-help"}, exitOK, "Subcommands:"},
		{"unknown subcommand", []string{"bogus"}, exitError, `unknown subcommand "bogus"`},
		{"subcommand help", []string{"up", "-help"}, exitOK, "Usage: rflab up [options]"},
		{"exec without command", []string{"exec", "spark1"}, exitError, "usage: rflab exec NODE -- CMD"},
		{"run without command", []string{"run", "-name", "x"}, exitError, "usage: rflab run [-name NAME] COMMAND"},
		{"run on a lab that is not up", []string{"run", "-dir", "/nonexistent/lab", "plan"}, exitError, "is not up (no /nonexistent/lab/lab.json); run `rflab up -name rflab`"},
		{"status of a lab that is not up", []string{"status", "-dir", "/nonexistent/lab"}, exitError, "is not up"},
		{"reboot without node", []string{"reboot"}, exitError, "usage: rflab reboot NODE"},
		{"supervise without dir", []string{"supervise"}, exitError, "usage: rflab supervise DIR"},
		{"up with a bad flag", []string{"up", "-nodes", "x"}, exitError, "invalid value"},
		{"up with extra arguments", []string{"up", "now"}, exitError, "unexpected arguments"},
		{"up with a bad timing", []string{"up", "-timing", "weight_load"}, exitError, "want KEY=DURATION"},
		{"up with a bad ray", []string{"up", "-ray", "fake"}, exitError, `-ray "fake": want real or simnode`},
		{"up with a bad vllm", []string{"up", "-vllm", "fake"}, exitError, `-vllm "fake": want real or simnode`},
		{"up with the real vLLM on simnode's Ray", []string{"up", "-vllm", "real", "-ray", "simnode"}, exitError, "-vllm real runs on the real Ray: drop -ray simnode"},
		{"up with a bad model disk", []string{"up", "-model-disk", "3X"}, exitError, `-model-disk: size "3X": want a count of bytes, or a number with K, M, G or T (like 300M)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), &cli{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}, tt.args)
			if code != tt.wantCode || !strings.Contains(stderr.String()+stdout.String(), tt.wantErr) {
				t.Errorf("rflab %v = %d, stderr %q; want %d and %q", tt.args, code, stderr.String(), tt.wantCode, tt.wantErr)
			}
		})
	}
}

// TestFindBinary: a program beside the executable wins over $PATH; one
// found nowhere names the flag that gives it.
func TestFindBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir()
	t.Setenv("PATH", path)
	if err := os.WriteFile(filepath.Join(path, "rf-elsewhere"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, want, wantErr string
	}{
		{filepath.Base(exe), exe, ""},
		{"rf-elsewhere", filepath.Join(path, "rf-elsewhere"), ""},
		{"rf-nowhere", "", "rf-nowhere not found next to rflab or on $PATH: run `make build` (it builds bin/rf-nowhere) or pass -x PATH"},
	}
	for _, tt := range tests {
		got, err := findBinary(tt.name, "x")
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
			t.Errorf("findBinary(%q) = %q, %v; want %q, %q", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}
