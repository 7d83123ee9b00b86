package command

import (
	"os"

	"github.com/hashicorp/hcl/v2"

	"github.com/rayform/rayform/cmd/rayform/internal/arguments"
	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/resources"
)

// varOptions returns the load options: the -var and -var-file flags in
// order and the environment's RAYFORM_VAR_<name> values.
func varOptions(vars *arguments.Vars) config.Options {
	return config.Options{Args: vars.Args, Env: os.Environ()}
}

// loadConfig loads the configuration in the working directory.
func loadConfig(m *Meta, vars *arguments.Vars) (*config.Config, hcl.Diagnostics) {
	return loadConfigWith(m, varOptions(vars))
}

// loadConfigChecking loads the configuration for checking only (validate,
// graph): a variable without a value is unknown, not an error, so CI can
// check a configuration without its secrets.
func loadConfigChecking(m *Meta, vars *arguments.Vars) (*config.Config, hcl.Diagnostics) {
	opts := varOptions(vars)
	opts.UnknownVariables = true
	return loadConfigWith(m, opts)
}

func loadConfigWith(m *Meta, opts config.Options) (*config.Config, hcl.Diagnostics) {
	if opts.Kinds == nil {
		opts.Kinds = resources.Kinds().Schemas()
	}
	cfg, diags := config.Load(m.dir, opts)
	m.log.Debug("loaded configuration", "dir", m.dir, "files", len(cfg.Files), "diagnostics", len(diags))
	return cfg, diags
}
