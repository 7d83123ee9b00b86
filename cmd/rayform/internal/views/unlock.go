package views

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/rayform/rayform/engine/lock"
)

// Unlock shows force-unlock: who holds a lock, the confirmation, and what
// was freed and ended (human only).
type Unlock struct {
	*View
	stdin io.Reader
}

// NewUnlock is force-unlock's view, reading the confirmation from stdin.
func NewUnlock(v *View, stdin io.Reader) *Unlock { return &Unlock{View: v, stdin: stdin} }

// Legacy refuses to break the lock name earlier rayform versions used for
// resource (held says who holds it), of the given project and cluster.
func (v *Unlock) Legacy(resource string, held error, project, cluster string) {
	fmt.Fprintf(v.stderr, "Error: %s is not locked, but the lock name earlier rayform versions used for it is: the %v.\n\nforce-unlock does not break it: an earlier rayform that holds it does not say for which deployment, and that name can be another's (project %q and cluster %q joined by '-' can give the same name as others). A holder that vanished loses it %s after its last renewal.\n",
		resource, strings.TrimPrefix(held.Error(), "lock "), project, cluster, lock.DefaultLease)
}

// NotLocked says resource is not locked.
func (v *Unlock) NotLocked(resource string) { fmt.Fprintf(v.stdout, "%s is not locked.\n", resource) }

// Held says who holds the lock.
func (v *Unlock) Held(held error) {
	fmt.Fprintf(v.stdout, "The %v.\n", strings.TrimPrefix(held.Error(), "lock "))
}

// Confirm asks whether to break the lock of resource; only "yes"
// confirms. A refusal is said on stderr.
func (v *Unlock) Confirm(resource string) bool {
	fmt.Fprintf(v.stdout, "\nDo you really want to force-unlock?\n  rayform will stop that holder and free the lock. If it is still working, two\n  rayform runs may then change %s at once.\n  Only 'yes' will be accepted to confirm.\n\n  Enter a value: ", resource)
	line, _ := bufio.NewReader(v.stdin).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		fmt.Fprintln(v.stderr, "\nforce-unlock cancelled.")
		return false
	}
	return true
}

// Released says the lock of resource is free.
func (v *Unlock) Released(resource string) {
	fmt.Fprintf(v.stdout, "\nThe lock of %s has been released. Other rayform commands may now take it.\n", resource)
}
