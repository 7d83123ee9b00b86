package serve

import (
	"context"
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/apply"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources/modelfit"
)

// ModelCheck is the model preflight of a serve whose weights a block of
// the configuration stages during the same apply, so that plan could not
// read them: apply runs it on the head right after staging and before the
// serve starts (or the running one is stopped), reading the files with the
// probe plan reads them with and judging with the same modelFindings, and
// stops the serve's start with the finding plan would have shown.
type ModelCheck struct {
	// Node is the cluster's head, where the files are read.
	Node  string
	Files modelFiles
	// Serve is what plan knew of the serve's fit, less the weights' size.
	Serve modelfit.Serve
	sv    *VLLMServe
}

// modelCheckStep runs ModelCheck: an error finding stops the apply before
// vllm serve starts; a warning is shown. A model whose files it cannot
// read or parse says why and stops nothing, as plan's preflight does.
func (r *serveRun) modelCheckStep() apply.Step {
	mc := r.s.Model
	return apply.Func{
		Label: fmt.Sprintf("check the staged model against the serve on %s", mc.Node),
		RunFunc: func(ctx context.Context, progress func(string)) error {
			conn := r.e.Conns[mc.Node]
			if conn == nil {
				return fmt.Errorf("%s: no connection to read the model's files", mc.Node)
			}
			cfgRead, idxRead := mc.Files.config(), mc.Files.index()
			facts, err := observe.Observe(ctx, map[string]transport.Conn{mc.Node: conn},
				observe.Spec{Hosts: map[string]observe.HostSpec{mc.Node: {Reads: []observe.ReadProbe{cfgRead, idxRead}}}}, 1)
			if err != nil {
				return fmt.Errorf("reading the staged model's files on %s: %w", mc.Node, err)
			}
			hf := facts.Hosts[mc.Node]
			if hf == nil || hf.Err != "" {
				return fmt.Errorf("reading the staged model's files on %s: %v", mc.Node, facts.Err())
			}
			got := hf.Reads[cfgRead.Key()]
			where := mc.Files.Dir
			if got.Ref != "" {
				where = strings.Replace(where, observe.RefPlaceholder, got.Ref, 1)
			}
			switch {
			case got.Err != "":
				progress(fmt.Sprintf("not checked: reading %s/config.json on %s: %s", where, mc.Node, got.Err))
				return nil
			case !got.Exists:
				progress(fmt.Sprintf("not checked: %s has no %s/config.json after staging", mc.Node, where))
				return nil
			case got.Truncated:
				progress(fmt.Sprintf("not checked: %s/config.json on %s is larger than %d bytes", where, mc.Node, preflightConfigMax))
				return nil
			}
			cfg, err := modelfit.ParseConfig([]byte(got.Content))
			if err != nil {
				progress(fmt.Sprintf("not checked: %s/config.json on %s: %v", where, mc.Node, err))
				return nil
			}
			s := mc.Serve
			if idx, ok := hf.Reads[idxRead.Key()]; ok && idx.Exists && idx.Err == "" {
				s.WeightBytes = weightBytes(idx)
			}
			source := preflightSource(mc.Node, where)
			var errs []string
			for _, f := range modelFindings(mc.sv, cfg, s, source) {
				if f.Severity == plan.Warning {
					progress(fmt.Sprintf("warning: %s: %s. %s", f.At, f.Summary, f.Fix))
					continue
				}
				errs = append(errs, fmt.Sprintf("%s: %s\n  %s\n  fix: %s", f.At, f.Summary, strings.ReplaceAll(f.Detail, "\n", "\n  "), f.Fix))
			}
			if len(errs) > 0 {
				return fmt.Errorf("vllm serve %s was not started: the staged model does not fit the serve:\n%s", r.spec.Name, strings.Join(errs, "\n"))
			}
			if len(cfg.Architectures) > 0 || cfg.ModelType != "" {
				r.s.Arch = &ArchCheck{Config: cfg, TrustRemoteCode: trustRemoteCode(mc.sv.ExtraArgs), At: rangeAt(mc.sv, "model"), Source: source}
			}
			progress(fmt.Sprintf("the staged model fits the serve (%s/config.json on %s)", where, mc.Node))
			if line, ok := capacityNote(mc.sv, cfg, s, nil); ok {
				progress(line)
			}
			return nil
		},
	}
}

// rangeAt is the file:line of sv's attribute attr.
func rangeAt(sv *VLLMServe, attr string) string {
	r := sv.Range(attr)
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}
