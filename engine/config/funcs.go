package config

import (
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/customdecode"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// Functions returns the function library available in expressions. file
// reads paths relative to baseDir. The set is deliberately small; the README's
// HCL reference lists every function.
func Functions(baseDir string) map[string]function.Function {
	return map[string]function.Function{
		// strings
		"format":     stdlib.FormatFunc,
		"formatlist": stdlib.FormatListFunc,
		"join":       stdlib.JoinFunc,
		"split":      stdlib.SplitFunc,
		"lower":      stdlib.LowerFunc,
		"upper":      stdlib.UpperFunc,
		"replace":    stdlib.ReplaceFunc,
		"trimspace":  stdlib.TrimSpaceFunc,
		"trimprefix": stdlib.TrimPrefixFunc,
		"trimsuffix": stdlib.TrimSuffixFunc,
		"substr":     stdlib.SubstrFunc,
		// collections
		"concat":   stdlib.ConcatFunc,
		"merge":    stdlib.MergeFunc,
		"lookup":   stdlib.LookupFunc,
		"length":   lengthFunc(),
		"keys":     stdlib.KeysFunc,
		"values":   stdlib.ValuesFunc,
		"contains": stdlib.ContainsFunc,
		"element":  stdlib.ElementFunc,
		"flatten":  stdlib.FlattenFunc,
		"distinct": stdlib.DistinctFunc,
		"range":    stdlib.RangeFunc,
		"zipmap":   stdlib.ZipmapFunc,
		"coalesce": stdlib.CoalesceFunc,
		"sort":     stdlib.SortFunc,
		// numbers
		"min":   stdlib.MinFunc,
		"max":   stdlib.MaxFunc,
		"abs":   stdlib.AbsoluteFunc,
		"ceil":  stdlib.CeilFunc,
		"floor": stdlib.FloorFunc,
		// conversion
		"tostring": stdlib.MakeToFunc(cty.String),
		"tonumber": stdlib.MakeToFunc(cty.Number),
		"tobool":   stdlib.MakeToFunc(cty.Bool),
		"tolist":   stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)),
		"toset":    stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)),
		"tomap":    stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		// encoding, files, networks
		"jsonencode": stdlib.JSONEncodeFunc,
		"jsondecode": stdlib.JSONDecodeFunc,
		"file":       fileFunc(baseDir),
		"cidrhost":   cidrHostFunc(),
		// error handling
		"can": markedTry(tryfunc.CanFunc),
		"try": markedTry(tryfunc.TryFunc),
	}
}

// functionNames lists the library's names in order, for the README test.
func functionNames() []string {
	fns := Functions("")
	names := make([]string, 0, len(fns))
	for n := range fns {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lengthFunc extends stdlib's length to strings (in characters) and objects
// (in attributes), as Terraform's does.
func lengthFunc() function.Function {
	return function.New(&function.Spec{
		Description: "Returns the number of elements of a list, set, map, tuple or object, or the number of characters of a string.",
		Params: []function.Parameter{{
			Name:             "value",
			Type:             cty.DynamicPseudoType,
			AllowDynamicType: true,
			AllowUnknown:     true,
			AllowMarked:      true,
		}},
		Type: func(args []cty.Value) (cty.Type, error) {
			ty := args[0].Type()
			switch {
			case ty == cty.String, ty.IsObjectType(), ty.IsTupleType(), ty.IsListType(), ty.IsMapType(), ty.IsSetType(), ty == cty.DynamicPseudoType:
				return cty.Number, nil
			}
			return cty.NilType, function.NewArgErrorf(0, "argument must be a string, a collection or a structural type")
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			v, marks := args[0].Unmark()
			ty := v.Type()
			switch {
			case !v.IsKnown():
				return cty.UnknownVal(cty.Number).WithMarks(marks), nil
			case v.IsNull():
				return cty.NilVal, function.NewArgErrorf(0, "argument must not be null")
			case ty == cty.String:
				return cty.NumberIntVal(int64(utf8.RuneCountInString(v.AsString()))).WithMarks(marks), nil
			case ty.IsObjectType():
				return cty.NumberIntVal(int64(len(ty.AttributeTypes()))).WithMarks(marks), nil
			}
			return v.Length().WithMarks(marks), nil
		},
	})
}

// maxFileSize bounds what file() reads.
const maxFileSize = 16 << 20

// fileFunc returns file(path): the contents of a UTF-8 file, relative paths
// resolved against baseDir.
func fileFunc(baseDir string) function.Function {
	return function.New(&function.Spec{
		Description: "Reads the contents of a file, relative to the configuration directory, as a UTF-8 string.",
		Params:      []function.Parameter{{Name: "path", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			if !filepath.IsAbs(p) {
				p = filepath.Join(baseDir, p)
			}
			fi, err := os.Stat(p)
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "cannot read file: %v", err)
			}
			if !fi.Mode().IsRegular() || fi.Size() > maxFileSize {
				return cty.NilVal, function.NewArgErrorf(0, "%s is not a regular file of at most %d bytes", p, maxFileSize)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "cannot read file: %v", err)
			}
			if !utf8.Valid(b) {
				return cty.NilVal, function.NewArgErrorf(0, "%s is not valid UTF-8", p)
			}
			return cty.StringVal(string(b)), nil
		},
	})
}

// cidrHostFunc is cidrhost(prefix, hostnum): the address of host number
// hostnum in prefix; negative numbers count back from the end of the range.
func cidrHostFunc() function.Function {
	return function.New(&function.Spec{
		Description: "Returns the IP address of the given host number within a CIDR prefix; negative numbers count from the end.",
		Params: []function.Parameter{
			{Name: "prefix", Type: cty.String},
			{Name: "hostnum", Type: cty.Number},
		},
		Type: function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p, err := netip.ParsePrefix(args[0].AsString())
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "invalid CIDR prefix: %v", err)
			}
			bf := args[1].AsBigFloat()
			if !bf.IsInt() {
				return cty.NilVal, function.NewArgErrorf(1, "host number must be a whole number")
			}
			n, _ := bf.Int(nil)
			addr, err := cidrHost(p, n)
			if err != nil {
				return cty.NilVal, function.NewArgError(1, err)
			}
			return cty.StringVal(addr.String()), nil
		},
	})
}

// cidrHost computes the address of host number n in p.
func cidrHost(p netip.Prefix, n *big.Int) (netip.Addr, error) {
	p = p.Masked()
	bits := p.Addr().BitLen()
	hostBits := uint(bits - p.Bits())
	size := new(big.Int).Lsh(big.NewInt(1), hostBits)
	if n.Sign() < 0 {
		n = new(big.Int).Add(size, n)
	}
	if n.Sign() < 0 || n.Cmp(size) >= 0 {
		return netip.Addr{}, fmt.Errorf("prefix %s has only %s addresses; host number is out of range", p, size)
	}
	base := new(big.Int).SetBytes(p.Addr().AsSlice())
	sum := new(big.Int).Add(base, n).Bytes()
	buf := make([]byte, bits/8)
	copy(buf[len(buf)-len(sum):], sum)
	addr, ok := netip.AddrFromSlice(buf)
	if !ok {
		return netip.Addr{}, fmt.Errorf("cannot form an address from prefix %s", p)
	}
	return addr, nil
}

// markedTry wraps try or can so that their result carries the marks of
// every value their expressions refer to. The library's versions return
// the value of the first expression that succeeds, or whether it
// succeeded, without the marks of the expressions that failed, though
// which one fails can depend on a sensitive value: can(local.m[var.token])
// tells whether the token is a key of m, try(var.tokens[5], "x") how many
// tokens there are. Marks are taken from the values each expression's
// references resolve to (as far as they resolve), which is conservative:
// it may mark a result that did not depend on a marked value's content.
func markedTry(f function.Function) function.Function {
	return function.New(&function.Spec{
		Description: f.Description(),
		Params:      f.Params(),
		VarParam:    f.VarParam(),
		// try's type is that of the expression that succeeds.
		Type: func(args []cty.Value) (cty.Type, error) {
			v, err := f.Call(args)
			if err != nil {
				return cty.NilType, err
			}
			return v.Type(), nil
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			v, err := f.Call(args)
			if err != nil {
				return v, err
			}
			return v.WithMarks(referencedMarks(args)), nil
		},
	})
}

// referencedMarks collects the marks, at any depth, of the values the
// expression closures in args refer to: each reference resolved as far
// as it resolves (var.tokens[5] to var.tokens when it has no 6th
// element).
func referencedMarks(args []cty.Value) cty.ValueMarks {
	marks := cty.ValueMarks{}
	for _, a := range args {
		if a.Type() != customdecode.ExpressionClosureType {
			continue
		}
		c := customdecode.ExpressionClosureFromVal(a)
		for _, t := range c.Expression.Variables() {
			for n := len(t); n > 0; n-- {
				v, diags := hcl.Traversal(t[:n]).TraverseAbs(c.EvalContext)
				if diags.HasErrors() {
					continue
				}
				_, ms := v.UnmarkDeep()
				for m := range ms {
					marks[m] = struct{}{}
				}
				break
			}
		}
	}
	return marks
}
