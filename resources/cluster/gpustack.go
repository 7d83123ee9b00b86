package cluster

import (
	"fmt"
	"slices"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cudacompat"
)

// gpuStack judges the cluster's image against the GPU stack of every node
// it will start a container on (cudacompat.Judge): the driver against the
// image's CUDA, the GPUs' compute capability against its kernels, MIG
// mode, the fabric manager and compat libraries. An error stops the plan
// before anything is removed or started, at the cluster's image (or env)
// attribute, or at the node's block for what is the node's alone. Nodes
// whose containers keep running are not judged: they run.
func (p *planner) gpuStack(rc *RayCluster, start map[string]bool) {
	img := cudacompat.Image{Ref: rc.Image, Env: p.imageEnv(rc.Image), ContainerEnv: rc.Env}
	for _, n := range rc.Nodes() {
		hf := p.Host(n)
		if hf == nil || !start[n] {
			continue
		}
		for _, f := range cudacompat.Judge(n, hf.GPUs, img) {
			sev := plan.Warning
			if f.Error {
				sev = plan.Error
			}
			addr, r := rc.Addr, rc.Range(f.Attr)
			if f.Attr == "" {
				if nd := p.cfg.Nodes[n]; nd != nil {
					addr, r = nd.Addr, nd.DeclRange
				}
			}
			p.Finding(plan.Finding{Severity: sev, Address: addr, Host: n, At: fmt.Sprintf("%s:%d", r.Filename, r.Start.Line),
				Summary: f.Summary, Detail: f.Detail, Fix: f.Fix})
		}
	}
}

// imageEnv is the CUDA variables of the image ref from its config, as any
// node that holds it reported them (observe.Image.Env); nil when no node
// inspected it.
func (p *planner) imageEnv(ref string) map[string]string {
	hosts := make([]string, 0, len(p.Facts().Hosts))
	for h := range p.Facts().Hosts {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		hf := p.Host(h)
		if hf == nil {
			continue
		}
		if i := slices.IndexFunc(hf.Images, func(im observe.Image) bool { return im.Ref == ref && im.Present }); i >= 0 {
			return hf.Images[i].Env
		}
	}
	return nil
}
