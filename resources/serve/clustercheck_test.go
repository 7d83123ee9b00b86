package serve

import (
	"strings"
	"testing"

	"github.com/rayform/rayform/resources/cluster"
)

func TestCheckClusters(t *testing.T) {
	cfg := &Blocks{RayClusters: map[string]*cluster.RayCluster{
		"a":    {Name: "a", Workers: []string{"n2"}, DataplaneCheck: true},
		"off":  {Name: "off", Workers: []string{"n4"}, DataplaneCheck: false},
		"solo": {Name: "solo", DataplaneCheck: true},
	}}
	for _, tc := range []struct {
		args []string
		want string // names joined, or an error's start
	}{
		{nil, "a"},
		{[]string{"off"}, "off"},
		{[]string{"ray_cluster.a", "off"}, "a,off"},
		{[]string{"nope"}, `error: no ray_cluster "nope"`},
	} {
		got, err := CheckClusters(cfg, tc.args)
		s := strings.Join(got, ",")
		if err != nil {
			s = "error: " + err.Error()
		}
		if !strings.HasPrefix(s, tc.want) {
			t.Errorf("CheckClusters(%q) = %s, want %s", tc.args, s, tc.want)
		}
	}
	delete(cfg.RayClusters, "a")
	if _, err := CheckClusters(cfg, nil); err == nil || !strings.Contains(err.Error(), "dataplane_check = false: name one") {
		t.Errorf("only a switched-off cluster: %v", err)
	}
}
