package kindstest

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/transporttest"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/internal/steplab"
	"github.com/rayform/rayform/resources/serve"
	"github.com/rayform/rayform/resources/stepenv"
)

// VerifyRayTable runs apply's verification of Ray's node table (the
// verify step's check) for the cluster of specs against a head whose
// `ray list nodes` prints rows, and returns its error: nil when the table
// is as declared. The fake head answers every other command (docker logs
// for the diagnosis, docker inspect) with success and no output.
func VerifyRayTable(t *testing.T, specs []cluster.ContainerSpec, rows []cluster.RayNode) error {
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
	clock := steplab.NewClock()
	env := &stepenv.StepEnv{Conns: map[string]transport.Conn{head.Node: fake}, Project: "verify", Poll: time.Second, Parallelism: 1,
		RayReadyTimeout: 3 * time.Second, Now: clock.Now, Sleep: clock.Sleep}
	w := &Work{Address: specs[0].Resource, Type: "ray_cluster", Action: plan.Update, Do: &cluster.ClusterWork{Specs: specs, Start: map[string]bool{}}}
	// Nothing to start or remove: the steps are the verification alone.
	return verifyStep(t, Steps(env, w), "verify Ray's node table")
}

// VerifyServe runs apply's verification of a started serve (its /health
// and /v1/models check) for spec against a head whose vLLM answers as v,
// what observe read there, and returns its error: nil when vLLM serves as
// declared. A health check observe could not complete answers as refused.
func VerifyServe(t *testing.T, spec serve.ServeSpec, v serve.VLLM) error {
	t.Helper()
	health := "000"
	if v.Health.Status != 0 {
		health = strconv.Itoa(v.Health.Status)
	}
	models, err := json.Marshal(struct {
		Data []serve.Model `json:"data"`
	}{v.Models})
	if err != nil {
		t.Fatal(err)
	}
	modelsCode := "200"
	if v.ModelsCheck.Status != 0 {
		modelsCode = strconv.Itoa(v.ModelsCheck.Status)
	}
	fake := transporttest.NewFake(t, spec.Node)
	fake.Expect(transporttest.Any()).Do(func(ctx context.Context, cmd transport.Cmd, stdin []byte) (transport.Result, error) {
		if len(cmd.Argv) > 0 && cmd.Argv[0] == "curl" {
			switch url := cmd.Argv[len(cmd.Argv)-1]; {
			case strings.HasSuffix(url, "/health"):
				return transport.Result{Stdout: []byte(health)}, nil
			case strings.HasSuffix(url, "/v1/models"):
				return transport.Result{Stdout: []byte(string(models) + "\n" + modelsCode)}, nil
			}
		}
		return transport.Result{}, nil
	})
	clock := steplab.NewClock()
	env := &stepenv.StepEnv{Conns: map[string]transport.Conn{spec.Node: fake}, Project: "verify", Poll: time.Second, Parallelism: 1,
		HTTPReadyTimeout: 3 * time.Second, Now: clock.Now, Sleep: clock.Sleep}
	w := &Work{Address: spec.Resource, Type: "vllm_serve", Action: plan.Replace, Do: &serve.ServeWork{Spec: spec, Start: true}}
	return verifyStep(t, Steps(env, w), "start vllm serve")
}

// verifyStep runs the Verify of the first step of steps whose name starts
// with name.
func verifyStep(t *testing.T, steps []apply.Step, name string) error {
	t.Helper()
	for _, s := range steps {
		if strings.HasPrefix(s.Name(), name) {
			return s.Verify(context.Background())
		}
	}
	t.Fatalf("no step %q", name)
	return nil
}
