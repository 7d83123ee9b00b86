package click

import (
	"math"
	"reflect"
	"testing"
)

// Expected values computed with CPython 3 difflib (get_close_matches and
// SequenceMatcher.ratio) on the same inputs.
func TestCloseMatchesAgreesWithDifflib(t *testing.T) {
	opts := []string{"--node-ip-address", "--address", "--port", "--node-name", "--redis-username", "--redis-password", "--redis-shard-ports", "--object-manager-port", "--node-manager-port", "--gcs-server-port", "--min-worker-port", "--max-worker-port", "--worker-port-list", "--ray-client-server-port", "--memory", "--object-store-memory", "--redis-max-memory", "--num-cpus", "--num-gpus", "--resources", "--head", "--include-dashboard", "--dashboard-host", "--dashboard-port", "--help"}
	tests := []struct {
		word string
		want []string
	}{
		{"--hed", []string{"--head", "--help"}},
		{"--num-gpu", []string{"--num-gpus", "--num-cpus"}},
		{"--foo", nil},
		{"--node-ip", []string{"--node-name", "--node-ip-address"}},
		{"--dashbord-port", []string{"--dashboard-port", "--dashboard-host", "--redis-shard-ports"}},
		{"--adress", []string{"--address", "--node-ip-address", "--resources"}},
		{"--blok", nil},
	}
	for _, tt := range tests {
		t.Run(tt.word, func(t *testing.T) {
			got := closeMatches(tt.word, opts)
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("closeMatches(%q) = %q, want %q", tt.word, got, tt.want)
			}
		})
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		a, b string
		want float64
	}{
		{"--head", "--hed", 0.9090909090909091},
		{"abcd", "bcda", 0.75},
		{"--num-cpus", "--num-gpu", 0.8421052631578947},
	}
	for _, tt := range tests {
		if got := ratio(tt.a, tt.b); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("ratio(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func testCommand() *Command {
	return &Command{
		Path: "ray start",
		Options: []Option{
			{Names: []string{"--head"}, Flag: true},
			{Names: []string{"--help-me"}, Flag: true, Hidden: true},
			{Names: []string{"--port"}, Type: Int},
			{Names: []string{"--include-dashboard"}, Type: Bool},
			{Names: []string{"--address"}},
			{Names: []string{"-v", "--verbose"}, Count: true},
			{Names: []string{"--log-style"}, Type: Choice, Choices: []string{"auto", "record", "pretty"}},
		},
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown with one suggestion", []string{"--adress"}, "No such option: --adress Did you mean --address?"},
		{"unknown with suggestions", []string{"--hea"}, "No such option: --hea (Possible options: --head, --help)"},
		{"unknown without suggestion", []string{"--foo"}, "No such option: --foo"},
		{"unknown short", []string{"-x"}, "No such option: -x"},
		{"missing value", []string{"--address"}, "Option '--address' requires an argument."},
		{"flag with value", []string{"--head=1"}, "Option '--head' does not take a value."},
		{"bad int", []string{"--port", "abc"}, "Invalid value for '--port': 'abc' is not a valid integer."},
		{"bad bool", []string{"--include-dashboard=maybe"}, "Invalid value for '--include-dashboard': 'maybe' is not a valid boolean. Recognized values: , 0, 1, f, false, n, no, off, on, t, true, y, yes"},
		{"bad choice", []string{"--log-style", "fancy"}, "Invalid value for '--log-style': 'fancy' is not one of 'auto', 'record', 'pretty'."},
		{"extra argument", []string{"foo"}, "Got unexpected extra argument (foo)"},
		{"extra arguments", []string{"foo", "bar"}, "Got unexpected extra arguments (foo bar)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := testCommand().Parse(tt.args)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want error %q", tt.args, tt.want)
			}
			if err.Msg != tt.want {
				t.Errorf("Parse(%q) error %q, want %q", tt.args, err.Msg, tt.want)
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	v, err := testCommand().Parse([]string{"--head", "--port=6380", "-vv", "--include-dashboard", "True", "--address", "-weird"})
	if err != nil {
		t.Fatal(err.Format())
	}
	if !v.Flag("head") || v.IntValue("port") != 6380 || v.Count("verbose") != 2 || v.Str("address") != "-weird" {
		t.Errorf("unexpected values: head=%v port=%d verbose=%d address=%q", v.Flag("head"), v.IntValue("port"), v.Count("verbose"), v.Str("address"))
	}
	if b, ok := v.BoolValue("include_dashboard"); !b || !ok {
		t.Errorf("include_dashboard = %v, %v; want true, true", b, ok)
	}
}

func TestUsageErrorFormat(t *testing.T) {
	_, err := testCommand().Parse([]string{"--foo"})
	want := "Usage: ray start [OPTIONS]\nTry 'ray start --help' for help.\n\nError: No such option: --foo\n"
	if got := err.Format(); got != want {
		t.Errorf("Format() = %q, want %q", got, want)
	}
}

func TestGroupSplit(t *testing.T) {
	g := &Group{Path: "ray", Commands: []string{"start", "stop", "status"}, Options: []Option{{Names: []string{"--logging-level"}}}}
	tests := []struct {
		name    string
		args    []string
		cmd     string
		rest    []string
		wantErr string
	}{
		{"command", []string{"start", "--head"}, "start", []string{"--head"}, ""},
		{"group option", []string{"--logging-level", "debug", "stop"}, "stop", []string{}, ""},
		{"unknown command", []string{"strat"}, "", nil, "No such command 'strat'."},
		{"no command", nil, "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, rest, _, err := g.Split(tt.args)
			if tt.wantErr != "" {
				if err == nil || err.Msg != tt.wantErr {
					t.Fatalf("Split error = %v, want %q", err, tt.wantErr)
				}
				if got := err.Format(); got != "Usage: ray [OPTIONS] COMMAND [ARGS]...\nTry 'ray --help' for help.\n\nError: "+tt.wantErr+"\n" {
					t.Errorf("Format() = %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err.Format())
			}
			if cmd != tt.cmd || (len(rest) != 0 || len(tt.rest) != 0) && !reflect.DeepEqual(rest, tt.rest) {
				t.Errorf("Split = %q %q, want %q %q", cmd, rest, tt.cmd, tt.rest)
			}
		})
	}
}
