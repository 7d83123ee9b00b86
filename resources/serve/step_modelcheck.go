package serve

import (
	"context"
	"fmt"
	"strings"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/resources/modelfit"
)

// modelCheckStep runs ModelCheck: an error finding stops the apply before
// vllm serve starts; a warning is shown. A model whose files it cannot
// read or parse says why and stops nothing, as plan's preflight does. A
// model that fits hands its architecture to the architecture check
// (ServeWork.Arch).
type modelCheckStep struct {
	r  *serveRun
	mc *ModelCheck
}

func newModelCheckStep(r *serveRun) *modelCheckStep { return &modelCheckStep{r: r, mc: r.s.Model} }

// Name names the head, where the model is staged.
func (s *modelCheckStep) Name() string {
	return fmt.Sprintf("check the staged model against the serve on %s", s.mc.Node)
}

// Check always reads: staging just wrote the files.
func (s *modelCheckStep) Check(context.Context) (bool, error) { return false, nil }

// Run reads the staged config.json (and the weights' index) and judges the
// serve against it.
func (s *modelCheckStep) Run(ctx context.Context, progress func(string)) error {
	mc := s.mc
	hf, err := s.readFiles(ctx)
	if err != nil {
		return err
	}
	got := hf.Reads[mc.Files.config().Key()]
	where := mc.Files.Dir
	if got.Ref != "" {
		where = strings.Replace(where, observe.RefPlaceholder, got.Ref, 1)
	}
	cfg, unchecked := parseStagedConfig(got, where, mc.Node)
	if unchecked != "" {
		progress("not checked: " + unchecked)
		return nil
	}
	serve := mc.Serve
	if idx, ok := hf.Reads[mc.Files.index().Key()]; ok && idx.Exists && idx.Err == "" {
		serve.WeightBytes = weightBytes(idx)
	}
	return s.judge(cfg, serve, where, progress)
}

// readFiles reads the model's config.json and weights index on the head,
// with the probes plan reads them with.
func (s *modelCheckStep) readFiles(ctx context.Context) (*observe.HostFacts, error) {
	mc := s.mc
	conn := s.r.e.Conns[mc.Node]
	if conn == nil {
		return nil, fmt.Errorf("%s: no connection to read the model's files", mc.Node)
	}
	facts, err := observe.Observe(ctx, map[string]transport.Conn{mc.Node: conn},
		observe.Spec{Hosts: map[string]observe.HostSpec{mc.Node: {Reads: []observe.ReadProbe{mc.Files.config(), mc.Files.index()}}}}, 1)
	if err != nil {
		return nil, fmt.Errorf("reading the staged model's files on %s: %w", mc.Node, err)
	}
	hf := facts.Hosts[mc.Node]
	if hf == nil || hf.Err != "" {
		return nil, fmt.Errorf("reading the staged model's files on %s: %v", mc.Node, facts.Err())
	}
	return hf, nil
}

// parseStagedConfig parses the config.json read at where on node;
// unchecked says why the model cannot be judged ("" when it can).
func parseStagedConfig(got observe.ReadResult, where, node string) (cfg modelfit.ModelConfig, unchecked string) {
	switch {
	case got.Err != "":
		return cfg, fmt.Sprintf("reading %s/config.json on %s: %s", where, node, got.Err)
	case !got.Exists:
		return cfg, fmt.Sprintf("%s has no %s/config.json after staging", node, where)
	case got.Truncated:
		return cfg, fmt.Sprintf("%s/config.json on %s is larger than %d bytes", where, node, preflightConfigMax)
	}
	cfg, err := modelfit.ParseConfig([]byte(got.Content))
	if err != nil {
		return cfg, fmt.Sprintf("%s/config.json on %s: %v", where, node, err)
	}
	return cfg, ""
}

// judge shows the findings of the serve against the staged model: an
// error stops the start; a model that fits is handed to the architecture
// check.
func (s *modelCheckStep) judge(cfg modelfit.ModelConfig, serve modelfit.Serve, where string, progress func(string)) error {
	mc := s.mc
	source := preflightSource(mc.Node, where)
	var errs []string
	for _, f := range modelFindings(mc.sv, cfg, serve, source) {
		if f.Severity == plan.Warning {
			progress(fmt.Sprintf("warning: %s: %s. %s", f.At, f.Summary, f.Fix))
			continue
		}
		errs = append(errs, fmt.Sprintf("%s: %s\n  %s\n  fix: %s", f.At, f.Summary, strings.ReplaceAll(f.Detail, "\n", "\n  "), f.Fix))
	}
	if len(errs) > 0 {
		return fmt.Errorf("vllm serve %s was not started: the staged model does not fit the serve:\n%s", s.r.spec.Name, strings.Join(errs, "\n"))
	}
	if len(cfg.Architectures) > 0 || cfg.ModelType != "" {
		s.r.s.Arch = &ArchCheck{Config: cfg, TrustRemoteCode: trustRemoteCode(mc.sv.ExtraArgs), At: rangeAt(mc.sv, "model"), Source: source}
	}
	progress(fmt.Sprintf("the staged model fits the serve (%s/config.json on %s)", where, mc.Node))
	if line, ok := capacityNote(mc.sv, cfg, serve, nil); ok {
		progress(line)
	}
	return nil
}

// Verify has nothing to read back.
func (s *modelCheckStep) Verify(context.Context) error { return nil }
