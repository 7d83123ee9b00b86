package arguments

import (
	"flag"
	"strconv"
	"time"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/state"
)

// Vars collects -var and -var-file options in command-line order, the
// order that decides which value wins.
type Vars struct {
	Args []config.VarArg
}

// varFlag is one of the two flags feeding a shared Vars.
type varFlag struct {
	into *Vars
	file bool
}

func (f varFlag) String() string { return "" }

func (f varFlag) Set(v string) error {
	f.into.Args = append(f.into.Args, config.VarArg{File: f.file, Value: v})
	return nil
}

// register adds -var and -var-file to fs.
func (v *Vars) register(fs *flag.FlagSet) {
	fs.Var(varFlag{into: v}, "var", "set a variable, `NAME=VALUE` (repeatable)")
	fs.Var(varFlag{into: v, file: true}, "var-file", "set variables from `FILE` (HCL, or JSON when it ends in .json; repeatable)")
}

// Run are the flags of the commands that reach the hosts (plan, apply,
// destroy, check, status, logs, force-unlock).
type Run struct {
	Common
	Vars          Vars
	Parallelism   int
	Targets       []string
	Replace       []string
	TrustNewHosts bool
	SSHConfig     string
	KnownHosts    string
	Project       string
	StateFile     string
	ViewType      ViewType
	// Input is false with -input=false: never prompt.
	Input bool
	// NoLock is -lock=false (apply and destroy).
	NoLock bool
	// LockTimeout is -lock-timeout (apply and destroy).
	LockTimeout time.Duration
	// RotateToken is apply's -rotate-token.
	RotateToken bool
}

// register adds the shared flags to fs; json is read back by finish.
func (o *Run) register(fs *flag.FlagSet, json *bool) {
	o.Vars.register(fs)
	fs.IntVar(&o.Parallelism, "parallelism", 0, "limit the number of hosts and resources worked on at once to `N` (default: every host at once when observing, which is read-only; 10 when applying)")
	fs.Var((*stringList)(&o.Targets), "target", "limit the operation to resource `ADDRESS` and its dependencies (repeatable; for destroy, the resource and what depends on it)")
	fs.Var((*stringList)(&o.Replace), "replace", "replace resource `ADDRESS` even if it matches the configuration: a vllm_serve restarts its process, a ray_cluster recreates its containers and its serves (repeatable)")
	fs.BoolVar(&o.TrustNewHosts, "trust-new-hosts", false, "record unknown SSH host keys in known_hosts instead of refusing them (like StrictHostKeyChecking=accept-new); a changed key is always refused")
	fs.StringVar(&o.SSHConfig, "ssh-config", "", "read SSH client settings from `FILE` instead of ~/.ssh/config")
	fs.StringVar(&o.KnownHosts, "known-hosts", "", "check host keys against `FILE` instead of ~/.ssh/known_hosts")
	fs.StringVar(&o.Project, "project", "", "label rayform's containers with project `NAME` (default: the configuration's rayform { project = ... }, then the name the state recorded, then the configuration directory's name)")
	fs.BoolVar(&o.Input, "input", true, "ask for input (-input=false: never prompt; apply and destroy then need -auto-approve or a saved plan)")
	fs.StringVar(&o.StateFile, "state", state.DefaultPath, "local state `FILE`, relative to the configuration directory")
	fs.BoolVar(json, "json", false, "print machine-readable NDJSON events instead of text")
}

// registerLock adds -lock and -lock-timeout (apply and destroy).
func (o *Run) registerLock(fs *flag.FlagSet, doing string) {
	fs.BoolFunc("lock", "hold each cluster's lock on its head host while "+doing+" (default true; -lock=false to skip)", func(v string) error {
		b, err := strconv.ParseBool(v)
		o.NoLock = !b
		return err
	})
	fs.DurationVar(&o.LockTimeout, "lock-timeout", 0, "wait up to `DURATION` for a lock another rayform holds (default: fail at once)")
}

// noPromptReason says why apply or destroy cannot ask for approval ("" when
// it can): -json owns stdout, -input=false forbids prompts.
func (o *Run) noPromptReason() string {
	switch {
	case o.ViewType == ViewJSON:
		return "-json is set"
	case !o.Input:
		return "-input=false is set"
	}
	return ""
}

// newRun starts the parse of a command that takes the Run flags; the
// caller parses, then sets ViewType from json.
func newRun(name, synopsis string) (o *Run, p *command, json *bool) {
	o = &Run{}
	p = newCommand(name, synopsis, &o.Common)
	json = new(bool)
	o.register(p.fs, json)
	return o, p, json
}
