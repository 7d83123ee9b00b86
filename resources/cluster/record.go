package cluster

import (
	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/resources/attrs"
	"github.com/rayform/rayform/resources/hostplan"
	"github.com/rayform/rayform/resources/network"
)

// LabelAttrs carries, on every container rayform creates, the cluster's
// attributes as applied (see clusterRecordValues), so that a later plan
// shows each changed attribute with its value before.
const LabelAttrs = "rayform.attrs"

// nodeAttrType is the per-node part of a ray_cluster: what the network
// pins on the node, and the GPUs Ray is started with there. It is the "node" attribute of a container's record and
// one element of the plan's "nodes" map.
func nodeAttrType() cty.Type {
	return cty.Object(map[string]cty.Type{
		"address":   cty.String,
		"interface": cty.String,
		"env":       cty.Map(cty.String),
		"gpus":      cty.Number,
	})
}

// clusterSchema is the ray_cluster's attributes as container labels
// record them: its applied arguments (config.Schema), then the node's own
// values.
func clusterSchema() []attrs.Attr {
	return append(attrs.FromArgs(clusterDescriptor().Args),
		attrs.Attr{Name: "node", Type: nodeAttrType(), Description: "what the network pins on the node"})
}

// clusterPlanSchema is clusterSchema as plans list it: the per-node
// records gathered into one map by node name.
func clusterPlanSchema() []attrs.Attr {
	var out []attrs.Attr
	for _, a := range clusterSchema() {
		if a.Name == "node" {
			a = attrs.Attr{Name: "nodes", Type: cty.Map(nodeAttrType()), Exported: true, Description: "per node, what the network pins there"}
		}
		out = append(out, a)
	}
	return out
}

// clusterRecordValues are the attributes of rc as the container of spec
// records them: the cluster's arguments and the node's pinned values.
func clusterRecordValues(rc *RayCluster, spec ContainerSpec, iface string) attrs.Values {
	pinned := map[string]string{}
	for _, k := range network.EnvKeys() {
		if v, ok := spec.Env[k]; ok {
			pinned[k] = v
		}
	}
	env := attrs.StringMap(pinned)
	if rc.Network == "" {
		iface = ""
	} else if spec.NodeIP == "" {
		// Pinned once the node's fabric address is observed.
		iface, env = "", cty.UnknownVal(cty.Map(cty.String))
	}
	vals := attrs.ArgValues(clusterDescriptor().Args, &rc.Decl, spec.SecretKey)
	vals["node"] = cty.ObjectVal(map[string]cty.Value{
		"address":   hostplan.StrVal(spec.NodeIP),
		"interface": optStringUnknown(iface, rc.Network != ""),
		"env":       env,
		"gpus":      cty.NumberIntVal(int64(spec.GPUs)),
	})
	return vals
}

// optStringUnknown is s; when s is empty, unknown if it will be known
// after observing (known), else null.
func optStringUnknown(s string, known bool) cty.Value {
	switch {
	case s != "":
		return cty.StringVal(s)
	case known:
		return cty.UnknownVal(cty.String)
	}
	return cty.NullVal(cty.String)
}

// withRecord fills the spec's record of its cluster's attributes (the
// LabelAttrs label).
func withRecord(rc *RayCluster, spec ContainerSpec, iface string) ContainerSpec {
	spec.Record = clusterRecordValues(rc, spec, iface).KnownRecord()
	return spec
}

// nodeIface is the interface the network pins on node, or else the one
// observed holding its address.
func nodeIface(nw *network.Network, node string, observed map[string]string) string {
	if nw != nil {
		if i := nw.InterfaceFor(node); i != "" {
			return i
		}
	}
	return observed[node]
}
