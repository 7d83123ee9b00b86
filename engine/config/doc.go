// Package config loads, checks and evaluates rayform's configuration
// language: HCL files (native or JSON syntax) declaring variables, locals,
// outputs and resource blocks (nodes, networks, Ray clusters, vLLM
// servers).
//
// The resource block types are not this package's: each is a [Kind]
// registered by the caller in [Options.Kinds] (resources.Kinds()), which
// declares its arguments as data ([Arg]: type, default, range, exported,
// forces replacement, sensitive, description) and its own checks
// ([Kind.Check] for one block, [Kind.Validate] for the rules between
// blocks). Decoding, range checks, defaults, reference arguments, the
// block types the parser accepts, reference roots and exported attributes
// follow from the registered kinds. This package still decodes the four kinds into their
// Go structs ([Node], [Network], [RayCluster], [VLLMServe]) and computes
// their exported values.
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
//	                block into its Go struct; check values and cross-block
//	                rules
//
// Values known only after observing the hosts (each node's fabric address,
// and the cluster addresses and endpoints derived from it) evaluate to
// unknown values first; [Config.WithFacts] evaluates again with the observed
// addresses and yields known values. Sensitive values are tracked with the
// [Sensitive] cty mark and recorded per attribute path on every block.
//
// Edges in [Config.Graph] point from a block to what it depends on.
package config
