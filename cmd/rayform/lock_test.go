package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Finding 9: the lock's holder record names the command that holds it.
func TestLockHolderNamesTheCommand(t *testing.T) {
	for _, op := range []string{"apply", "destroy"} {
		h := lockHolder(op)
		if !strings.HasSuffix(h, fmt.Sprintf(" pid=%d rayform %s", os.Getpid(), op)) || !strings.Contains(h, "@") {
			t.Errorf("lockHolder(%q) = %q, want who@host pid=N rayform %s", op, h, op)
		}
	}
}
