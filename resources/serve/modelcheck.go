package serve

import (
	"fmt"

	"github.com/rayform/rayform/resources/modelfit"
)

// ModelCheck is the model preflight of a serve whose weights a block of
// the configuration stages during the same apply, so that plan could not
// read them: apply runs it on the head right after staging and before the
// serve starts (or the running one is stopped), reading the files with the
// probe plan reads them with and judging with the same modelFindings, and
// stops the serve's start with the finding plan would have shown.
type ModelCheck struct {
	// Node is the cluster's head, where the files are read.
	Node  string
	Files modelFiles
	// Serve is what plan knew of the serve's fit, less the weights' size.
	Serve modelfit.Serve
	sv    *VLLMServe
}

// rangeAt is the file:line of sv's attribute attr.
func rangeAt(sv *VLLMServe, attr string) string {
	r := sv.Range(attr)
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}
