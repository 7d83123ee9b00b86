package cluster_test

import (
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/diagnose"
	"github.com/rayform/rayform/resources/internal/steplab"
	"github.com/rayform/rayform/resources/stepenv"
)

// The -update flag rewrites the steps' golden files (steplab.Golden).
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

// walkWork walks the steps of w (the cluster kind's) in the fake lab.
func walkWork(t *testing.T, env *stepenv.StepEnv, w *kind.Work) ([]string, error) {
	t.Helper()
	return steplab.Walk(t, w, cluster.StepsWith(env.WithDefaults(), w))
}

func TestClusterSteps(t *testing.T) {
	old := steplab.PairSpecs("10.1.230.180") // the head as the seeds first ran it
	tests := []struct {
		name  string
		setup func(l *steplab.Lab)
		work  *kind.Work
	}{
		{
			name:  "cluster-create",
			setup: func(l *steplab.Lab) { delete(l.Hosts["spark2"].Images, steplab.Image) },
			work:  steplab.PairWork(plan.Create, steplab.PairSpecs("192.168.200.12"), []string{"spark1", "spark2"}),
		},
		{
			name:  "cluster-replace",
			setup: func(l *steplab.Lab) { l.Run(old...) },
			work:  steplab.PairWork(plan.Replace, steplab.PairSpecs("192.168.200.12"), []string{"spark1", "spark2"}, "spark1", "spark2"),
		},
		{
			name: "cluster-update-worker",
			setup: func(l *steplab.Lab) {
				l.Run(steplab.PairSpecs("192.168.200.12")[0])
				stale := steplab.PairSpecs("192.168.200.12")[1]
				stale.Volumes = []string{"/old:/old"}
				l.Run(stale)
			},
			work: steplab.PairWork(plan.Update, steplab.PairSpecs("192.168.200.12"), []string{"spark2"}, "spark2"),
		},
		{
			name: "cluster-delete",
			setup: func(l *steplab.Lab) {
				l.Run(steplab.PairSpecs("192.168.200.12")...)
			},
			work: &kind.Work{Address: steplab.Cluster, Type: "ray_cluster", Action: plan.Delete, Hosts: []string{"spark1", "spark2"},
				Do: &cluster.ClusterWork{Name: "main", Start: map[string]bool{},
					Remove: []cluster.Removal{{Node: "spark1", Container: "rayform-main"}, {Node: "spark2", Container: "rayform-main"}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := steplab.New(t, "spark1", "spark2")
			tt.setup(l)
			lines, err := walkWork(t, l.Env(), tt.work)
			if err != nil {
				t.Fatalf("walk: %v\n%s", err, strings.Join(lines, "\n"))
			}
			steplab.Golden(t, tt.name, steplab.Render(lines, nil, l))
			// The hosts end as declared: the spec's containers run, nothing else.
			for _, n := range []string{"spark1", "spark2"} {
				c := l.Hosts[n].Containers["rayform-main"]
				if tt.work.Action == plan.Delete {
					if c != nil {
						t.Errorf("%s: container left after delete", n)
					}
					continue
				}
				if c == nil || !c.Running || c.Labels[cluster.LabelSpecHash] != steplab.SpecFor(tt.work, n).Hash() {
					t.Errorf("%s: container %+v, want the declared spec running", n, c)
				}
			}
			// Every mutating command is marked so; reads are not.
			for _, c := range l.Calls() {
				if c.Upload {
					continue
				}
				line := c.Cmd.String()
				mut := strings.Contains(line, "docker run") || strings.Contains(line, "docker stop") ||
					strings.Contains(line, "docker rm") || strings.Contains(line, "docker pull") ||
					strings.HasPrefix(line, "rm -rf -- /var/tmp/rayform/")
				if mut != c.Cmd.Mutating {
					t.Errorf("%q: Mutating = %v", line, c.Cmd.Mutating)
				}
			}
		})
	}
}

// TestClusterSecondApply: a container already running the spec is left
// alone: the start steps are skipped and nothing is changed.
func TestClusterSecondApply(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	specs := steplab.PairSpecs("192.168.200.12")
	l.Run(specs...)
	lines, err := walkWork(t, l.Env(), steplab.PairWork(plan.Update, specs, []string{"spark1", "spark2"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range l.Hosts {
		for _, m := range h.Fake.Mutations() {
			if !strings.Contains(m.Line(), "command -v ray") {
				t.Errorf("%s: mutating call %s on a cluster already as declared", h.Name, m.Line())
			}
		}
	}
	if got := strings.Join(lines, "\n"); !strings.Contains(got, "skipped: start ray head on spark1") ||
		!strings.Contains(got, "skipped: start ray workers on spark2") {
		t.Errorf("start steps not skipped:\n%s", got)
	}
}

func TestRemoveRefusesForeignContainer(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
	}{
		{"unlabelled", map[string]string{"maintainer": "someone"}},
		{"other project", map[string]string{cluster.LabelManaged: "true", cluster.LabelProject: "other", cluster.LabelResource: steplab.Cluster}},
		{"other resource", map[string]string{cluster.LabelManaged: "true", cluster.LabelProject: steplab.Project, cluster.LabelResource: "ray_cluster.other"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := steplab.New(t, "spark1", "spark2")
			l.Run(steplab.PairSpecs("192.168.200.12")[0])
			l.Hosts["spark2"].Containers["rayform-main"] = &steplab.Container{Labels: tt.labels, Running: true}
			w := &kind.Work{Address: steplab.Cluster, Type: "ray_cluster", Action: plan.Delete,
				Do: &cluster.ClusterWork{Name: "main", Start: map[string]bool{},
					Remove: []cluster.Removal{{Node: "spark1", Container: "rayform-main"}, {Node: "spark2", Container: "rayform-main"}}}}
			_, err := walkWork(t, l.Env(), w)
			if err == nil || !strings.Contains(err.Error(), "refusing to remove container rayform-main on spark2") ||
				!strings.Contains(err.Error(), "never touches a container it did not create") {
				t.Fatalf("err = %v, want a refusal naming spark2", err)
			}
			// Refused before anything was removed, on any host.
			for _, h := range l.Hosts {
				if m := h.Fake.Mutations(); len(m) > 0 {
					t.Errorf("%s: mutating calls %v despite the refusal", h.Name, m[0].Line())
				}
			}
			if l.Hosts["spark2"].Containers["rayform-main"] == nil || l.Hosts["spark1"].Containers["rayform-main"] == nil {
				t.Error("a container was removed")
			}
		})
	}
}

func TestImageWithoutRay(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	l.Hosts["spark1"].NoRay = true
	l.Hosts["spark2"].NoRay = true
	_, err := walkWork(t, l.Env(), steplab.PairWork(plan.Create, steplab.PairSpecs("192.168.200.12"), []string{"spark1", "spark2"}))
	if err == nil {
		t.Fatal("no error for an image without ray")
	}
	for _, want := range []string{"Ray missing from the image " + steplab.Image, "pip install 'ray[default]'", "set image on " + steplab.Cluster} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, c := range l.Calls() {
		if strings.Contains(c.Line(), "docker run -d") {
			t.Errorf("a container was started: %s", c.Line())
		}
	}
}

func TestHeadRegisteredElsewhere(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	l.Hosts["spark1"].RayIP = "10.1.230.180"
	_, err := walkWork(t, l.Env(), steplab.PairWork(plan.Create, steplab.PairSpecs("192.168.200.12"), []string{"spark1", "spark2"}))
	if err == nil {
		t.Fatal("no error for a head registered under its management address")
	}
	for _, want := range []string{"registered in Ray's node table as 10.1.230.180", "not its fabric address 192.168.200.12", "Cause: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	var de *stepenv.DiagnosedError
	if !errors.As(err, &de) {
		t.Errorf("error %T carries no diagnosis", err)
	}
	for _, c := range l.Hosts["spark2"].Fake.Calls() {
		if strings.Contains(c.Line(), "docker run -d") {
			t.Errorf("the worker was started against a misregistered head: %s", c.Line())
		}
	}
}

func TestWorkerCannotReachGCS(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	l.Hosts["spark2"].GCSClosed = true
	_, err := walkWork(t, l.Env(), steplab.PairWork(plan.Create, steplab.PairSpecs("192.168.200.12"), []string{"spark1", "spark2"}))
	if err == nil || !strings.Contains(err.Error(), "spark2 cannot open a TCP connection to the ray head's GCS at 192.168.200.12:6379") {
		t.Fatalf("err = %v", err)
	}
}

func TestVerifyTableTimesOut(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	l.Hosts["spark2"].GPUs = 0 // Ray sees no GPU on the worker
	env := l.Env()
	start := l.Clock.Now()
	_, err := walkWork(t, env, steplab.PairWork(plan.Create, steplab.PairSpecs("192.168.200.12"), []string{"spark1", "spark2"}))
	if err == nil || !strings.Contains(err.Error(), "spark2 (192.168.200.13) has 0 GPUs in Ray, want 1") ||
		!strings.Contains(err.Error(), "Cause: ") {
		t.Fatalf("err = %v", err)
	}
	if waited := l.Clock.Now().Sub(start); waited < env.RayReadyTimeout {
		t.Errorf("gave up after %s, before the ready timeout %s", waited, env.RayReadyTimeout)
	}
}

// A head whose GCS cannot bind its port: the diagnosis names the port and
// asks the head's ss who holds it.
func TestHeadPortHeldIsDiagnosed(t *testing.T) {
	l := steplab.New(t, "spark1", "spark2")
	h := l.Hosts["spark1"]
	h.HeadExits = "RuntimeError: Failed to start GCS. Last 1 lines of error files:\nFailed to bind to address 0.0.0.0:6379: address already in use\n"
	h.SS = `LISTEN 0      4096         0.0.0.0:6379      0.0.0.0:*    users:(("gcs_server",pid=4242,fd=7))` + "\n"
	_, err := walkWork(t, l.Env(), steplab.PairWork(plan.Create, steplab.PairSpecs("192.168.200.12"), []string{"spark1", "spark2"}))
	var de *stepenv.DiagnosedError
	if !errors.As(err, &de) || de.Diagnosis.Cause != diagnose.AddrInUse {
		t.Fatalf("err = %v, want an %s diagnosis", err, diagnose.AddrInUse)
	}
	for _, want := range []string{"port 6379 is already in use on spark1", "held by pid 4242 (gcs_server)", "change port on ray_cluster.main"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%s", want, err)
		}
	}
}
