package hostplan

import (
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport"
)

// TestCommandFits checks the execve arithmetic of CommandFits against the
// host's reported limits: strings each under MAX_ARG_STRLEN that together
// exceed ARG_MAX (issue 33 item 5) are refused, in argv or in the secret
// environment the transport exports; a larger stack takes them.
func TestCommandFits(t *testing.T) {
	big := strings.Repeat("a", 120_000)
	secrets := func(n int) map[string]string {
		env := map[string]string{}
		for i := range n {
			env["BIG_"+string(rune('A'+i))] = big
		}
		return env
	}
	host := observe.Exec{PageSize: 4096, StackKiB: 8192, EnvBytes: 600, EnvCount: 10}
	tests := []struct {
		name string
		cmd  transport.Cmd
		lim  observe.Exec
		want string // "" fits
	}{
		{"small", transport.Cmd{Argv: []string{"docker", "ps"}}, host, ""},
		{"16 secrets of 120 KB fit 2 MiB", transport.Cmd{Argv: []string{"docker", "exec", "x"}, Env: secrets(16)}, host, ""},
		{"20 secrets of 120 KB exceed 2 MiB", transport.Cmd{Argv: []string{"docker", "exec", "x"}, Env: secrets(20)}, host, "where the host's kernel takes 2097152 (ARG_MAX"},
		{"20 secrets fit a 16 MiB stack", transport.Cmd{Argv: []string{"docker", "exec", "x"}, Env: secrets(20)}, observe.Exec{PageSize: 4096, StackKiB: 16384}, ""},
		{"defaults for a host that did not say", transport.Cmd{Argv: []string{"docker", "exec", "x"}, Env: secrets(20)}, observe.Exec{}, "ARG_MAX"},
		{"one secret over MAX_ARG_STRLEN", transport.Cmd{Argv: []string{"true"}, Env: map[string]string{"X": strings.Repeat("a", 140_000)}}, host, "MAX_ARG_STRLEN"},
		{"64 KiB pages take it", transport.Cmd{Argv: []string{"true"}, Env: map[string]string{"X": strings.Repeat("a", 140_000)}}, observe.Exec{PageSize: 65536, StackKiB: 8192}, ""},
		{"command line over the transport's string", transport.Cmd{Argv: []string{"echo", big, big}}, host, "as the SSH transport sends it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CommandFits(tt.cmd, tt.lim)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
