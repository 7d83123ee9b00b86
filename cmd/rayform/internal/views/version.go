package views

import "fmt"

// Version shows the version.
type Version struct{ *View }

// NewVersion is version's view.
func NewVersion(v *View) *Version { return &Version{View: v} }

// Version prints version.
func (v *Version) Version(version string) { fmt.Fprintf(v.stdout, "rayform v%s\n", version) }
