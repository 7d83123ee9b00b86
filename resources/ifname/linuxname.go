// Package ifname checks names as Linux takes them: the kinds that name
// a host's interfaces (node's fabric_interface, network's interface)
// share it.
package ifname

import "strings"

// InterfaceProblem returns why name is not a valid Linux interface name,
// or "".
func InterfaceProblem(name string) string {
	switch {
	case name == "" || name == "." || name == "..":
		return "is not an interface name"
	case len(name) > 15:
		return "is longer than 15 characters, the Linux limit for interface names"
	case strings.ContainsAny(name, "/: \t\n"):
		return "contains a character not allowed in interface names (slash, colon or space)"
	}
	return ""
}
