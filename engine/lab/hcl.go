//go:build linux

package lab

import (
	"fmt"
	"strings"
)

// rayformHCL renders a rayform configuration for the lab: its nodes over
// SSH (with the lab's ssh_config and known_hosts), a Ray cluster on the
// fabric and a vLLM server, as in the seeds' DGX Spark pair.
func (l *Lab) rayformHCL() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# rayform configuration of lab %q (written by `rayform lab up`).", l.Name)
	w("# Run rayform from the lab's client namespace, e.g.:")
	w("#   ip netns exec %s rayform -chdir %s plan", l.ClientNetns, l.Dir)
	w("")
	for _, n := range l.Nodes {
		w("node %q {", n.Name)
		w("  address    = %q", n.MgmtIP)
		w("  user       = \"root\"")
		w("  ssh_config = %q", l.SSHConfig)
		w("}")
		w("")
	}
	w("network \"fabric\" {")
	w("  cidr = \"%s0/24\"", FabricPrefix)
	w("  interfaces = {")
	for _, n := range l.Nodes {
		w("    %s = %q", n.Name, n.FabricIfname)
	}
	w("  }")
	w("}")
	return b.String()
}
