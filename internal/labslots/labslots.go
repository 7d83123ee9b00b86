// Package labslots lets a test process run its lab tests side by side
// while keeping at most a fixed number of labs up at once.
//
// A lab test mostly waits (on sshd, dockerd, Ray), so lab tests are
// parallel tests; what limits them is the machine's memory and CPU, not
// go test's -parallel (which defaults to the number of CPUs and counts a
// test whose parallel subtests run as not running). A package's TestMain
// calls Setup with its default; its lab helper calls Pool.Acquire before
// bringing a lab up. RAYFORM_E2E_LABS overrides the default of every
// package (1 runs the labs one after another).
package labslots

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// Env names the variable that overrides a package's default.
const Env = "RAYFORM_E2E_LABS"

// Pool holds a token for each lab that is up.
type Pool struct {
	slots chan struct{}
}

// Setup makes the pool of a test process from RAYFORM_E2E_LABS, or def
// when it is empty, and raises go test's -parallel to the pool's size
// unless the command line gave -parallel, so that the pool is the one
// limit. TestMain calls it after flag.Parse and before m.Run.
func Setup(def int) (*Pool, error) {
	n, err := Slots(os.Getenv(Env), def)
	if err != nil {
		return nil, err
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			return nil, fmt.Errorf("raise -parallel to %d: %w", n, err)
		}
	}
	return &Pool{slots: make(chan struct{}, n)}, nil
}

// Slots reads a RAYFORM_E2E_LABS value: empty for def, else a count >= 1.
func Slots(env string, def int) (int, error) {
	if env == "" {
		return def, nil
	}
	n, err := strconv.Atoi(env)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a count of labs, 1 or more", Env, env)
	}
	return n, nil
}

// Size is how many labs the pool lets up at once.
func (p *Pool) Size() int { return cap(p.slots) }

// Acquire waits for a slot and gives it back in the test's cleanup. Call
// it before registering the cleanup that takes the lab down: cleanups run
// last first, so the slot is free only once the lab is down.
func (p *Pool) Acquire(t testing.TB) {
	t.Helper()
	p.slots <- struct{}{}
	t.Cleanup(func() { <-p.slots })
}
