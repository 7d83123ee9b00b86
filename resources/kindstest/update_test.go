package kindstest

import "flag"

// The -update flag rewrites golden files (plan, steps, README reference);
// another test file of the package may declare it too: register it once.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

// updatingGolden reports whether the tests run with -update.
func updatingGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}
