package views

import "fmt"

// Graph shows graph's DOT document (human only: DOT is the format).
type Graph struct{ *View }

// NewGraph is graph's view.
func NewGraph(v *View) *Graph { return &Graph{View: v} }

// DOT prints the graph.
func (v *Graph) DOT(dot string) { fmt.Fprint(v.stdout, dot) }
