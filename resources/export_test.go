package resources

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
)

// VerifyRayTable runs apply's verification of Ray's node table (the
// verify step's check) for the cluster of specs against a head whose
// `ray list nodes` prints rows, and returns its error: nil when the table
// is as declared. The fake head answers every other command (docker logs
// for the diagnosis, docker inspect) with success and no output.
func VerifyRayTable(t *testing.T, specs []ContainerSpec, rows []observe.RayNode) error {
	t.Helper()
	js, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	head := specs[0]
	fake := transporttest.NewFake(t, head.Node)
	fake.Expect(transporttest.Any()).Do(func(ctx context.Context, cmd transport.Cmd, stdin []byte) (transport.Result, error) {
		if slices.Contains(cmd.Argv, "list") && slices.Contains(cmd.Argv, "nodes") {
			return transport.Result{Stdout: js}, nil
		}
		if slices.Contains(cmd.Argv, "inspect") {
			return transport.Result{Stdout: []byte("true 0\n")}, nil
		}
		return transport.Result{}, nil
	})
	clock := newStepsClock()
	env := &StepEnv{Conns: map[string]transport.Conn{head.Node: fake}, Project: "verify", Poll: time.Second, Parallelism: 1,
		RayReadyTimeout: 3 * time.Second, Now: clock.Now, Sleep: clock.Sleep}
	w := &Work{Address: specs[0].Resource, Type: "ray_cluster", Action: plan.Update, Cluster: &ClusterWork{Specs: specs, Start: map[string]bool{}}}
	r := &clusterRun{e: env, w: w, c: w.Cluster, spec: map[string]ContainerSpec{}, head: head}
	for _, s := range specs {
		r.spec[s.Node] = s
	}
	return r.verifyTable(context.Background())
}
