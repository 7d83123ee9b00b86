package modelfit

import (
	"fmt"
	"slices"
	"strings"
)

// Registry is what an image's vLLM and transformers know, as the image
// itself answered (rayform asks it once per image ID and keeps the answer
// in the state):
//
//   - Architectures: vLLM's ModelRegistry.get_supported_archs()
//     (vllm/model_executor/models/registry.py), the names config.json's
//     "architectures" must match for vLLM's own model code;
//   - ModelTypes: the keys of transformers'
//     models.auto.configuration_auto.CONFIG_MAPPING (with the types
//     registered at import), which AutoConfig needs to read config.json;
//   - VLLMConfigTypes: the keys of vLLM's _CONFIG_REGISTRY
//     (vllm/transformers_utils/config.py), the model types vLLM reads
//     with its own config classes instead of transformers'.
type Registry struct {
	VLLM            string   `json:"vllm,omitempty"`
	Transformers    string   `json:"transformers,omitempty"`
	Architectures   []string `json:"architectures,omitempty"`
	ModelTypes      []string `json:"model_types,omitempty"`
	VLLMConfigTypes []string `json:"vllm_config_types,omitempty"`
	// Unchecked says why the image could not answer (no python3, no
	// vLLM); the other fields are then incomplete and nothing is judged.
	Unchecked string `json:"unchecked,omitempty"`
}

// CheckArchitecture judges whether the image whose registry is r can load
// the model of c: an error when vLLM has none of its architectures and
// neither transformers nor vLLM's own config classes know its model_type
// (vLLM cannot even read the config), or when vLLM has an architecture but
// nothing knows the model_type (AutoConfig refuses the config: "does not
// recognize this architecture"); a warning when vLLM lacks the
// architecture but transformers knows it (vLLM's Transformers modeling
// backend may take it). With trustRemoteCode and an auto_map in
// config.json, the model brings its own config and code: the model_type is
// not checked, and a missing architecture is a warning. skipped is set,
// with the reason, when nothing could be judged.
func CheckArchitecture(c ModelConfig, r Registry, trustRemoteCode bool) (findings []Finding, skipped string) {
	if r.Unchecked != "" {
		return nil, r.Unchecked
	}
	if len(c.Architectures) == 0 && c.ModelType == "" {
		return nil, "config.json names no architectures and no model_type"
	}
	remote := trustRemoteCode && c.AutoMap
	archKnown := len(c.Architectures) == 0 || slices.ContainsFunc(c.Architectures, func(a string) bool { return slices.Contains(r.Architectures, a) })
	typeKnown := c.ModelType == "" || remote || slices.Contains(r.ModelTypes, c.ModelType) || slices.Contains(r.VLLMConfigTypes, c.ModelType)
	versions := r.versions()
	archs := strings.Join(c.Architectures, ", ")
	fix := fmt.Sprintf("Use an image whose vLLM and transformers know %s (a newer vLLM image)", archs)
	if c.AutoMap && !trustRemoteCode {
		fix += ", or add \"--trust-remote-code\" to extra_args: config.json has an auto_map, so the model brings its own code"
	}
	fix += "."
	switch {
	case !archKnown && !typeKnown:
		findings = append(findings, Finding{
			Severity:  Error,
			Attribute: "model",
			Summary:   fmt.Sprintf("the image's vLLM and transformers do not know the model: architecture %s, model_type %q (%s)", archs, c.ModelType, versions),
			Detail: fmt.Sprintf("None of the architectures in config.json is among the %d vLLM supports, and neither transformers nor vLLM's own config classes know model_type %q: vLLM would fail reading the config (\"does not recognize this architecture\") after the cluster is up.",
				len(r.Architectures), c.ModelType),
			Fix: fix,
		})
	case archKnown && !typeKnown:
		findings = append(findings, Finding{
			Severity:  Error,
			Attribute: "model",
			Summary:   fmt.Sprintf("the image's transformers does not know model_type %q (%s)", c.ModelType, versions),
			Detail:    fmt.Sprintf("vLLM has code for %s, but it reads config.json with transformers' AutoConfig, which refuses a model_type it does not know (\"does not recognize this architecture\"), and vLLM has no config class of its own for it.", archs),
			Fix:       fix,
		})
	case !archKnown:
		findings = append(findings, Finding{
			Severity:  Warning,
			Attribute: "model",
			Summary:   fmt.Sprintf("the image's vLLM has no model code for %s (%s)", archs, versions),
			Detail:    fmt.Sprintf("None of the architectures in config.json is among the %d vLLM supports; its config is readable (model_type %q), so vLLM may run it with its Transformers modeling backend, slower, or refuse it if transformers' model cannot be used that way.", len(r.Architectures), c.ModelType),
			Fix:       fix,
		})
	}
	return findings, ""
}

// versions names the image's vLLM and transformers.
func (r Registry) versions() string {
	return fmt.Sprintf("vLLM %s, transformers %s", orDefault(r.VLLM, "unknown"), orDefault(r.Transformers, "unknown"))
}
