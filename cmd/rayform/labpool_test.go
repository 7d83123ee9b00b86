//go:build linux

package main

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/rayform/rayform/internal/labslots"
)

// defaultLabSlots is how many labs this package's lab tests keep up at once
// unless RAYFORM_E2E_LABS says otherwise: what a 2-core, 24 GB machine
// carries with engine/lab's tests running beside this package (go test
// runs packages side by side).
const defaultLabSlots = 4

// labPool limits the labs that are up at once (startLab, TestLabCommand).
var labPool *labslots.Pool

// TestMain runs the lab tests side by side, at most labPool's size at once
// (see startLab), and removes the binaries they built.
func TestMain(m *testing.M) {
	flag.Parse()
	var err error
	if labPool, err = labslots.Setup(defaultLabSlots); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	if labBins.dir != "" {
		os.RemoveAll(labBins.dir)
	}
	os.Exit(code)
}
