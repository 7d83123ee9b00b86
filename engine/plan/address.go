package plan

import (
	"strconv"
	"strings"
)

// Address identifies a block instance: its type, its name and, for an
// instance of a for_each block, its key, as in `node.gpu["h1"]` or
// "ray_cluster.main". It is the one parser and printer of addresses.
type Address struct {
	Type, Name string
	// Key is the for_each key; "" for a block without for_each.
	Key string
}

// ParseAddress reads "TYPE.NAME" or `TYPE.NAME["KEY"]`. A string without
// a dot is a type alone.
func ParseAddress(s string) Address {
	typ, rest, ok := strings.Cut(s, ".")
	if !ok {
		return Address{Type: s}
	}
	a := Address{Type: typ, Name: rest}
	if i := strings.IndexByte(rest, '['); i > 0 && strings.HasSuffix(rest, "]") {
		if key, err := strconv.Unquote(rest[i+1 : len(rest)-1]); err == nil {
			a.Name, a.Key = rest[:i], key
		}
	}
	return a
}

// Instance is the name with the key, as the address writes it: "main",
// `gpu["h1"]`.
func (a Address) Instance() string {
	if a.Key == "" {
		return a.Name
	}
	return a.Name + "[" + strconv.Quote(a.Key) + "]"
}

// String is the address as configurations and plans write it.
func (a Address) String() string {
	if a.Name == "" {
		return a.Type
	}
	return a.Type + "." + a.Instance()
}

// Equal reports whether a and b address the same instance.
func (a Address) Equal(b Address) bool { return a == b }
