// Package kindstest tests the registered resource kinds together
// (resources.Kinds), as engine/run drives them through the contract of
// engine/kind: plans of whole configurations and their goldens, destroy,
// what is present, status, the steps of planned work in the fake lab
// (internal/steplab), and the README's reference of every kind. It holds
// tests only.
package kindstest
