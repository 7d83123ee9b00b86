package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/transport/shell"
)

// serveDir holds, inside the head container, each vllm_serve's spec, pid and
// log: /tmp/rayform/serve-NAME.{json,pid,log,env}.
const serveDir = "/tmp/rayform"

// ServeSpec is everything that defines one `vllm serve` process.
type ServeSpec struct {
	Resource  string            `json:"resource"`
	Name      string            `json:"name"`
	Container string            `json:"container"` // the head container it runs in
	Node      string            `json:"node"`      // the head node
	Args      []string          `json:"args"`      // vllm serve ...
	Env       map[string]string `json:"env"`
	SecretEnv []string          `json:"secret_env,omitempty"`
	Port      int               `json:"port"`
	// ServedName and MaxModelLen are what /v1/models must report.
	ServedName  string `json:"served_name"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
	// Attrs are the non-sensitive attributes, as JSON, recorded beside the
	// process so a later plan can show what changed.
	Attrs map[string]json.RawMessage `json:"attrs,omitempty"`
}

// secretArgPrefix marks, in Args, an argument whose value is sensitive: it
// is passed as "$RAYFORM_ARG_<i>" from the env file, never on a command line.
const secretArgPrefix = "\x00"

// Hash is a stable digest of the spec; secret values enter only hashed.
func (s ServeSpec) Hash() string {
	c := s
	c.Env = map[string]string{}
	for k, v := range s.Env {
		if contains(s.SecretEnv, k) {
			sum := sha256.Sum256([]byte(v))
			v = "sha256:" + hex.EncodeToString(sum[:8])
		}
		c.Env[k] = v
	}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// Paths inside the head container.
func (s ServeSpec) specPath() string { return serveDir + "/serve-" + s.Name + ".json" }
func (s ServeSpec) pidPath() string  { return serveDir + "/serve-" + s.Name + ".pid" }

// LogPath is where the serve process writes its log.
func (s ServeSpec) LogPath() string { return serveDir + "/serve-" + s.Name + ".log" }
func (s ServeSpec) envPath() string { return serveDir + "/serve-" + s.Name + ".env" }

// ServeRecord is what rayform writes next to the process for drift detection.
type ServeRecord struct {
	Resource string                     `json:"resource"`
	SpecHash string                     `json:"spec_hash"`
	Attrs    map[string]json.RawMessage `json:"attrs,omitempty"`
}

// StartScript runs inside the head container (docker exec -d): it records
// the spec and pid, loads the secret env file if any, and execs vllm serve
// with its output in the log.
func (s ServeSpec) StartScript() string {
	rec, _ := json.Marshal(ServeRecord{Resource: s.Resource, SpecHash: s.Hash(), Attrs: s.Attrs})
	var b strings.Builder
	fmt.Fprintf(&b, "mkdir -p %s && cd %s\n", serveDir, serveDir)
	fmt.Fprintf(&b, "printf '%%s\\n' %s > %s\n", shell.Quote(string(rec)), s.specPath())
	fmt.Fprintf(&b, "echo $$ > %s\n", s.pidPath())
	if len(s.SecretEnv) > 0 {
		fmt.Fprintf(&b, "set -a; . %s; set +a; rm -f %s\n", s.envPath(), s.envPath())
	}
	words := make([]string, len(s.Args))
	for i, a := range s.Args {
		if strings.HasPrefix(a, secretArgPrefix) {
			words[i] = `"$` + strings.TrimPrefix(a, secretArgPrefix) + `"`
		} else {
			words[i] = shell.Quote(a)
		}
	}
	fmt.Fprintf(&b, "exec %s > %s 2>&1\n", strings.Join(words, " "), s.LogPath())
	return b.String()
}

// ServeSpecFor returns the desired serve process of a vllm_serve.
func ServeSpecFor(cfg *config.Config, sv *config.VLLMServe) (ServeSpec, error) {
	rc := cfg.RayClusters[sv.Cluster]
	if rc == nil {
		return ServeSpec{}, fmt.Errorf("%s: unknown ray_cluster %q", sv.Addr, sv.Cluster)
	}
	name := rc.ContainerName
	if name == "" {
		name = "rayform-" + rc.Name
	}
	served := sv.ServedModelName
	if served == "" {
		served = sv.Model
	}
	args := []string{"vllm", "serve", sv.Model,
		"--served-model-name", served,
		"--tensor-parallel-size", strconv.Itoa(max(sv.TensorParallelSize, 1)),
		"--pipeline-parallel-size", strconv.Itoa(max(sv.PipelineParallelSize, 1)),
		"--gpu-memory-utilization", strconv.FormatFloat(sv.GPUMemoryUtilization, 'f', -1, 64),
		"--host", "0.0.0.0",
		"--port", strconv.Itoa(sv.Port),
	}
	if len(rc.Workers) > 0 {
		args = append(args, "--distributed-executor-backend", "ray")
	}
	if sv.MaxModelLen > 0 {
		args = append(args, "--max-model-len", strconv.Itoa(sv.MaxModelLen))
	}
	env := map[string]string{}
	var secret []string
	for i, a := range sv.ExtraArgs {
		if sv.IsSensitive(fmt.Sprintf("extra_args[%d]", i)) {
			key := fmt.Sprintf("RAYFORM_ARG_%d", i)
			env[key] = a
			secret = append(secret, key)
			a = secretArgPrefix + key
		}
		args = append(args, a)
	}
	for k, v := range sv.Env {
		env[k] = v
		if sv.IsSensitive(fmt.Sprintf("env[%q]", k)) {
			secret = append(secret, k)
		}
	}
	sort.Strings(secret)
	spec := ServeSpec{
		Resource:    sv.Addr,
		Name:        sv.Name,
		Container:   name,
		Node:        rc.Head,
		Args:        args,
		Env:         env,
		SecretEnv:   secret,
		Port:        sv.Port,
		ServedName:  served,
		MaxModelLen: sv.MaxModelLen,
		Attrs:       map[string]json.RawMessage{},
	}
	for k, v := range ServeAttrs(sv, spec) {
		if b, err := ctyjson.Marshal(v, v.Type()); err == nil {
			spec.Attrs[k] = b
		}
	}
	return spec, nil
}

// ExecArgs is the docker exec command that starts the serve process
// detached; non-secret env goes as -e, secrets through the env file.
func (s ServeSpec) ExecArgs() []string {
	args := []string{"docker", "exec", "-d"}
	for _, k := range sortedKeys(s.Env) {
		if !contains(s.SecretEnv, k) {
			args = append(args, "-e", k+"="+s.Env[k])
		}
	}
	return append(args, s.Container, "sh", "-c", s.StartScript())
}

// SecretEnvFile renders the sensitive variables for the env file written
// into the container (through stdin) before the start.
func (s ServeSpec) SecretEnvFile() []byte {
	var b strings.Builder
	for _, k := range s.SecretEnv {
		fmt.Fprintf(&b, "%s=%s\n", k, shell.Quote(s.Env[k]))
	}
	return []byte(b.String())
}
