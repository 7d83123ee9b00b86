package planfile

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The kinds of [CheckError]; test with errors.Is.
var (
	// ErrStalePlan: the state or the hosts changed since the plan was made.
	ErrStalePlan = errors.New("saved plan is stale")
	// ErrConfigMismatch: a configuration file or variable changed.
	ErrConfigMismatch = errors.New("saved plan does not match the configuration")
	// ErrStateMismatch: the plan was made against another state.
	ErrStateMismatch = errors.New("saved plan does not match the given state")
	// ErrVersionMismatch: the plan was written by another rayform version.
	ErrVersionMismatch = errors.New("saved plan was created by another rayform version")
)

// CheckError is why a saved plan cannot be applied. Summary and Detail are
// written for a diagnostic; Error joins them.
type CheckError struct {
	Kind    error  // one of ErrStalePlan, ErrConfigMismatch, ErrStateMismatch, ErrVersionMismatch
	Summary string // "Saved plan is stale"
	Detail  string // "the given plan file can no longer be applied because …; run rayform plan again"
}

func (e *CheckError) Error() string { return e.Summary + ": " + e.Detail }

// Unwrap returns the kind, so errors.Is(err, ErrStalePlan) works.
func (e *CheckError) Unwrap() error { return e.Kind }

// again ends every detail: the remedy is always the same.
const again = "; run rayform plan again"

// Check returns nil if cur, gathered at apply time, is what the plan was
// computed from, and a *CheckError saying what differs otherwise. It checks,
// in order: the rayform version, the state's lineage, the configuration
// files and variables, the state's serial, and the observed fingerprint.
func (f *File) Check(cur Current) error {
	if cur.RayformVersion != "" && cur.RayformVersion != f.RayformVersion {
		return &CheckError{ErrVersionMismatch, "Saved plan was created by another rayform version",
			fmt.Sprintf("the given plan file was created by rayform %s, but this is rayform %s%s", f.RayformVersion, cur.RayformVersion, again)}
	}
	if err := f.checkLineage(cur); err != nil {
		return err
	}
	if diffs, err := f.configDiffs(cur); err != nil {
		return err
	} else if len(diffs) > 0 {
		return &CheckError{ErrConfigMismatch, "Saved plan does not match the configuration",
			strings.Join(diffs, ", ") + " since the plan was created" + again}
	}
	if cur.StateSerial != f.StateSerial {
		return &CheckError{ErrStalePlan, "Saved plan is stale",
			fmt.Sprintf("the given plan file can no longer be applied because the state was changed by another operation after the plan was created (state serial %d, now %d)%s", f.StateSerial, cur.StateSerial, again)}
	}
	if cur.ObservedFingerprint != f.ObservedFingerprint {
		return &CheckError{ErrStalePlan, "Saved plan is stale",
			fmt.Sprintf("the given plan file can no longer be applied because the hosts changed since the plan was created (%s)%s", f.observedDiff(cur.Observed), again)}
	}
	return nil
}

// checkLineage compares the state lineages. A state never saved (serial 0)
// gets a fresh random lineage each time it is loaded, so two unsaved states
// match whatever their lineages.
func (f *File) checkLineage(cur Current) error {
	switch {
	case f.StateSerial == 0 && cur.StateSerial == 0:
		return nil
	case f.StateSerial != 0 && cur.StateSerial == 0:
		return &CheckError{ErrStateMismatch, "Saved plan does not match the given state",
			fmt.Sprintf("the given plan file was created from state lineage %s serial %d, but there is no saved state now%s", f.StateLineage, f.StateSerial, again)}
	case f.StateSerial == 0:
		return nil // state saved since: a serial change, reported as stale
	case f.StateLineage != cur.StateLineage:
		return &CheckError{ErrStateMismatch, "Saved plan does not match the given state",
			fmt.Sprintf("the given plan file was created from a different state lineage (%s, now %s)%s", f.StateLineage, cur.StateLineage, again)}
	}
	return nil
}

// configDiffs lists the configuration files and variables that differ,
// e.g. `main.hcl changed`, `variable "tp" changed (was 2, now 4)`.
func (f *File) configDiffs(cur Current) ([]string, error) {
	var diffs []string
	salt, err := f.salt()
	if err != nil {
		return nil, err
	}
	if ConfigHash(salt, cur.ConfigFiles) != f.ConfigHash {
		now := fileHashes(salt, cur.ConfigFiles)
		diffs = append(diffs, setDiff(f.ConfigFiles, now, func(name string) string { return name })...)
		if len(diffs) == 0 {
			diffs = append(diffs, "the configuration files")
		}
	}
	name := func(n string) string { return fmt.Sprintf("variable %q", n) }
	for _, n := range slices.Sorted(maps.Keys(union(f.Variables, cur.Variables))) {
		was, inPlan := f.Variables[n]
		v, inCur := cur.Variables[n]
		switch {
		case !inPlan:
			if _, ok := f.SensitiveVariables[n]; ok {
				diffs = append(diffs, name(n)+" is no longer sensitive")
			} else {
				diffs = append(diffs, name(n)+" was added")
			}
		case !inCur:
			if _, ok := cur.Sensitive[n]; ok {
				diffs = append(diffs, name(n)+" became sensitive")
			} else {
				diffs = append(diffs, name(n)+" was removed")
			}
		default:
			now, err := compact(v)
			if err != nil {
				return nil, fmt.Errorf("variable %q: %w", n, err)
			}
			if was, err = compact(was); err != nil {
				return nil, fmt.Errorf("variable %q in the plan: %w", n, err)
			}
			if !bytes.Equal(was, now) {
				diffs = append(diffs, fmt.Sprintf("%s changed (was %s, now %s)", name(n), clip(was), clip(now)))
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(union(f.SensitiveVariables, cur.Sensitive))) {
		was, inPlan := f.SensitiveVariables[n]
		v, inCur := cur.Sensitive[n]
		switch {
		case !inPlan:
			if _, ok := f.Variables[n]; !ok {
				diffs = append(diffs, "sensitive "+name(n)+" was added")
			}
		case !inCur:
			if _, ok := cur.Variables[n]; !ok {
				diffs = append(diffs, "sensitive "+name(n)+" was removed")
			}
		default:
			now, err := f.hashSensitive(n, v)
			if err != nil {
				return nil, err
			}
			if now != was {
				diffs = append(diffs, "sensitive "+name(n)+" changed")
			}
		}
	}
	return diffs, nil
}

// observedDiff names the parts whose fingerprints differ, or says that the
// observed facts differ when the plan or cur has no parts.
func (f *File) observedDiff(now map[string]string) string {
	if len(f.Observed) == 0 || len(now) == 0 {
		return "the observed facts differ"
	}
	diffs := setDiff(f.Observed, now, func(n string) string { return n })
	if len(diffs) == 0 {
		return "the observed facts differ"
	}
	return strings.Join(diffs, ", ")
}

// setDiff describes how the hashes in now differ from those in was: "x
// changed", "y was added", "z was removed", in name order.
func setDiff(was, now map[string]string, label func(string) string) []string {
	var diffs []string
	for _, n := range slices.Sorted(maps.Keys(union(was, now))) {
		a, inWas := was[n]
		b, inNow := now[n]
		switch {
		case !inWas:
			diffs = append(diffs, label(n)+" was added")
		case !inNow:
			diffs = append(diffs, label(n)+" was removed")
		case a != b:
			diffs = append(diffs, label(n)+" changed")
		}
	}
	return diffs
}

// union returns a set of the keys of a and b.
func union[A, B any](a map[string]A, b map[string]B) map[string]struct{} {
	u := make(map[string]struct{}, len(a)+len(b))
	for k := range a {
		u[k] = struct{}{}
	}
	for k := range b {
		u[k] = struct{}{}
	}
	return u
}

// CheckChanges returns nil if changes, the plan recomputed at apply time,
// are the changes the saved plan showed (in any order; no-op entries must
// be included on both sides or on neither), and a *CheckError
// of kind ErrStalePlan naming the differences otherwise. Since a plan is a
// pure function of the inputs [File.Check] compares, a difference means a
// fact the plan depends on is missing from the observed fingerprint.
func (f *File) CheckChanges(changes []Change) error {
	was := make(map[string]string, len(f.Changes))
	for _, c := range f.Changes {
		was[c.Addr] = c.Action
	}
	now := make(map[string]string, len(changes))
	for _, c := range changes {
		now[c.Addr] = c.Action
	}
	var diffs []string
	for _, a := range slices.Sorted(maps.Keys(union(was, now))) {
		w, inWas := was[a]
		n, inNow := now[a]
		switch {
		case !inWas:
			diffs = append(diffs, fmt.Sprintf("%s: %s was not in the saved plan", a, n))
		case !inNow:
			diffs = append(diffs, fmt.Sprintf("%s: saved %s is no longer needed", a, w))
		case w != n:
			diffs = append(diffs, fmt.Sprintf("%s: saved %s, now %s", a, w, n))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return &CheckError{ErrStalePlan, "Saved plan is stale",
		fmt.Sprintf("the given plan file can no longer be applied because the plan computed now differs from the saved one (%s)%s", strings.Join(diffs, "; "), again)}
}

// clip shortens a JSON value for an error message.
func clip(v []byte) string {
	const max = 60
	if len(v) <= max {
		return string(v)
	}
	return string(v[:max-3]) + "..."
}
