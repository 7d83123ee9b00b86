// Package config loads, checks and evaluates rayform's configuration
// language: HCL files (native or JSON syntax) declaring variables, locals,
// outputs and resource blocks.
//
// The resource block types are not this package's, and it knows none by
// name: each is a [Kind] registered by the caller in [Options.Kinds]
// (resources.Kinds().Schemas(): node, network, ray_cluster, vllm_serve), which
// declares its arguments as data ([Arg]: type, default, range, exported,
// reference target, forces replacement, sensitive, description), its Go
// type ([Kind.New], filled through `rayform:"ARG"` struct tags) and its
// hooks: [Kind.Decode] for what tags cannot express, [Kind.Check] for one
// block, [Kind.Compute] for its computed attributes, [Kind.Validate] for
// the rules between blocks. Decoding, range checks, defaults, reference
// arguments and the graph edges they make, for_each instances, the block
// types the parser accepts, reference roots and the values expressions see
// follow from the registered kinds. The evaluated blocks are in
// [Config.Blocks]; each kind reads them as its Go values (kind.BlocksOf).
//
// The pipeline, one function per step:
//
//	LoadFiles/Load  parse every *.hcl and *.hcl.json file, decode each block's
//	                structure (unknown or missing arguments, duplicate names)
//	analyze         find every reference in every expression; check that it
//	                names something declared ("did you mean" otherwise)
//	orderItems      order blocks by their references; report cycles
//	resolve vars    defaults < RAYFORM_VAR_<name> < -var/-var-file in order;
//	                run validation rules; mark sensitive values
//	evaluate        evaluate blocks in dependency order with a fresh
//	                hcl.EvalContext holding the values so far; decode each
//	                block into its kind's Go value; run the kind's hooks;
//	                then the cross-block rules, and a second pass that sees
//	                the first's result (Block.Prior)
//
// Values known only after observing the hosts (each node's fabric address,
// and the cluster addresses and endpoints derived from it) evaluate to
// unknown values first; [Config.WithFacts] evaluates again with the observed
// addresses and yields known values. Sensitive values are tracked with the
// [Sensitive] cty mark, which every expression and function of the library
// carries to what it derives ([Functions]: try and can included), and
// recorded per attribute path on every block. An argument that is neither
// [Arg.MaySensitive] nor [Arg.Sensitive] refuses a sensitive value
// anywhere in it, at its range, saying where it would go ([Arg.Exposure]);
// no diagnostic quotes a sensitive value.
//
// Edges in [Config.Graph] point from a block to what it depends on.
package config
