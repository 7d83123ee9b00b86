package observe

import (
	"reflect"
	"testing"
)

// TestParseListen reads ss -Hltnp as iproute2 prints it: IPv4, IPv6 and
// wildcard listeners, with and without the owning process (another user's
// process is invisible without root), keeping only the asked ports.
func TestParseListen(t *testing.T) {
	out := `LISTEN 0      4096         0.0.0.0:6379      0.0.0.0:*    users:(("gcs_server",pid=4242,fd=7))
LISTEN 0      2048         0.0.0.0:8000      0.0.0.0:*    users:(("python3",pid=777,fd=21),("python3",pid=778,fd=21))
LISTEN 0      128             [::]:22           [::]:*    users:(("sshd",pid=1,fd=4))
LISTEN 0      511                *:8265            *:*
`
	got := parseListen(&section{name: secListen, attrs: []string{"ports=6379,8265,8000"}, stdout: []byte(out), complete: true})
	want := ListenFacts{List: []Listener{
		{Port: 6379, Addr: "0.0.0.0:6379", Process: "gcs_server", PID: 4242},
		{Port: 8000, Addr: "0.0.0.0:8000", Process: "python3", PID: 777},
		{Port: 8265, Addr: "*:8265"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if l := got.On(8000); len(l) != 1 || l[0].PID != 777 {
		t.Errorf("On(8000) = %+v", l)
	}
	missing := parseListen(&section{name: secListen, attrs: []string{"ports=6379"}, stderr: []byte("rayform: ss: not installed\n"), rc: 127, complete: true})
	if missing.Err != "ss -ltnp: ss: not installed" || len(missing.List) != 0 {
		t.Errorf("without ss: %+v", missing)
	}
}
