//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/rayform/rayform/engine/transport/shell"
)

// internalFloor is the hidden subcommand that runs the floor: OpenSSH ssh to
// every host at once, a fresh connection each, running that host's probe
// script. rfbench runs it in the lab's client namespace and times it from
// outside, as it times rayform.
const internalFloor = "internal-floor"

// probeDone is the probe's last line when it ran to the end.
const probeDone = "@@rayform@@ done"

// floorSSHArgs are the OpenSSH options of every floor connection besides
// the negotiated algorithms: the lab's ssh_config (host, user, key,
// known_hosts, BatchMode) and no connection sharing.
func floorSSHArgs(sshConfig string, algos algorithms) []string {
	args := []string{"-F", sshConfig, "-T",
		"-o", "ControlMaster=no", "-o", "ControlPath=none", "-o", "IdentityAgent=none"}
	return append(args, algos.sshOptions()...)
}

// remoteCommand is what ssh sends in its exec request for script: the script
// handed to /bin/sh -c, as rayform's transport hands it (without rayform's
// wrapper).
func remoteCommand(script string) string {
	return "exec /bin/sh -c " + shell.Quote(script)
}

// runFloorHelper runs, concurrently, one ssh per HOST=SCRIPTFILE argument
// after "--", with the ssh options before it, and fails unless every probe
// ran to its end (or, with -any-output first, unless every ssh exits 0).
//
//	rfbench internal-floor [-any-output] [ssh options] -- spark1=/path/probe-spark1.sh ...
func runFloorHelper(ctx context.Context, args []string, _, stderr io.Writer) int {
	anyOutput := len(args) > 0 && args[0] == "-any-output"
	if anyOutput {
		args = args[1:]
	}
	i := indexOf(args, "--")
	if i < 0 {
		fmt.Fprintf(stderr, "%s: usage: %s [ssh options] -- HOST=SCRIPTFILE...\n", internalFloor, internalFloor)
		return 2
	}
	sshArgs, targets := args[:i], args[i+1:]
	type job struct{ host, cmd string }
	jobs := make([]job, 0, len(targets))
	for _, t := range targets {
		host, file, ok := strings.Cut(t, "=")
		if !ok {
			fmt.Fprintf(stderr, "%s: %q: want HOST=SCRIPTFILE\n", internalFloor, t)
			return 2
		}
		script, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", internalFloor, err)
			return 1
		}
		jobs = append(jobs, job{host, remoteCommand(string(script))})
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = floorOne(ctx, sshArgs, j.host, j.cmd, anyOutput)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", internalFloor, err)
		return 1
	}
	return 0
}

// floorOne runs one probe over a fresh OpenSSH connection.
func floorOne(ctx context.Context, sshArgs []string, host, remote string, anyOutput bool) error {
	args := append(append([]string{}, sshArgs...), host, remote)
	cmd := exec.CommandContext(ctx, "ssh", args...)
	var out, errb bytes.Buffer
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ssh %s: %w: %s", host, err, strings.TrimSpace(errb.String()))
	}
	if !anyOutput && !bytes.Contains(out.Bytes(), []byte(probeDone)) {
		return fmt.Errorf("ssh %s: the probe did not run to its end (%d bytes of output)", host, out.Len())
	}
	return nil
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
