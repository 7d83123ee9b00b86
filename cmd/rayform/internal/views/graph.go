package views

import "fmt"

// Graph shows graph's DOT document (human only: DOT is the format).
type Graph struct{ *View }

// NewGraph is graph's view.
func NewGraph(v *View) *Graph { return &Graph{View: v} }

// DOT prints the graph.
func (v *Graph) DOT(dot string) { fmt.Fprint(v.stdout, dot) }

// Version shows the version.
type Version struct{ *View }

// NewVersion is version's view.
func NewVersion(v *View) *Version { return &Version{View: v} }

// Version prints version.
func (v *Version) Version(version string) { fmt.Fprintf(v.stdout, "rayform v%s\n", version) }
