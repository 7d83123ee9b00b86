package run

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
)

// StatusReport is status's document (-json prints it as is: project,
// healthy, problems, nodes, then each kind's list under the key its
// traits name, kind.Traits.Status).
type StatusReport struct {
	Project  string       `json:"project"`
	Healthy  bool         `json:"healthy"`
	Problems []string     `json:"problems"`
	Nodes    []StatusNode `json:"nodes"`
	// Kinds are each listed kind's resources, in registration order.
	Kinds []StatusKind `json:"-"`
}

// StatusKind is one kind's list in the report.
type StatusKind struct {
	Key   string
	Items []KindStatus
}

// MarshalJSON writes the report's fields, then each kind's list of values
// under its key.
func (r *StatusReport) MarshalJSON() ([]byte, error) {
	type fixed StatusReport
	head, err := json.Marshal((*fixed)(r))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(head[:len(head)-1])
	for _, k := range r.Kinds {
		vals := make([]any, 0, len(k.Items))
		for _, it := range k.Items {
			vals = append(vals, it.Value)
		}
		key, _ := json.Marshal(k.Key)
		v, err := json.Marshal(vals)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, ",%s:%s", key, v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// StatusNode is one node in the report.
type StatusNode struct {
	Name                 string            `json:"name"`
	Host                 string            `json:"host"`
	Reachable            bool              `json:"reachable"`
	Error                string            `json:"error,omitempty"`
	GPUs                 []string          `json:"gpus"`
	MemoryTotalBytes     uint64            `json:"memory_total_bytes,omitempty"`
	MemoryAvailableBytes uint64            `json:"memory_available_bytes,omitempty"`
	FabricAddress        string            `json:"fabric_address,omitempty"`
	Containers           []StatusContainer `json:"containers"`
	// GPUSimulator names the program that played nvidia-smi on the node
	// ("rayform simnode" in the lab; observe's GPUFacts.Simulator, read
	// from a line NVIDIA's nvidia-smi never prints): its GPUs are
	// simulated. "" for NVIDIA's nvidia-smi.
	GPUSimulator string `json:"gpu_simulator,omitempty"`
}

// StatusContainer is one of the project's containers on a node.
type StatusContainer struct {
	Name     string `json:"name"`
	Resource string `json:"resource,omitempty"`
	Image    string `json:"image"`
	State    string `json:"state"`
	Status   string `json:"status,omitempty"`
}

// Status is the report of one observation (cfg evaluated with facts) and
// the plan made from it (res): every judgment in it is the plan's
// (findings, drift, changes) or the kinds' (kind.KindWithStatus: Ray's node
// table, each serve's health on its own port), so status and plan never
// disagree about a fact.
func Status(kinds kind.Registry, project string, obs *Observation) *StatusReport {
	cfg, facts, res := obs.Config, obs.Facts, obs.Result
	p := res.Plan
	rep := &StatusReport{Project: project, Problems: []string{}, Nodes: []StatusNode{}}
	for _, f := range p.Findings {
		if f.Severity == plan.Error {
			rep.Problems = append(rep.Problems, findingLine(f))
		}
	}
	// A resource is listed once for what the plan says is wrong with it:
	// its drift, else the change apply would make; its kind's own
	// problems only when the plan names neither (the change's reasons
	// hold the drift, and a down serve's health is that drift).
	named := map[string]bool{}
	for _, d := range p.Drift {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %s (on %s)", d.Address, d.Summary, d.Host))
		named[d.Address] = true
	}
	for _, ch := range p.Changes {
		if ch.Action != plan.NoOp && !named[ch.Address] {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: apply would %s it: %s", ch.Address, ch.Action, changeReason(ch)))
		}
	}
	for _, ch := range p.Changes {
		if ch.Action != plan.NoOp {
			named[ch.Address] = true
		}
	}
	hosts := Hosts(kinds, cfg)
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].Name < hosts[j].Name })
	for _, h := range hosts {
		rep.Nodes = append(rep.Nodes, statusNodeOf(project, h, facts, res))
	}
	q := kind.StatusQuery{Config: cfg, Facts: facts, Plan: p, Project: project}
	for _, k := range kinds {
		sk, ok := k.(kind.KindWithStatus)
		key := k.Traits().Status
		if !ok || key == "" {
			continue
		}
		item := StatusKind{Key: key, Items: sk.Status(q)}
		for _, it := range item.Items {
			if !named[it.Address] {
				rep.Problems = append(rep.Problems, it.Problems...)
			}
		}
		rep.Kinds = append(rep.Kinds, item)
	}
	rep.Problems = dedupe(rep.Problems)
	rep.Healthy = len(rep.Problems) == 0
	return rep
}

// changeReason is why apply would change a resource: the plan's reasons,
// else what the action itself says.
func changeReason(ch plan.ResourceChange) string {
	if len(ch.Reasons) > 0 {
		return strings.Join(ch.Reasons, "; ")
	}
	on := ""
	if len(ch.Hosts) > 0 {
		on = " on " + strings.Join(ch.Hosts, ", ")
	}
	switch ch.Action {
	case plan.Create:
		return "it does not exist" + on
	case plan.Delete:
		return "it is no longer in the configuration"
	}
	var attrs []string
	for _, a := range ch.Attrs {
		if a.Changed() {
			attrs = append(attrs, a.Name)
		}
	}
	if len(attrs) > 0 {
		return "its " + strings.Join(attrs, ", ") + " changed"
	}
	return "it differs from the configuration" + on
}

func findingLine(f plan.Finding) string {
	where := f.Address
	if f.Host != "" {
		where += " on " + f.Host
	}
	return fmt.Sprintf("%s: %s", where, f.Summary)
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	out := ss[:0]
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// statusNodeOf is node n in the report: its facts, and the project's
// containers on it (by their labels).
func statusNodeOf(project string, n kind.Host, facts *observe.Facts, res *Result) StatusNode {
	sn := StatusNode{Name: n.Name, Host: n.Host, GPUs: []string{}, Containers: []StatusContainer{}}
	if err, ok := facts.Errors[n.Name]; ok {
		sn.Error = err.Error()
		return sn
	}
	hf := facts.Hosts[n.Name]
	if hf == nil {
		sn.Error = "not observed"
		return sn
	}
	sn.Reachable = hf.Err == "" || hf.Complete
	sn.Error = hf.Err
	for _, g := range hf.GPUs.List {
		sn.GPUs = append(sn.GPUs, g.Name)
	}
	sn.GPUSimulator = hf.GPUs.Simulator
	sn.MemoryTotalBytes, sn.MemoryAvailableBytes = hf.Memory.TotalBytes, hf.Memory.AvailableBytes
	if a, ok := res.Fabric[n.Name]; ok && a.IsValid() {
		sn.FabricAddress = a.String()
	}
	for _, c := range hf.Containers.List {
		if c.Labels[kind.LabelManaged] != "true" || c.Labels[kind.LabelProject] != project {
			continue
		}
		sn.Containers = append(sn.Containers, StatusContainer{Name: c.Name, Resource: c.Labels[kind.LabelResource], Image: c.Image, State: c.State, Status: c.Status})
	}
	return sn
}

// KindStatus is what status shows of one resource (kind.Status).
type KindStatus = kind.Status
