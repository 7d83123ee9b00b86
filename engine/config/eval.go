package config

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strconv"
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
	allBastion := true
	for i := 0; i+1 < len(cycle); i++ {
		from, to := m.items[cycle[i]], cycle[i+1]
		for _, ref := range from.refs {
			if ref.addr != to {
				continue
			}
			if subject == nil {
				subject = ref.rng.Ptr()
			}
			if from.kind != kindNode || ref.attr != "bastion" {
				allBastion = false
			}
			hops = append(hops, fmt.Sprintf("%s's %s refers to %s", from.addr, ref.attr, to))
			break
		}
	}
	path := strings.Join(cycle, " -> ")
	if allBastion {
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Bastion cycle",
			Detail: fmt.Sprintf("The bastions of these nodes form a loop: %s. A chain of SSH jumps must end at a node rayform can reach directly; remove the bastion argument from one of them.",
				path),
			Subject: subject,
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

// evaluate evaluates the module twice: first with every network's addresses
// unknown, to learn which nodes each network serves (its clusters' nodes),
// then with each network's addresses keyed by those nodes and known where
// facts supply them. Cross-block checks run between the passes.
func evaluate(mod *module, vars map[string]cty.Value, varDecls map[string]*Variable, facts Facts) (*Config, hcl.Diagnostics) {
	first := newEvaluator(mod, vars, varDecls, facts, nil)
	cfg, diags := first.run()
	if diags.HasErrors() {
		return cfg, diags
	}
	cross := mod.validateConfig(cfg)
	if cross.HasErrors() {
		return cfg, append(diags, cross...)
	}
	second := newEvaluator(mod, vars, varDecls, facts, networkMembers(cfg))
	second.known = cfg.Nodes
	cfg, diags = second.run()
	return cfg, append(diags, cross...)
}

// networkMembers maps each network to the sorted nodes of its clusters.
func networkMembers(cfg *Config) map[string][]string {
	out := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Networks)) {
		out[name] = []string{}
	}
	for _, rc := range cfg.RayClusters {
		if rc.Network != "" {
			out[rc.Network] = append(out[rc.Network], rc.Nodes()...)
		}
	}
	for _, nodes := range out {
		sort.Strings(nodes)
	}
	return out
}

// evaluator evaluates the items of a module in dependency order, building
// the evaluation context from the values computed so far.
type evaluator struct {
	mod     *module
	vars    map[string]cty.Value
	facts   Facts
	members map[string][]string // nil in the first pass
	// known are the first pass's nodes (nil in the first pass): their
	// for_each keys and fabric_interface, for the networks' interfaces.
	known map[string]*Node
	funcs map[string]function.Function
	cfg   *Config

	// locals are the local values by name, as expressions see them.
	locals map[string]cty.Value
	// objects are the blocks' values by kind and name, as expressions see
	// them.
	objects map[string]map[string]cty.Value
	// instances lists each node block's instance names, sorted.
	instances map[string][]string
	failed    map[string]bool // block-level addresses that failed
	edges     map[string]map[string]bool
}

func newEvaluator(mod *module, vars map[string]cty.Value, varDecls map[string]*Variable, facts Facts, members map[string][]string) *evaluator {
	return &evaluator{
		mod:     mod,
		vars:    vars,
		facts:   facts,
		members: members,
		funcs:   Functions(mod.baseDir),
		cfg: &Config{
			Variables:    varDecls,
			Locals:       map[string]*Local{},
			Nodes:        map[string]*Node{},
			Networks:     map[string]*Network{},
			RayClusters:  map[string]*RayCluster{},
			Serves:       map[string]*VLLMServe{},
			Outputs:      map[string]*Output{},
			Facts:        facts,
			Project:      mod.project,
			ProjectRange: mod.projectRange,
			mod:          mod,
			vars:         vars,
		},
		locals:    map[string]cty.Value{},
		objects:   map[string]map[string]cty.Value{},
		instances: map[string][]string{},
		failed:    map[string]bool{},
		edges:     map[string]map[string]bool{},
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
			case kindNode:
				more = e.evalNode(it)
			case kindNetwork:
				more = e.evalNetwork(it)
			case kindRayCluster:
				more = e.evalRayCluster(it)
			case kindVLLMServe:
				more = e.evalServe(it)
			case kindOutput:
				more = e.evalOutput(it)
			default:
				more = hcl.Diagnostics{{
					Severity: hcl.DiagError,
					Summary:  "Unsupported resource kind",
					Detail:   fmt.Sprintf("The block type %q is registered, but this version of rayform cannot evaluate it.", it.kind),
					Subject:  it.declRange.Ptr(),
				}}
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
// instances the node block produced.
func (e *evaluator) checkInstanceRefs(it *item) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, ref := range it.refs {
		if ref.kind != kindNode || !ref.hasKey {
			continue
		}
		block := strings.TrimPrefix(ref.addr, "node.")
		name := instanceName(block, ref.key, true)
		if _, ok := e.cfg.Nodes[name]; ok {
			continue
		}
		var keys []string
		for _, inst := range e.instances[block] {
			keys = append(keys, e.cfg.Nodes[inst].Key)
		}
		detail := fmt.Sprintf("node.%s has no instance with the key %q; its for_each produced %s.", block, ref.key, describeKeys(keys))
		detail += didYouMean(ref.key, keys, "node."+block+"[%q]")
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Reference to undeclared node instance",
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
		if ref.kind != kindNode {
			e.connect(from, ref.addr)
			continue
		}
		block := strings.TrimPrefix(ref.addr, "node.")
		if ref.hasKey {
			e.connect(from, "node."+instanceName(block, ref.key, true))
			continue
		}
		if e.mod.items[ref.addr].forEach == nil {
			e.connect(from, ref.addr)
			continue
		}
		for _, inst := range e.instances[block] {
			e.connect(from, "node."+inst)
		}
	}
}

// finishGraph stores each block's dependencies on its Decl.
func (e *evaluator) finishGraph() {
	e.cfg.edges = e.edges
	deps := func(addr string) []string {
		out := slices.Sorted(maps.Keys(e.edges[addr]))
		if len(out) == 0 {
			return nil
		}
		return out
	}
	for _, n := range e.cfg.Nodes {
		n.DependsOn = deps(n.Addr)
	}
	for _, n := range e.cfg.Networks {
		n.DependsOn = deps(n.Addr)
	}
	for _, r := range e.cfg.RayClusters {
		r.DependsOn = deps(r.Addr)
	}
	for _, s := range e.cfg.Serves {
		s.DependsOn = deps(s.Addr)
	}
}

func (e *evaluator) evalLocal(it *item) hcl.Diagnostics {
	e.refEdges(it, it.addr)
	a := it.attrs[it.name]
	val, diags := a.Expr.Value(e.ctx())
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
		return bad("Sensitive values cannot be used in for_each, because the keys become part of node names shown in every plan. Use a value that is not sensitive.")
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

func (e *evaluator) evalNode(it *item) hcl.Diagnostics {
	if it.forEach == nil {
		val, diags := e.evalNodeInstance(it, e.ctx(), "", false)
		if !diags.HasErrors() {
			e.setObject(kindNode, it.name, val)
			e.instances[it.name] = []string{it.name}
		}
		return diags
	}
	keys, values, diags := e.forEachKeys(it)
	if diags.HasErrors() {
		return diags
	}
	objs := map[string]cty.Value{}
	names := []string{}
	for _, k := range keys {
		ctx := e.ctx().NewChild()
		ctx.Variables = map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{
			"key":   cty.StringVal(k),
			"value": values[k],
		})}
		val, more := e.evalNodeInstance(it, ctx, k, true)
		diags = append(diags, more...)
		if !more.HasErrors() {
			objs[k] = val
			names = append(names, instanceName(it.name, k, true))
		}
	}
	e.setObject(kindNode, it.name, objectOf(objs))
	e.instances[it.name] = names
	return diags
}

func (e *evaluator) evalNodeInstance(it *item, ctx *hcl.EvalContext, key string, hasKey bool) (cty.Value, hcl.Diagnostics) {
	name := instanceName(it.name, key, hasKey)
	addr := "node." + name
	e.refEdges(it, addr)
	b := e.evalBlock(it, ctx, addr)
	n := &Node{
		Name:         name,
		Block:        it.name,
		Key:          key,
		Host:         b.str("host"),
		User:         b.str("user"),
		Port:         b.integer("port"),
		IdentityFile: b.str("identity_file"),
		Bastion:      b.nodeRef("bastion"),
		GPUs:         b.integer("gpus"),
		Labels:       b.strMap("labels"),
	}
	n.FabricInterface = b.str("fabric_interface")
	if _, ok := b.raw["fabric_interface"]; ok {
		if msg := checkIfname(n.FabricInterface); msg != "" {
			b.errorAt("fabric_interface", "Invalid interface name", fmt.Sprintf("%q %s.", n.FabricInterface, msg))
		}
	}
	if n.Bastion != "" && n.Bastion == name {
		b.errorAt("bastion", "Bastion cycle", fmt.Sprintf("Node %s names itself as its bastion. Remove the bastion argument, or name another node to jump through.", name))
	}
	if n.Bastion != "" {
		e.connect(addr, "node."+n.Bastion)
	}
	b.decodeRest()
	b.check(n)
	n.Decl = *b.decl
	if b.diags.HasErrors() {
		return cty.NilVal, b.diags
	}
	e.cfg.Nodes[name] = n
	keyVal := cty.NullVal(cty.String)
	if hasKey {
		keyVal = cty.StringVal(key)
	}
	bastion := cty.NullVal(cty.String)
	if n.Bastion != "" {
		bastion = cty.StringVal(n.Bastion)
	}
	return b.object(map[string]cty.Value{
		"id":            cty.StringVal(addr),
		"name":          cty.StringVal(name),
		"key":           keyVal,
		"host":          b.export("host", cty.String),
		"user":          b.export("user", cty.String),
		"port":          b.export("port", cty.Number),
		"identity_file": b.export("identity_file", cty.String),
		"gpus":          b.exportOr("gpus", cty.NumberIntVal(int64(n.GPUs))),
		"labels":        b.export("labels", cty.Map(cty.String)),
		"bastion":       bastion,
	}), b.diags
}

func (e *evaluator) evalNetwork(it *item) hcl.Diagnostics {
	addr := it.addr
	e.refEdges(it, addr)
	b := e.evalBlock(it, e.ctx(), addr)
	n := &Network{
		Name:  it.name,
		IBHCA: b.strList("ib_hca"),
		MTU:   b.integer("mtu"),
	}
	if s, ok := b.raw["cidr"]; ok {
		p, err := netip.ParsePrefix(s.AsString())
		switch {
		case err != nil:
			why := errText(err)
			if _, after, ok := strings.Cut(why, "): "); ok {
				why = after
			}
			b.errorAt("cidr", "Invalid CIDR", fmt.Sprintf("%q is not a CIDR prefix: %s. Write the fabric subnet as ADDRESS/BITS, like \"192.168.200.0/24\".",
				s.AsString(), why))
		case p != p.Masked():
			b.errorAt("cidr", "CIDR has host bits set", fmt.Sprintf("%s has bits set after the prefix length, so it is an address, not a network. The network is %s; write cidr = %q.",
				p, p.Masked(), p.Masked().String()))
		default:
			n.CIDR = p
		}
	}
	b.decodeInterface(n, e.members[it.name], e.members != nil)
	if e.members != nil {
		b.foldNodeInterfaces(n, e.members[it.name], e.known)
	}
	b.decodeRest()
	b.check(n)
	n.Decl = *b.decl
	if b.diags.HasErrors() {
		return b.diags
	}
	addresses := cty.UnknownVal(cty.Map(cty.String)).RefineNotNull()
	if e.members != nil {
		n.Nodes = e.members[it.name]
		n.Addresses = map[string]netip.Addr{}
		m := map[string]cty.Value{}
		for _, node := range n.Nodes {
			if a, ok := e.facts.FabricAddrs[node]; ok && a.IsValid() {
				n.Addresses[node] = a
				m[node] = cty.StringVal(a.String())
			} else {
				m[node] = cty.UnknownVal(cty.String).RefineNotNull()
			}
		}
		addresses = cty.MapValEmpty(cty.String)
		if len(m) > 0 {
			addresses = cty.MapVal(m)
		}
	}
	e.cfg.Networks[it.name] = n
	e.setObject(kindNetwork, it.name, b.object(map[string]cty.Value{
		"id":        cty.StringVal(addr),
		"name":      cty.StringVal(it.name),
		"cidr":      b.export("cidr", cty.String),
		"interface": b.export("interface", cty.DynamicPseudoType),
		"ib_hca":    b.export("ib_hca", cty.List(cty.String)),
		"mtu":       b.export("mtu", cty.Number),
		"addresses": addresses,
	}))
	return b.diags
}

func (e *evaluator) evalRayCluster(it *item) hcl.Diagnostics {
	addr := it.addr
	e.refEdges(it, addr)
	b := e.evalBlock(it, e.ctx(), addr)
	rc := &RayCluster{
		Name:           it.name,
		Image:          b.str("image"),
		Head:           b.nodeRef("head"),
		Workers:        b.nodeRefs("workers"),
		Network:        b.blockRef("network", b.spec("network").Ref),
		Port:           b.integer("port"),
		DashboardPort:  b.integer("dashboard_port"),
		MemoryMonitor:  b.boolean("memory_monitor"),
		DataplaneCheck: b.boolean("dataplane_check"),
		ShmSize:        b.str("shm_size"),
		Env:            b.strMap("env"),
		Volumes:        b.strList("volumes"),
		DockerArgs:     b.strList("docker_args"),
		ContainerName:  b.strOr("container_name", "rayform-"+it.name),
	}
	for _, n := range append([]string{rc.Head}, rc.Workers...) {
		if n != "" {
			e.connect(addr, "node."+n)
		}
	}
	if rc.Network != "" {
		e.connect(addr, "network."+rc.Network)
	}
	b.decodeRest()
	b.check(rc)
	rc.Decl = *b.decl
	if b.diags.HasErrors() {
		return b.diags
	}
	rc.HeadAddress = e.facts.FabricAddrs[rc.Head]
	e.cfg.RayClusters[it.name] = rc
	address := cty.UnknownVal(cty.String).RefineNotNull()
	headIP := address
	dashboard := address
	if a, ok := rc.Address(); ok {
		address = cty.StringVal(a)
		headIP = cty.StringVal(rc.HeadAddress.String())
		dashboard = cty.StringVal("http://" + netip.AddrPortFrom(rc.HeadAddress, uint16(rc.DashboardPort)).String())
	}
	workers := cty.ListValEmpty(cty.String)
	if len(rc.Workers) > 0 {
		ws := make([]cty.Value, len(rc.Workers))
		for i, w := range rc.Workers {
			ws[i] = cty.StringVal(w)
		}
		workers = cty.ListVal(ws)
	}
	e.setObject(kindRayCluster, it.name, b.object(map[string]cty.Value{
		"id":             cty.StringVal(addr),
		"name":           cty.StringVal(it.name),
		"image":          b.export("image", cty.String),
		"head":           cty.StringVal(rc.Head),
		"workers":        workers,
		"network":        cty.StringVal(rc.Network),
		"port":           cty.NumberIntVal(int64(rc.Port)),
		"dashboard_port": cty.NumberIntVal(int64(rc.DashboardPort)),
		"container_name": b.exportOr("container_name", cty.StringVal(rc.ContainerName)),
		"address":        address,
		"head_ip":        headIP,
		"dashboard_url":  dashboard,
	}))
	return b.diags
}

func (e *evaluator) evalServe(it *item) hcl.Diagnostics {
	addr := it.addr
	e.refEdges(it, addr)
	b := e.evalBlock(it, e.ctx(), addr)
	s := &VLLMServe{
		Name:                 it.name,
		Cluster:              b.blockRef("cluster", b.spec("cluster").Ref),
		Model:                b.str("model"),
		TensorParallelSize:   b.integer("tensor_parallel_size"),
		PipelineParallelSize: b.integer("pipeline_parallel_size"),
		GPUMemoryUtilization: b.float("gpu_memory_utilization"),
		MaxModelLen:          b.integer("max_model_len"),
		Port:                 b.integer("port"),
		Env:                  b.strMap("env"),
		ExtraArgs:            b.strList("extra_args"),
		APIKey:               b.str("api_key"),
		ReadyTimeout:         b.duration("ready_timeout"),
	}
	s.ServedModelName = b.strOr("served_model_name", s.Model)
	if s.Cluster != "" {
		e.connect(addr, "ray_cluster."+s.Cluster)
	}
	b.decodeRest()
	b.check(s)
	s.Decl = *b.decl
	if b.diags.HasErrors() {
		return b.diags
	}
	endpoint := cty.UnknownVal(cty.String).RefineNotNull()
	if rc := e.cfg.RayClusters[s.Cluster]; rc != nil && rc.HeadAddress.IsValid() {
		s.Endpoint = "http://" + netip.AddrPortFrom(rc.HeadAddress, uint16(s.Port)).String() + "/v1"
		endpoint = cty.StringVal(s.Endpoint)
	}
	// The same port on the head's SSH address: what the operator's machine
	// can usually reach (vLLM listens on every address of the host).
	publicEndpoint := cty.UnknownVal(cty.String).RefineNotNull()
	if rc := e.cfg.RayClusters[s.Cluster]; rc != nil {
		if head := e.cfg.Nodes[rc.Head]; head != nil && head.Host != "" && !head.IsUnknown("host") {
			host := head.Host
			if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
				host = "[" + host + "]"
			}
			s.PublicEndpoint = "http://" + host + ":" + strconv.Itoa(s.Port) + "/v1"
			publicEndpoint = cty.StringVal(s.PublicEndpoint)
		}
	}
	e.cfg.Serves[it.name] = s
	e.setObject(kindVLLMServe, it.name, b.object(map[string]cty.Value{
		"id":                     cty.StringVal(addr),
		"name":                   cty.StringVal(it.name),
		"cluster":                cty.StringVal(s.Cluster),
		"model":                  b.export("model", cty.String),
		"served_model_name":      b.exportOr("served_model_name", b.export("model", cty.String)),
		"port":                   cty.NumberIntVal(int64(s.Port)),
		"tensor_parallel_size":   cty.NumberIntVal(int64(s.TensorParallelSize)),
		"pipeline_parallel_size": cty.NumberIntVal(int64(s.PipelineParallelSize)),
		"endpoint":               endpoint,
		"public_endpoint":        publicEndpoint,
	}))
	return b.diags
}

// blockEval holds the evaluated arguments of one block instance.
type blockEval struct {
	e     *evaluator
	it    *item
	decl  *Decl
	vals  map[string]cty.Value // converted, with marks
	raw   map[string]cty.Value // converted, without marks
	diags hcl.Diagnostics
}

// evalBlock evaluates and type-checks every argument of it that is set.
func (e *evaluator) evalBlock(it *item, ctx *hcl.EvalContext, addr string) *blockEval {
	b := &blockEval{
		e:    e,
		it:   it,
		decl: &Decl{Addr: addr, DeclRange: it.declRange, AttrRanges: map[string]hcl.Range{}},
		vals: map[string]cty.Value{},
		raw:  map[string]cty.Value{},
	}
	for _, spec := range e.mod.args(it.kind) {
		a, ok := it.attrs[spec.Name]
		if !ok {
			continue
		}
		b.decl.AttrRanges[spec.Name] = a.Expr.Range()
		val, diags := a.Expr.Value(ctx)
		b.diags = append(b.diags, diags...)
		if diags.HasErrors() || val.IsNull() {
			continue
		}
		if spec.Type != cty.DynamicPseudoType {
			conv, err := convert.Convert(val, spec.Type)
			if err != nil {
				b.errorAt(spec.Name, "Incorrect attribute value type",
					fmt.Sprintf("Inappropriate value for attribute %q: %s.", spec.Name, errText(err)))
				continue
			}
			val = conv
		}
		unmarked, pvm := val.UnmarkDeepWithPaths()
		for _, pv := range pvm {
			if _, ok := pv.Marks[Sensitive]; ok {
				b.decl.Sensitive = append(b.decl.Sensitive, FormatPath(spec.Name, pv.Path))
			}
		}
		if spec.Ref == "" && !unmarked.IsWhollyKnown() && !spec.UnknownOK && e.mod.unknownVars {
			// Checking without variable values: an argument that depends
			// on one is unknown, and checked as if it were not set.
			b.decl.Unknown = append(b.decl.Unknown, spec.Name)
			continue
		}
		if spec.Ref == "" && !unmarked.IsWhollyKnown() {
			if !spec.UnknownOK {
				b.errorAt(spec.Name, "Value not known before observing the hosts",
					fmt.Sprintf("The value of %s depends on facts rayform learns only by observing the hosts (such as fabric addresses), but it must be known from the configuration alone.", spec.Name))
				continue
			}
			b.decl.Unknown = append(b.decl.Unknown, unknownPaths(spec.Name, unmarked)...)
		}
		if unmarked.IsNull() {
			continue
		}
		b.vals[spec.Name] = val
		b.raw[spec.Name] = unmarked
	}
	sort.Strings(b.decl.Sensitive)
	sort.Strings(b.decl.Unknown)
	return b
}
