package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/rayform/rayform/engine/dag"
)

// orderItems orders the block-level items so that every item comes after
// the items it refers to, and reports dependency cycles.
func (m *module) orderItems() ([]string, hcl.Diagnostics) {
	g := dag.New()
	for _, addr := range m.order {
		g.Add(addr)
		for _, ref := range m.items[addr].refs {
			g.Connect(addr, ref.addr)
		}
	}
	order, err := g.TopoOrder()
	var ce *dag.CycleError
	if errors.As(err, &ce) {
		return nil, hcl.Diagnostics{m.cycleDiag(ce.Cycle)}
	}
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot order the configuration", Detail: err.Error() + "."}}
	}
	return order, nil
}

// cycleDiag explains a cycle a -> b -> ... -> a, pointing at the first
// reference on it.
func (m *module) cycleDiag(cycle []string) *hcl.Diagnostic {
	var hops []string
	var subject *hcl.Range
	// via is the argument every hop goes through, when they all go through
	// one argument of one kind that describes its own loops.
	var via *Arg
	oneArg := true
	for i := 0; i+1 < len(cycle); i++ {
		from, to := m.items[cycle[i]], cycle[i+1]
		for _, ref := range from.refs {
			if ref.addr != to {
				continue
			}
			if subject == nil {
				subject = ref.rng.Ptr()
			}
			a := m.arg(from.kind, ref.attr)
			switch {
			case a == nil || a.CycleSummary == "" || ref.kind != from.kind:
				oneArg = false
			case via == nil:
				via = a
			case via != a:
				oneArg = false
			}
			hops = append(hops, fmt.Sprintf("%s's %s refers to %s", from.addr, ref.attr, to))
			break
		}
	}
	path := strings.Join(cycle, " -> ")
	if oneArg && via != nil {
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  via.CycleSummary,
			Detail:   fmt.Sprintf(via.CycleDetail, path),
			Subject:  subject,
		}
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Dependency cycle",
		Detail: fmt.Sprintf("These blocks depend on each other in a loop: %s (%s). Remove one of these references.",
			path, strings.Join(hops, ", ")),
		Subject: subject,
	}
}

// evaluate evaluates the module twice: the first pass evaluates every
// block knowing only the blocks it depends on; the cross-block checks
// ([Kind.Validate]) run on its result; the second pass evaluates every
// block again with the first pass's result at hand ([Block.Prior]), so
// that a block can learn what depends on it (a network the nodes of its
// clusters).
func evaluate(mod *module, vars map[string]cty.Value, varDecls map[string]*Variable, facts any) (*Config, hcl.Diagnostics) {
	first := newEvaluator(mod, vars, varDecls, facts, nil)
	cfg, diags := first.run()
	if diags.HasErrors() {
		return cfg, diags
	}
	cross := mod.validateConfig(cfg)
	if cross.HasErrors() {
		return cfg, append(diags, cross...)
	}
	second := newEvaluator(mod, vars, varDecls, facts, cfg)
	cfg, diags = second.run()
	return cfg, append(diags, cross...)
}

// evaluator evaluates the items of a module in dependency order, building
// the evaluation context from the values computed so far.
type evaluator struct {
	mod   *module
	vars  map[string]cty.Value
	facts any
	// prior is the first pass's configuration; nil in the first pass.
	prior *Config
	funcs map[string]function.Function
	cfg   *Config

	// locals are the local values by name, as expressions see them.
	locals map[string]cty.Value
	// objects are the blocks' values by kind and name, as expressions see
	// them.
	objects map[string]map[string]cty.Value
	// keys lists each for_each block's instance keys, sorted, by
	// block-level address.
	keys   map[string][]string
	failed map[string]bool // block-level addresses that failed
	edges  map[string]map[string]bool
}

func newEvaluator(mod *module, vars map[string]cty.Value, varDecls map[string]*Variable, facts any, prior *Config) *evaluator {
	return &evaluator{
		mod:   mod,
		vars:  vars,
		facts: facts,
		prior: prior,
		funcs: Functions(mod.baseDir),
		cfg: &Config{
			Variables:    varDecls,
			Locals:       map[string]*Local{},
			Outputs:      map[string]*Output{},
			Facts:        facts,
			Project:      mod.project,
			ProjectRange: mod.projectRange,
			mod:          mod,
			vars:         vars,
			blocks:       map[string]map[string]any{},
		},
		locals:  map[string]cty.Value{},
		objects: map[string]map[string]cty.Value{},
		keys:    map[string][]string{},
		failed:  map[string]bool{},
		edges:   map[string]map[string]bool{},
	}
}

func (e *evaluator) run() (*Config, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	for _, addr := range e.mod.evalOrder {
		it := e.mod.items[addr]
		if it.kind == kindVariable {
			continue
		}
		if e.dependsOnFailed(it) {
			e.failed[addr] = true
			continue
		}
		more := e.checkInstanceRefs(it)
		if !more.HasErrors() {
			switch it.kind {
			case kindLocal:
				more = e.evalLocal(it)
			case kindOutput:
				more = e.evalOutput(it)
			default:
				more = e.evalResource(it, e.mod.kinds[it.kind])
			}
		}
		diags = append(diags, more...)
		if more.HasErrors() {
			e.failed[addr] = true
		}
	}
	e.finishGraph()
	return e.cfg, diags
}

func (e *evaluator) dependsOnFailed(it *item) bool {
	for _, ref := range it.refs {
		if e.failed[ref.addr] {
			return true
		}
	}
	return false
}

// checkInstanceRefs checks references like node.gpu["h1"] against the
// instances the for_each block produced.
func (e *evaluator) checkInstanceRefs(it *item) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, ref := range it.refs {
		if !ref.hasKey {
			continue
		}
		block := strings.TrimPrefix(ref.addr, ref.kind+".")
		if _, ok := e.cfg.blocks[ref.kind][instanceName(block, ref.key, true)]; ok {
			continue
		}
		keys := e.keys[ref.addr]
		detail := fmt.Sprintf("%s has no instance with the key %q; its for_each produced %s.", ref.addr, ref.key, describeKeys(keys))
		detail += didYouMean(ref.key, keys, ref.addr+"[%q]")
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("Reference to undeclared %s instance", e.mod.noun(ref.kind)),
			Detail:   detail,
			Subject:  ref.rng.Ptr(),
		})
	}
	return diags
}

func describeKeys(keys []string) string {
	if len(keys) == 0 {
		return "no instances"
	}
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return "the keys " + strings.Join(q, ", ")
}

// ctx returns an evaluation context holding every value computed so far.
func (e *evaluator) ctx() *hcl.EvalContext {
	vars := map[string]cty.Value{
		"var":   objectOf(e.vars),
		"local": objectOf(e.locals),
	}
	for _, kind := range e.mod.kindOrder {
		vars[kind] = objectOf(e.objects[kind])
	}
	return &hcl.EvalContext{Variables: vars, Functions: e.funcs}
}

// setObject records a block's value as expressions see it.
func (e *evaluator) setObject(kind, name string, v cty.Value) {
	if e.objects[kind] == nil {
		e.objects[kind] = map[string]cty.Value{}
	}
	e.objects[kind][name] = v
}

func objectOf(m map[string]cty.Value) cty.Value {
	if len(m) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(m)
}

// connect records a graph edge between instance addresses.
func (e *evaluator) connect(from, to string) {
	if e.edges[from] == nil {
		e.edges[from] = map[string]bool{}
	}
	e.edges[from][to] = true
}

// refEdges records the edges of one instance of it from its references.
func (e *evaluator) refEdges(it *item, from string) {
	if e.edges[from] == nil {
		e.edges[from] = map[string]bool{}
	}
	for _, ref := range it.refs {
		switch {
		case ref.hasKey:
			block := strings.TrimPrefix(ref.addr, ref.kind+".")
			e.connect(from, ref.kind+"."+instanceName(block, ref.key, true))
		case e.mod.items[ref.addr].forEach == nil:
			e.connect(from, ref.addr)
		default:
			block := strings.TrimPrefix(ref.addr, ref.kind+".")
			for _, k := range e.keys[ref.addr] {
				e.connect(from, ref.kind+"."+instanceName(block, k, true))
			}
		}
	}
}

// finishGraph stores each block's dependencies on its Decl.
func (e *evaluator) finishGraph() {
	e.cfg.edges = e.edges
	for _, byName := range e.cfg.blocks {
		for _, v := range byName {
			d := v.(Declarer).Declaration()
			d.DependsOn = slices.Sorted(maps.Keys(e.edges[d.Addr]))
			if len(d.DependsOn) == 0 {
				d.DependsOn = nil
			}
		}
	}
}

func (e *evaluator) evalLocal(it *item) hcl.Diagnostics {
	e.refEdges(it, it.addr)
	a := it.attrs[it.name]
	val, diags := a.Expr.Value(e.ctx())
	diags = redactSensitive(diags)
	if diags.HasErrors() {
		return diags
	}
	unmarked, pvm := val.UnmarkDeepWithPaths()
	e.locals[it.name] = val
	e.cfg.Locals[it.name] = &Local{
		Name:      it.name,
		Value:     unmarked,
		Sensitive: hasSensitive(pvm),
		DeclRange: it.declRange,
	}
	return diags
}

func hasSensitive(pvm []cty.PathValueMarks) bool {
	for _, pv := range pvm {
		if _, ok := pv.Marks[Sensitive]; ok {
			return true
		}
	}
	return false
}

func (e *evaluator) evalOutput(it *item) hcl.Diagnostics {
	e.refEdges(it, it.addr)
	b := e.evalBlock(it, e.ctx(), it.addr)
	o := &Output{
		Name:        it.name,
		Description: b.str("description"),
		Sensitive:   b.boolean("sensitive"),
		Value:       b.raw["value"],
		DeclRange:   it.declRange,
		ValueRange:  b.decl.Range("value"),
	}
	if o.Value == cty.NilVal {
		o.Value = cty.NullVal(cty.DynamicPseudoType)
	}
	if a, ok := it.attrs["value"]; ok {
		o.Reads = e.reads(a.Expr)
	}
	if len(b.decl.Sensitive) > 0 && !o.Sensitive {
		b.diags = append(b.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Output refers to sensitive values",
			Detail: fmt.Sprintf("The value of output %q is derived from a sensitive variable. To show that you mean to output it, add sensitive = true to the output block; rayform then prints it as %s.",
				it.name, SensitiveText),
			Subject: it.declRange.Ptr(),
		})
	}
	e.cfg.Outputs[it.name] = o
	return b.diags
}

// forEachKeys evaluates a for_each argument into sorted keys and the values
// each.value takes.
func (e *evaluator) forEachKeys(it *item) ([]string, map[string]cty.Value, hcl.Diagnostics) {
	expr := it.forEach.Expr
	val, diags := expr.Value(e.ctx())
	diags = redactSensitive(diags)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	bad := func(detail string) ([]string, map[string]cty.Value, hcl.Diagnostics) {
		return nil, nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid for_each argument",
			Detail:   detail,
			Subject:  expr.Range().Ptr(),
		})
	}
	if val.HasMark(Sensitive) || len(func() []cty.PathValueMarks { _, p := val.UnmarkDeepWithPaths(); return p }()) > 0 {
		return bad(fmt.Sprintf("Sensitive values cannot be used in for_each, because the keys become part of %s names shown in every plan. Use a value that is not sensitive.", it.kind))
	}
	switch {
	case val.IsNull():
		return bad("for_each must not be null; use a map, or a set of strings.")
	case !val.IsWhollyKnown():
		return bad("The for_each value depends on facts known only after observing the hosts. for_each must be known from the configuration alone.")
	}
	ty := val.Type()
	keys := []string{}
	values := map[string]cty.Value{}
	switch {
	case ty.IsMapType() || ty.IsObjectType():
		for it := val.ElementIterator(); it.Next(); {
			k, v := it.Element()
			keys = append(keys, k.AsString())
			values[k.AsString()] = v
		}
	case ty.IsSetType() && ty.ElementType() == cty.String:
		for it := val.ElementIterator(); it.Next(); {
			_, v := it.Element()
			if v.IsNull() {
				return bad("for_each sets must not contain null.")
			}
			keys = append(keys, v.AsString())
			values[v.AsString()] = v
		}
	case ty.IsSetType():
		return bad(fmt.Sprintf("for_each needs a map, or a set of strings; this is a set of %s.", ty.ElementType().FriendlyName()))
	case ty.IsListType() || ty.IsTupleType():
		return bad("for_each needs a map, or a set of strings; this is a list. Convert it with toset(...) if its elements are unique strings.")
	default:
		return bad(fmt.Sprintf("for_each needs a map, or a set of strings; this is a %s.", ty.FriendlyName()))
	}
	sort.Strings(keys)
	return keys, values, diags
}

// evalResource evaluates a block of a registered kind: one instance, or
// one per for_each key.
func (e *evaluator) evalResource(it *item, k *Kind) hcl.Diagnostics {
	if it.forEach == nil {
		val, diags := e.evalInstance(it, k, e.ctx(), "", false)
		if !diags.HasErrors() {
			e.setObject(it.kind, it.name, val)
		}
		return diags
	}
	keys, values, diags := e.forEachKeys(it)
	if diags.HasErrors() {
		return diags
	}
	objs := map[string]cty.Value{}
	var done []string
	for _, key := range keys {
		ctx := e.ctx().NewChild()
		ctx.Variables = map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{
			"key":   cty.StringVal(key),
			"value": values[key],
		})}
		val, more := e.evalInstance(it, k, ctx, key, true)
		diags = append(diags, more...)
		if !more.HasErrors() {
			objs[key] = val
			done = append(done, key)
		}
	}
	e.setObject(it.kind, it.name, objectOf(objs))
	e.keys[it.addr] = done
	return diags
}

// evalInstance evaluates one instance of a block of kind k: its arguments
// decoded by the schema into Decl.Args and the kind's Go value, the kind's
// Decode and Check, and its value as expressions see it (with the kind's
// Compute).
func (e *evaluator) evalInstance(it *item, k *Kind, ctx *hcl.EvalContext, key string, hasKey bool) (cty.Value, hcl.Diagnostics) {
	name := instanceName(it.name, key, hasKey)
	addr := it.kind + "." + name
	e.refEdges(it, addr)
	b := e.evalBlock(it, ctx, addr)
	b.name = name
	b.decodeArgs()
	for _, a := range k.Args {
		if a.Ref == "" {
			continue
		}
		for _, n := range refNames(b.decl.Args[a.Name]) {
			e.connect(addr, a.Ref+"."+n)
		}
	}
	v := k.New()
	b.fill(v, name, it.name, key)
	blk := &Block{b: b, value: v}
	if k.Decode != nil {
		k.Decode(blk)
	}
	if k.Check != nil {
		k.Check(blk)
	}
	*v.(Declarer).Declaration() = *b.decl
	if b.diags.HasErrors() {
		return cty.NilVal, b.diags
	}
	attrs := map[string]cty.Value{
		"id":   cty.StringVal(addr),
		"name": cty.StringVal(name),
	}
	if k.ForEach {
		attrs["key"] = cty.NullVal(cty.String)
		if hasKey {
			attrs["key"] = cty.StringVal(key)
		}
	}
	if k.Compute != nil {
		for n, val := range k.Compute(blk) {
			attrs[n] = val
		}
	}
	e.cfg.add(it.kind, name, v)
	return b.object(attrs), b.diags
}

// refNames are the names a decoded reference argument holds.
func refNames(v cty.Value) []string {
	switch {
	case v == cty.NilVal || v.IsNull() || !v.IsKnown():
		return nil
	case v.Type() == cty.String:
		return []string{v.AsString()}
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsKnown() && !e.IsNull() && e.Type() == cty.String {
			out = append(out, e.AsString())
		}
	}
	return out
}

// blockEval holds the evaluated arguments of one block instance.
type blockEval struct {
	e    *evaluator
	it   *item
	name string // the instance's name
	decl *Decl
	vals map[string]cty.Value // converted, with marks
	raw  map[string]cty.Value // converted, without marks
	// defaults are the values, with marks, of unset arguments that take
	// another argument's value ([Block.SetDefaultFrom]).
	defaults map[string]cty.Value
	diags    hcl.Diagnostics
}

// evalBlock evaluates and type-checks every argument of it that is set.
func (e *evaluator) evalBlock(it *item, ctx *hcl.EvalContext, addr string) *blockEval {
	b := &blockEval{
		e:        e,
		it:       it,
		decl:     &Decl{Addr: addr, DeclRange: it.declRange, AttrRanges: map[string]hcl.Range{}},
		vals:     map[string]cty.Value{},
		raw:      map[string]cty.Value{},
		defaults: map[string]cty.Value{},
	}
	for _, spec := range e.mod.args(it.kind) {
		if a, ok := it.attrs[spec.Name]; ok {
			b.evalArg(spec, a, ctx)
		}
	}
	sort.Strings(b.decl.Sensitive)
	sort.Strings(b.decl.Unknown)
	return b
}

// evalArg evaluates argument spec, set as a, and records its value (marked,
// and unmarked in raw) unless it failed, is null, or is left unknown.
func (b *blockEval) evalArg(spec Arg, a *hcl.Attribute, ctx *hcl.EvalContext) {
	b.decl.AttrRanges[spec.Name] = a.Expr.Range()
	val, ok := b.typedValue(spec, a, ctx)
	if !ok {
		return
	}
	val, unmarked, ok := b.placeSensitive(spec, val)
	if !ok || !b.placeUnknown(spec, unmarked) || unmarked.IsNull() {
		return
	}
	b.vals[spec.Name] = val
	b.raw[spec.Name] = unmarked
}

// typedValue evaluates a's expression and converts it to spec's type; it
// reports false for a failed or null value.
func (b *blockEval) typedValue(spec Arg, a *hcl.Attribute, ctx *hcl.EvalContext) (cty.Value, bool) {
	val, diags := a.Expr.Value(ctx)
	diags = redactSensitive(diags)
	b.diags = append(b.diags, diags...)
	if diags.HasErrors() || val.IsNull() {
		return cty.NilVal, false
	}
	if spec.Type == cty.DynamicPseudoType {
		return val, true
	}
	conv, err := convert.Convert(val, spec.Type)
	if err != nil {
		b.errorAt(spec.Name, "Incorrect attribute value type",
			fmt.Sprintf("Inappropriate value for attribute %q: %s.", spec.Name, errText(err)))
		return cty.NilVal, false
	}
	return conv, true
}

// placeSensitive records the paths of val that hold sensitive values, or
// refuses them where spec takes none (a collection that may be unknown
// goes on with the refused elements unknown), and refuses a map whose names
// are sensitive. It returns val, val unmarked, and whether to go on.
func (b *blockEval) placeSensitive(spec Arg, val cty.Value) (cty.Value, cty.Value, bool) {
	unmarked, pvm := val.UnmarkDeepWithPaths()
	var sensitive []string
	for _, pv := range pvm {
		if _, ok := pv.Marks[Sensitive]; ok {
			sensitive = append(sensitive, FormatPath(spec.Name, pv.Path))
		}
	}
	if len(sensitive) > 0 && !spec.MaySensitive && !spec.Sensitive {
		b.refuseSensitive(spec, sensitive)
		if !spec.UnknownOK || !unmarked.CanIterateElements() {
			return val, unmarked, false
		}
		// The kind's checks still see the rest of a collection that may
		// hold unknown elements (the other words of extra_args), the
		// refused elements as unknown.
		unmarked = withoutSensitive(val)
		val = unmarked
		b.decl.Unknown = append(b.decl.Unknown, sensitive...)
		sensitive = nil
	}
	if b.it.kind != kindOutput && slices.Contains(sensitive, spec.Name) && (unmarked.Type().IsMapType() || unmarked.Type().IsObjectType()) {
		// The map itself is marked: its names derive from a sensitive
		// value, and a map's names are shown and sent as they are.
		b.errorAt(spec.Name, "Sensitive names in "+spec.Name,
			fmt.Sprintf("The names in %s are derived from a sensitive value (the whole map is sensitive), but only its values may be: rayform shows the names in plans and passes them on command lines. Write the names out, e.g. %s = { HF_TOKEN = var.hf_token }, or for a sensitive map, %s = { HF_TOKEN = var.secrets[\"HF_TOKEN\"] }.",
				spec.Name, spec.Name, spec.Name))
		return val, unmarked, false
	}
	b.decl.Sensitive = append(b.decl.Sensitive, sensitive...)
	return val, unmarked, true
}

// placeUnknown records the unknown paths of a value not wholly known and
// reports whether to record the value: without variable values such an
// argument is unknown (checked as if not set); otherwise only an argument
// that may be unknown (or a reference) may hold one.
func (b *blockEval) placeUnknown(spec Arg, unmarked cty.Value) bool {
	if spec.Ref != "" || unmarked.IsWhollyKnown() {
		return true
	}
	if !spec.UnknownOK && b.e.mod.unknownVars {
		// Checking without variable values: an argument that depends
		// on one is unknown, and checked as if it were not set.
		b.decl.Unknown = append(b.decl.Unknown, spec.Name)
		return false
	}
	if !spec.UnknownOK {
		b.errorAt(spec.Name, "Value not known before observing the hosts",
			fmt.Sprintf("The value of %s depends on facts rayform learns only by observing the hosts (such as fabric addresses), but it must be known from the configuration alone.", spec.Name))
		return false
	}
	b.decl.Unknown = append(b.decl.Unknown, unknownPaths(spec.Name, unmarked)...)
	return true
}

// refuseSensitive reports that argument spec, which must not hold a
// secret, holds values derived from a sensitive one at paths: where the
// value would go, and which arguments of the block type take secrets.
// It names the paths, never the values.
func (b *blockEval) refuseSensitive(spec Arg, paths []string) {
	sort.Strings(paths)
	paths = slices.Compact(paths)
	what := paths[0] + " is"
	if len(paths) > 1 {
		what = strings.Join(paths, ", ") + " are"
	}
	exposure := spec.Exposure
	if exposure == "" {
		exposure = "rayform's plans and messages and the commands it runs on the hosts, as it is"
	}
	var takers []string
	for _, a := range b.e.mod.args(b.it.kind) {
		if a.MaySensitive || a.Sensitive {
			takers = append(takers, a.Name)
		}
	}
	hint := "Use a value that does not derive from a sensitive variable."
	switch {
	case b.it.kind == kindOutput:
		hint = "Only an output's value may be sensitive (with sensitive = true)."
	case len(takers) > 0:
		hint = fmt.Sprintf("Only %s of a %s may hold sensitive values: rayform keeps those off command lines, names and labels.",
			strings.Join(takers, " and "), b.e.mod.noun(b.it.kind))
	}
	b.errorAt(spec.Name, "Sensitive value in "+spec.Name,
		fmt.Sprintf("%s derived from a sensitive value, but the value of %s reaches %s. %s", what, spec.Name, exposure, hint))
}

// withoutSensitive is v, unmarked, with every value marked sensitive
// replaced by an unknown value of its type.
func withoutSensitive(v cty.Value) cty.Value {
	out, _ := cty.Transform(v, func(_ cty.Path, ev cty.Value) (cty.Value, error) {
		if ev.HasMark(Sensitive) {
			return cty.UnknownVal(ev.Type()), nil
		}
		return ev, nil
	})
	out, _ = out.UnmarkDeep()
	return out
}
