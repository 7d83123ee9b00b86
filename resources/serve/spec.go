package serve

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/attrs"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/hostplan"
	"github.com/rayform/rayform/resources/servefiles"
)

// ServeSpec is everything that defines one `vllm serve` process.
type ServeSpec struct {
	Resource  string            `json:"resource"`
	Name      string            `json:"name"`
	Container string            `json:"container"` // the head container it runs in
	Node      string            `json:"node"`      // the head node
	Args      []string          `json:"args"`      // vllm serve ...
	Env       map[string]string `json:"env"`
	SecretEnv []string          `json:"secret_env,omitempty"`
	// ClusterSecrets are the cluster's sensitive env names that the serve's
	// own Env does not set: the start script exports them from the
	// container's secrets (cluster.ReadSecretsScript), as docker exec
	// passed them on when they were in Docker's configuration. Derived
	// from the cluster, which its hash covers: not part of this one.
	ClusterSecrets []string `json:"-"`
	Port           int      `json:"port"`
	// ServedName and MaxModelLen are what /v1/models must report.
	ServedName  string `json:"served_name"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
	// Attrs are the attributes, as JSON, recorded beside the process so a
	// later plan can show what changed: sensitive values only as digests,
	// their paths in Sensitive (see serveRecordValues). They are derived
	// from the rest, so they are not part of the hash.
	Attrs     map[string]json.RawMessage `json:"attrs,omitempty"`
	Sensitive []string                   `json:"sensitive,omitempty"`
	// SecretKey is the deployment's secret-digest key (see attrs.SecretDigest):
	// SecretEnv's values enter the hash, and sensitive attributes Attrs,
	// only as digests under it. Never serialized.
	SecretKey []byte `json:"-"`
	// recordAs, when set, is the hash the start script records instead of
	// the spec's own: a blue/green replacement's new generation records
	// the serve it becomes (nextSpec).
	recordAs string
}

// Hash is a stable digest of the spec; secret values enter only hashed.
func (s ServeSpec) Hash() string {
	c := s
	c.Attrs, c.Sensitive = nil, nil
	c.Env = map[string]string{}
	for k, v := range s.Env {
		if slices.Contains(s.SecretEnv, k) {
			v = attrs.SecretDigest(s.SecretKey, v)
		}
		c.Env[k] = v
	}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// Current reports whether a serve recorded with hash h runs this spec: h is
// its hash, or the hash an earlier rayform gave it, with unkeyed secret
// digests (see attrs.SecretDigest), so that an upgrade replaces no serve whose
// secrets did not change. Legacy reports which of the two matched.
func (s ServeSpec) Current(h string) (current, legacy bool) {
	if h == s.Hash() {
		return true, false
	}
	if s.SecretKey != nil && len(s.SecretEnv) > 0 {
		l := s
		l.SecretKey = nil
		if h == l.Hash() {
			return true, true
		}
	}
	return false, false
}

// Paths inside the head container.
func (s ServeSpec) specPath() string { return servefiles.Dir + "/" + ServeRecordName(s.Name) + ".json" }
func (s ServeSpec) pidPath() string  { return servefiles.Dir + "/" + ServeRecordName(s.Name) + ".pid" }
func (s ServeSpec) lockPath() string { return servefiles.Dir + "/" + ServeRecordName(s.Name) + ".lock" }

// LogPath is where the serve process writes its log.
func (s ServeSpec) LogPath() string { return servefiles.Dir + "/" + ServeRecordName(s.Name) + ".log" }
func (s ServeSpec) envPath() string { return servefiles.Dir + "/" + ServeRecordName(s.Name) + ".env" }

// PreviousLogPath is where the log of the serve's previous process is
// kept when a new one starts (one generation: a failed start's log
// survives the restore that follows it, rotateLogScript).
func (s ServeSpec) PreviousLogPath() string {
	return servefiles.Dir + "/" + ServeRecordName(s.Name) + ".previous.log"
}

// HostPreviousLogPath is PreviousLogPath as the head host sees it.
func (s ServeSpec) HostPreviousLogPath(project string) string {
	return servefiles.Host(project, s.Node, s.Container) + "/" + path.Base(s.PreviousLogPath())
}

// rotateLogScript keeps the log of the serve's last process as the
// previous log (a non-empty one: a start that wrote nothing leaves the
// one before it) and removes the pid file, so that neither is taken for
// the new process's.
func (s ServeSpec) rotateLogScript() string {
	log, prev := shell.Quote(s.LogPath()), shell.Quote(s.PreviousLogPath())
	return fmt.Sprintf("if [ -s %s ]; then mv -f %s %s; fi; rm -f %s %s", log, log, prev, log, shell.Quote(s.pidPath()))
}

// HostLogPath and HostPidPath are LogPath and the pid file as the head host
// sees them (under ServeHostDir), for reading without a docker exec.
func (s ServeSpec) HostLogPath(project string) string {
	return servefiles.Host(project, s.Node, s.Container) + "/" + path.Base(s.LogPath())
}

// HostPidPath: see HostLogPath. The file's mtime is when the serve started.
func (s ServeSpec) HostPidPath(project string) string {
	return servefiles.Host(project, s.Node, s.Container) + "/" + path.Base(s.pidPath())
}

// StartScript runs inside the head container (ExecArgs, with the secret
// env already in its environment): it records its pid, takes the serve's
// lock, records the spec, and execs vllm serve with its output in the log
// (0600).
//
// The lock is how the host tells whether the serve runs without entering
// the container: an exclusive flock(1) on serve-NAME.lock, taken on fd 9,
// which stays open across the exec, so vllm serve (and every process it
// forks) holds it for exactly its life, and the probe's `flock -n -s` on
// the host fails while it does. A shared lock on the directory itself
// (fd 8) keeps systemd-tmpfiles from ageing the records away from under a
// running serve (it skips locked directories). An image without flock
// still starts the serve, without the lock file: the probe then asks the
// container (docker exec, kill -0 of the pid). If an earlier serve of the
// same name still holds the lock (still exiting), the script says so in
// the log and waits for it.
func (s ServeSpec) StartScript() string {
	rec, _ := json.Marshal(observe.Record{Resource: s.Resource, SpecHash: s.recordHash(), Attrs: s.Attrs, Sensitive: s.Sensitive})
	lock, log := s.lockPath(), s.LogPath()
	var b strings.Builder
	fmt.Fprintf(&b, "mkdir -p %s && cd %s\n", servefiles.Dir, servefiles.Dir)
	fmt.Fprintf(&b, "(umask 077 && : >> %s && { [ -z \"$RAYFORM_LOG_OWNER\" ] || chown \"$RAYFORM_LOG_OWNER\" %s 2>/dev/null; }; true)\n", log, log)
	fmt.Fprintf(&b, "echo $$ > %s\n", s.pidPath())
	fmt.Fprintf(&b, "if command -v flock >/dev/null 2>&1 && command exec 8<%s 9>>%s; then\n", servefiles.Dir, lock)
	b.WriteString("\tflock -s 8\n")
	b.WriteString("\tif ! flock -n 9; then\n")
	fmt.Fprintf(&b, "\t\techo 'rayform: waiting for the lock of vllm serve %s: an earlier one still holds it' >> %s\n", s.Name, log)
	fmt.Fprintf(&b, "\t\tflock 9 || { echo 'rayform: cannot lock %s: liveness is read with docker exec' >> %s; exec 9>&-; rm -f %s; }\n", lock, log, lock)
	b.WriteString("\tfi\n")
	b.WriteString("else\n")
	fmt.Fprintf(&b, "\techo 'rayform: no lock for vllm serve %s (is flock(1) installed in the image?): liveness is read with docker exec' >> %s\n", s.Name, log)
	b.WriteString("fi\n")
	// The record holds digests of the sensitive attributes: 0600 (an
	// earlier one may be 0644), owned by the SSH user who reads it.
	fmt.Fprintf(&b, "(umask 077 && rm -f %[2]s && printf '%%s\\n' %[1]s > %[2]s && { [ -z \"$RAYFORM_LOG_OWNER\" ] || chown \"$RAYFORM_LOG_OWNER\" %[2]s 2>/dev/null; }; true)\n", shell.Quote(string(rec)), s.specPath())
	if len(s.ClusterSecrets) > 0 {
		b.WriteString(cluster.ReadSecretsScript(s.ClusterSecrets) + "\n")
	}
	fmt.Fprintf(&b, "exec %s >> %s 2>&1\n", shell.Join(s.Args), log)
	return b.String()
}

// ServeSpecFor returns the desired serve process of a vllm_serve.
func ServeSpecFor(cfg *Blocks, sv *VLLMServe) (ServeSpec, error) {
	rc := cfg.RayClusters[sv.Cluster]
	if rc == nil {
		return ServeSpec{}, fmt.Errorf("%s: unknown ray_cluster %q", sv.Addr, sv.Cluster)
	}
	name := cluster.ContainerName(rc)
	served := sv.ServedModelName
	if served == "" {
		served = sv.Model
	}
	args := append(serveArgs(sv, rc), weightsArgs(cfg, sv)...)
	env := map[string]string{}
	var secret []string
	for i, a := range sv.ExtraArgs {
		if sv.IsSensitive(fmt.Sprintf("extra_args[%d]", i)) {
			// validate refuses it (see config's checkServe): a command line
			// is readable by every user of the host.
			return ServeSpec{}, fmt.Errorf("%s: extra_args[%d] is sensitive; a sensitive value must not be on vLLM's command line (use api_key or env)", sv.Addr, i)
		}
		args = append(args, a)
	}
	if sv.APIKey != "" {
		// vLLM reads its API key from VLLM_API_KEY when --api-key is not
		// given: the key stays out of argv and out of vLLM's
		// "non-default args" log line.
		env["VLLM_API_KEY"] = sv.APIKey
		secret = append(secret, "VLLM_API_KEY")
	}
	for k, v := range sv.Env {
		env[k] = v
		if sv.IsSensitive(fmt.Sprintf("env[%q]", k)) {
			secret = append(secret, k)
		}
	}
	weightsEnv(cfg, sv, env)
	sort.Strings(secret)
	var clusterSecrets []string
	for k := range rc.Env {
		if _, own := env[k]; !own && rc.IsSensitive(fmt.Sprintf("env[%q]", k)) {
			clusterSecrets = append(clusterSecrets, k)
		}
	}
	sort.Strings(clusterSecrets)
	spec := ServeSpec{
		Resource:       sv.Addr,
		Name:           sv.Name,
		Container:      name,
		Node:           rc.Head,
		Args:           args,
		Env:            env,
		SecretEnv:      secret,
		ClusterSecrets: clusterSecrets,
		Port:           sv.Port,
		ServedName:     served,
		MaxModelLen:    sv.MaxModelLen,
	}
	spec.SecretKey = cfg.SecretKeys()[sv.Cluster]
	rec := serveRecordValues(sv, spec.SecretKey).KnownRecord()
	spec.Attrs, spec.Sensitive = rec.Attrs, rec.Sensitive
	return spec, nil
}

// serveSchema is the vllm_serve's attributes as plans show them and serve
// records keep them: its applied arguments (config.Schema), then the
// endpoint they give.
func serveSchema() []attrs.Attr {
	return append(attrs.FromArgs(serveDescriptor().Args), attrs.Attr{Name: "endpoint", Type: cty.String, Exported: true, Description: "the OpenAI base URL"})
}

// serveRecordValues are the serve's attributes as its record keeps them,
// sensitive ones digested under key (see attrs.SecretDigest).
func serveRecordValues(sv *VLLMServe, key []byte) attrs.Values {
	vals := attrs.ArgValues(serveDescriptor().Args, &sv.Decl, key)
	vals["endpoint"] = cty.UnknownVal(cty.String)
	if sv.Endpoint != "" {
		vals["endpoint"] = cty.StringVal(sv.Endpoint)
	}
	return vals
}

// ExecArgs is the docker exec command that starts the serve process
// detached: non-secret env goes as -e NAME=VALUE, secret env as -e NAME,
// which the docker CLI fills from its own environment: run it with
// SecretEnv's values as the command's Env (the transport sends them on
// stdin), so that no command line and no file ever holds them.
//
// logOwner, when not empty, is the uid the log is given to (the SSH user's,
// so that it can read the log on the host, as `rayform logs` does, while
// the file stays 0600).
func (s ServeSpec) ExecArgs(logOwner string) []string {
	args := []string{"docker", "exec", "-d"}
	if logOwner != "" {
		args = append(args, "-e", "RAYFORM_LOG_OWNER="+logOwner)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if slices.Contains(s.SecretEnv, k) {
			args = append(args, "-e", k)
		} else {
			args = append(args, "-e", k+"="+s.Env[k])
		}
	}
	return append(args, s.Container, "sh", "-c", s.StartScript())
}

// ListenHost is the address vLLM's API listens on, from its --host; ""
// when the command line has none.
func (s ServeSpec) ListenHost() string {
	for i, a := range s.Args {
		if a == "--host" && i+1 < len(s.Args) {
			return s.Args[i+1]
		}
	}
	return ""
}

// LocalURL is the URL of path on the serve's port as rayform asks it on
// the head itself: where vLLM listens, its loopback when it listens on
// every address.
func (s ServeSpec) LocalURL(path string) string {
	host := s.ListenHost()
	if host == "" || host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "http://127.0.0.1:" + strconv.Itoa(s.Port) + path
	}
	return "http://" + netip.AddrPortFrom(a, uint16(s.Port)).String() + path
}

// SecretEnvValues returns the sensitive variables and their values: the Env
// of the command running ExecArgs.
func (s ServeSpec) SecretEnvValues() map[string]string {
	return hostplan.SecretValues(s.Env, s.SecretEnv)
}

// judgeModels compares the models vLLM's /v1/models lists with the serve's
// spec: the served model name, with its max_model_len where one is
// declared. It is the one judgment of the list, for plan (on the list
// observe read) and for apply's verification (on the list it reads after
// the start): "" when they agree, else the reason, naming vLLM where
// ("" or " on NODE").
func judgeModels(models []Model, spec ServeSpec, where string) string {
	var ids []string
	for _, m := range models {
		if m.ID == spec.ServedName {
			if spec.MaxModelLen > 0 && m.MaxModelLen != spec.MaxModelLen {
				return fmt.Sprintf("vLLM%s serves %s with max_model_len %d; want %d", where, m.ID, m.MaxModelLen, spec.MaxModelLen)
			}
			return ""
		}
		ids = append(ids, m.ID)
	}
	return fmt.Sprintf("vLLM%s serves %s; want %s", where, hostplan.OrNone(strings.Join(ids, ", ")), spec.ServedName)
}
