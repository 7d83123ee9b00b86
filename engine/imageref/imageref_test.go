package imageref

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    string // Ref.String(), or "" when refused
		errLike string
	}{
		{"ubuntu", "docker.io/library/ubuntu:latest", ""},
		{"hellohal2064/vllm-qwen3.5-gb10", "docker.io/hellohal2064/vllm-qwen3.5-gb10:latest", ""},
		{"vllm/vllm-openai:v0.19.0", "docker.io/vllm/vllm-openai:v0.19.0", ""},
		{"nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io/nvidia/pytorch:25.01-py3", ""},
		{"localhost:5000/a/b", "localhost:5000/a/b:latest", ""},
		{"localhost/a", "localhost/a:latest", ""},
		{"10.1.230.1:5000/x_y__z--w:TAG_1.2", "10.1.230.1:5000/x_y__z--w:TAG_1.2", ""},
		{"[::1]:5000/a", "[::1]:5000/a:latest", ""},
		{"a@sha256:" + strings.Repeat("ab", 32), "docker.io/library/a@sha256:" + strings.Repeat("ab", 32), ""},
		{"a:1@sha256:" + strings.Repeat("ab", 32), "docker.io/library/a:1@sha256:" + strings.Repeat("ab", 32), ""},
		{"", "", "empty"},
		{"Hello World:x", "", "contains"},
		{"a\x00b", "", "contains"},
		{"Hellohal/vllm", "Hellohal/vllm:latest", ""}, // docker reads an upper-case first component as a registry host
		{"hellohal/VLLM", "", "lowercase"},
		{"a:", "", "tag"},
		{"a:-x", "", "tag"},
		{"a:" + strings.Repeat("x", 129), "", "tag"},
		{"a@sha256:12", "", "digest"},
		{"a//b", "", "components"},
		{"-a", "", "components"},
		{"a/", "", "components"},
		{"a..b", "", "components"},
		{strings.Repeat("a", 256), "", "255"},
		{"ex ample.com/a", "", "contains"},
		{"example.com:x/a", "", "registry host"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := Parse(tt.in)
			if tt.want == "" {
				if err == nil || !strings.Contains(err.Error(), tt.errLike) {
					t.Fatalf("Parse(%q) = %v, %v; want an error mentioning %q", tt.in, r, err, tt.errLike)
				}
				return
			}
			if err != nil || r.String() != tt.want {
				t.Fatalf("Parse(%q) = %v, %v; want %s", tt.in, r, err, tt.want)
			}
		})
	}
}
