package kind

// The labels of every container rayform runs for a resource: the engine
// reads a node's containers of the project by them (status), the kinds
// set and check them.
const (
	LabelManaged  = "rayform.managed"  // "true"
	LabelProject  = "rayform.project"  // the project's name
	LabelResource = "rayform.resource" // the resource's address
)

// Host is one host a configuration declares (KindWithHosts) and how it is
// reached.
type Host struct {
	// Name is the node's name in the configuration.
	Name string
	// Host, User, Port and Bastion are its SSH coordinates (empty or
	// zero: SSH's defaults); IdentityFile is the key to use ("" for
	// SSH's).
	Host, User   string
	Port         int
	Bastion      string
	IdentityFile string
}
