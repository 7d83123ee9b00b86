//go:build linux

package e2e

// The rayform binary's exit codes, as its CLI reference documents them:
// the tests read them from the process, as a script would.
const (
	exitOK      = 0
	exitError   = 1
	exitChanges = 2 // plan -detailed-exitcode: changes present

	exitUnhealthy = 2 // status: a cluster or serve is not healthy
)
