package config

import (
	"github.com/hashicorp/hcl/v2"
)

// validateConfig runs each registered kind's Validate, in registration
// order: the rules that involve more than one block.
func (m *module) validateConfig(cfg *Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	report := func(d *Decl, attr, summary, detail string) {
		rng := d.Range(attr)
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: &rng})
	}
	for _, t := range m.kindOrder {
		if k := m.kinds[t]; k.Validate != nil {
			k.Validate(cfg, report)
		}
	}
	return diags
}
