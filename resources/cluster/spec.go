package cluster

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

	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/transport"
	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/attrs"
	"github.com/rayform/rayform/resources/hostplan"
	"github.com/rayform/rayform/resources/network"
	"github.com/rayform/rayform/resources/servefiles"
)

// Container labels rayform sets on every container it creates. A container
// without LabelManaged is never touched.
const (
	LabelManaged  = kind.LabelManaged   // "true"
	LabelProject  = kind.LabelProject   // the project (config directory) name
	LabelResource = kind.LabelResource  // e.g. "ray_cluster.main"
	LabelRole     = "rayform.role"      // "head" or "worker"
	LabelNode     = "rayform.node"      // node name
	LabelNodeIP   = "rayform.node-ip"   // the fabric address Ray was started with
	LabelHead     = "rayform.head"      // head address "ip:port"
	LabelSpecHash = "rayform.spec-hash" // hash of the ContainerSpec
)

// ContainerSpec is everything that defines one Ray container on one node.
// Its hash, stored as a label, is how drift in the definition is detected.
type ContainerSpec struct {
	Resource string            `json:"resource"`
	Node     string            `json:"node"`
	Role     string            `json:"role"` // "head" or "worker"
	Name     string            `json:"name"`
	Image    string            `json:"image"`
	NodeIP   string            `json:"node_ip"`
	HeadAddr string            `json:"head_addr"` // ip:port of the GCS
	GPUs     int               `json:"gpus"`
	Env      map[string]string `json:"env"`
	// SecretEnv lists the keys of Env whose values are sensitive; they reach
	// the host in the docker command's environment and the container
	// through a tmpfs of its own (see RunCmd), never on a command line, in
	// a file on the host's disk or in Docker's container configuration.
	SecretEnv     []string `json:"secret_env,omitempty"`
	Volumes       []string `json:"volumes,omitempty"`
	DockerArgs    []string `json:"docker_args,omitempty"`
	Port          int      `json:"port"`
	DashboardPort int      `json:"dashboard_port"`
	// DashboardHost is the address the head's dashboard listens on
	// (DashboardHost, the head's loopback); part of the hash, so a head
	// started with another is replaced.
	DashboardHost string `json:"dashboard_host,omitempty"`
	// NonCarryOver lists env names vLLM must not copy from the driver.
	NonCarryOver []string `json:"non_carry_over"`
	// AuthToken is the token Ray's authentication demands ("" without
	// it): the container receives it in its secrets tmpfs (AuthTokenPath),
	// as RunCmd hands over the secret env. It enters the hash only as a
	// digest under SecretKey. Never serialized.
	AuthToken string `json:"-"`
	// ServeDir is the container's directory of serve records (see
	// servefiles.Dir), bind-mounted from servefiles.Host(project, Node, Name) on the
	// host; "" mounts nothing. It is part of the hash, so a container
	// without the mount is replaced; the host side is determined by the
	// project (which owns the container), Node and Name.
	ServeDir string `json:"serve_dir,omitempty"`
	// Record is the cluster's attributes as this container applies them,
	// carried as the LabelAttrs label. It is derived from the fields above
	// and the cluster, so it is not part of the hash.
	Record observe.Record `json:"-"`
	// SecretKey is the deployment's secret-digest key (see attrs.SecretDigest):
	// SecretEnv's values enter the hash, and sensitive attributes Record,
	// only as digests under it. Never serialized.
	SecretKey []byte `json:"-"`
}

// Hash is a stable digest of the spec. Secret values enter it only through
// their hash, so the label reveals nothing.
func (s ContainerSpec) Hash() string {
	c := s
	c.Env = map[string]string{}
	for k, v := range s.Env {
		if slices.Contains(s.SecretEnv, k) {
			v = attrs.SecretDigest(s.SecretKey, v)
		}
		c.Env[k] = v
	}
	hashed := struct {
		ContainerSpec
		Auth string `json:"auth,omitempty"`
	}{ContainerSpec: c}
	if s.AuthToken != "" {
		hashed.Auth = attrs.SecretDigest(s.SecretKey, s.AuthToken)
	}
	b, _ := json.Marshal(hashed) // maps marshal with sorted keys
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// Current reports whether a container labelled with hash h is of this
// spec: h is its hash, or the hash an earlier rayform gave it, with
// unkeyed secret digests (see attrs.SecretDigest), so that an upgrade replaces
// no container whose secrets did not change. Legacy reports which of the
// two matched.
func (s ContainerSpec) Current(h string) (current, legacy bool) {
	if h == s.Hash() {
		return true, false
	}
	if s.SecretKey != nil && len(s.SecretEnv) > 0 {
		if h == s.unkeyed().Hash() {
			return true, true
		}
	}
	return false, false
}

// unkeyed is s as an earlier rayform made it: secrets digested without a
// key.
func (s ContainerSpec) unkeyed() ContainerSpec {
	s.SecretKey = nil
	return s
}

// Labels returns the labels the container carries.
func (s ContainerSpec) Labels(project string) map[string]string {
	labels := map[string]string{
		LabelManaged:  "true",
		LabelProject:  project,
		LabelResource: s.Resource,
		LabelRole:     s.Role,
		LabelNode:     s.Node,
		LabelNodeIP:   s.NodeIP,
		LabelHead:     s.HeadAddr,
		LabelSpecHash: s.Hash(),
	}
	if len(s.Record.Attrs) > 0 {
		labels[LabelAttrs] = attrs.EncodeRecordLabel(s.Record)
	}
	return labels
}

// RayStartArgs is the `ray start` command line the container runs.
func (s ContainerSpec) RayStartArgs() []string {
	args := []string{"ray", "start"}
	if s.Role == "head" {
		args = append(args, "--head", "--port="+strconv.Itoa(s.Port),
			"--dashboard-host="+s.DashboardHost, "--dashboard-port="+strconv.Itoa(s.DashboardPort))
	} else {
		args = append(args, "--address="+s.HeadAddr)
	}
	if s.NodeIP != "" {
		args = append(args, "--node-ip-address="+s.NodeIP)
	}
	if s.GPUs > 0 {
		args = append(args, "--num-gpus="+strconv.Itoa(s.GPUs))
	}
	return append(args, "--disable-usage-stats", "--block")
}

// VLLMConfigRoot is where the container keeps vLLM's config, including
// ray_non_carry_over_env_vars.json.
const VLLMConfigRoot = "/tmp/rayform/vllm-config"

// SecretsDir is where a container with secret env receives it: a tmpfs of
// the container's own (memory: never the host's disk), whose file env
// (mode 0600, NAME=VALUE lines) the entrypoint exports before ray starts
// (see RunCmd), and a `vllm serve` started with docker exec exports too
// (ReadSecretsScript): Docker's own configuration never holds them, so
// docker exec does not pass them on by itself.
const SecretsDir = "/run/rayform-secrets"

// DashboardHost is where the head's dashboard (and its Jobs API) listens:
// its loopback only. rayform reads it there over SSH; an operator reaches
// it through an SSH tunnel (ray_cluster's dashboard_tunnel).
const DashboardHost = "127.0.0.1"

// AuthTokenPath is the file in SecretsDir that holds Ray's authentication
// token (RAY_AUTH_TOKEN_PATH): the token alone, mode 0600.
const AuthTokenPath = SecretsDir + "/ray_auth_token"

// AuthOn reports whether the container starts Ray with its token
// authentication (ContainerEnv sets RAY_AUTH_MODE).
func (s ContainerSpec) AuthOn() bool { return s.Env["RAY_AUTH_MODE"] == "token" }

// hasSecrets reports whether the container receives secrets in its
// SecretsDir: secret env or Ray's token.
func (s ContainerSpec) hasSecrets() bool { return len(s.SecretEnv) > 0 || s.AuthToken != "" }

// secretsTmpfsMiB is the size of SecretsDir's tmpfs in MiB (RunArgs:
// --tmpfs ...,size=1m).
const secretsTmpfsMiB = 1

// SecretsMax is the most bytes of secret env a container can receive: its
// file SecretsDir/env (SecretsFileBytes) must fit in the tmpfs (RunCmd
// writes it once and renames it: one copy at a time; tmpfs counts the
// file's pages, and 1 MiB is whole pages of any page size).
const SecretsMax = secretsTmpfsMiB << 20

// SecretsFileBytes is the size of the file RunCmd writes in SecretsDir:
// a NAME=VALUE line for each of keys, with its value in env.
func SecretsFileBytes(keys []string, env map[string]string) int {
	n := 0
	for _, k := range keys {
		n += len(k) + 1 + len(env[k]) + 1
	}
	return n
}

// CheckSecretsFit refuses secret env (keys of env) whose file SecretsDir's
// tmpfs cannot hold, naming its largest variables and their sizes, never
// a value: validate checks the configuration's values with it, and plan
// each container's exact secret env, before apply changes anything.
func CheckSecretsFit(keys []string, env map[string]string) error {
	total := SecretsFileBytes(keys, env)
	if total <= SecretsMax {
		return nil
	}
	largest := slices.Clone(keys)
	slices.SortStableFunc(largest, func(a, b string) int { return len(env[b]) - len(env[a]) })
	var sizes []string
	for _, k := range largest[:min(3, len(largest))] {
		sizes = append(sizes, fmt.Sprintf("%s (%d bytes)", k, len(env[k])))
	}
	return fmt.Errorf("the sensitive env takes %d bytes in the container's secrets file (a NAME=VALUE line each), whose tmpfs (%s) holds %d; the largest: %s. Pass large secrets as files (a volume, or a path in the image)",
		total, SecretsDir, SecretsMax, strings.Join(sizes, ", "))
}

// ReadSecretsScript is the shell line that exports the variables named
// keys from SecretsDir/env, if the file is there (a container made by an
// earlier rayform has its secrets in Docker's configuration instead).
func ReadSecretsScript(keys []string) string {
	return fmt.Sprintf(`[ ! -r %[1]s/env ] || while IFS= read -r l; do case ${l%%%%=*} in %[2]s) export "$l" ;; esac; done < %[1]s/env`,
		SecretsDir, strings.Join(slices.Sorted(slices.Values(keys)), "|"))
}

// secretsWait is how many tenths of a second the entrypoint waits for its
// secret env before it gives up.
const secretsWait = 600

// EntrypointScript writes vLLM's non-carry-over list and removes the serve
// files of the container's previous life (a record belongs to the
// container's run: a restarted container runs no serve), then execs ray
// start. With secret env, it first waits for SecretsDir/env (RunCmd hands
// it over) and exports it.
func (s ContainerSpec) EntrypointScript() string {
	list, _ := json.Marshal(s.NonCarryOver)
	secrets := ""
	if s.hasSecrets() {
		secrets = fmt.Sprintf(`i=0; while [ ! -f %[1]s/env ]; do i=$((i+1)); if [ $i -gt %[2]d ]; then echo "rayform: the container's secret environment never arrived in %[1]s" >&2; exit 1; fi; sleep 0.1; done; `, SecretsDir, secretsWait)
	}
	if len(s.SecretEnv) > 0 {
		secrets += ReadSecretsScript(s.SecretEnv) + "; "
	}
	clean := ""
	if s.ServeDir != "" {
		clean = fmt.Sprintf("mkdir -p %[1]s && rm -f %[1]s/serve-* && ", s.ServeDir)
	}
	return fmt.Sprintf("%s%smkdir -p %s && printf '%%s\\n' '%s' > %s/ray_non_carry_over_env_vars.json && exec \"$@\"",
		secrets, clean, VLLMConfigRoot, list, VLLMConfigRoot)
}

// RunArgs is the `docker run` command line, without secrets: with secret
// env, the container gets a tmpfs at SecretsDir, where RunCmd hands them
// over. Run it with RunCmd.
func (s ContainerSpec) RunArgs(project string) []string {
	args := []string{"docker", "run", "-d", "--name", s.Name,
		"--network", "host", "--ipc", "host", "--gpus", "all",
		"--restart", "no"}
	labels := s.Labels(project)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		args = append(args, "--label", k+"="+labels[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if slices.Contains(s.SecretEnv, k) {
			continue
		}
		args = append(args, "-e", k+"="+s.Env[k])
	}
	if s.ServeDir != "" {
		args = append(args, "-v", servefiles.Host(project, s.Node, s.Name)+":"+s.ServeDir)
	}
	if s.hasSecrets() {
		args = append(args, "--tmpfs", SecretsDir+":mode=1777,size="+strconv.Itoa(secretsTmpfsMiB)+"m")
	}
	for _, v := range s.Volumes {
		args = append(args, "-v", v)
	}
	args = append(args, s.DockerArgs...)
	args = append(args, "--entrypoint", "/bin/sh", s.Image, "-c", s.EntrypointScript(), "rayform")
	return append(args, s.RayStartArgs()...)
}

// SecretEnvValues returns the sensitive variables and their values: the
// Env of RunCmd.
func (s ContainerSpec) SecretEnvValues() map[string]string {
	return hostplan.SecretValues(s.Env, s.SecretEnv)
}

// RunCmd is the command that starts the container: RunArgs, printing the
// container's id. With secret env, the values travel as the command's Env
// (the transport sends them on stdin, into the remote shell's
// environment), and the command then writes them, from that environment
// by the shell's own printf, to `docker exec -i`'s stdin, which writes
// SecretsDir/env (mode 0600) in the container's tmpfs; the entrypoint
// waits for it. Docker keeps a container's `-e` values in its
// configuration (docker inspect, config.v2.json on the host's disk); it
// keeps neither an exec's stdin nor a tmpfs's content. Values hold no
// newline, carriage return or NUL (validate refuses them).
//
// Ray's token (AuthToken) travels the same way, as the command's
// RAYFORM_RAY_AUTH_TOKEN, and is written to AuthTokenPath before the env
// file, which the entrypoint waits for.
func (s ContainerSpec) RunCmd(project string) transport.Cmd {
	argv := s.RunArgs(project)
	if !s.hasSecrets() {
		return transport.Cmd{Argv: argv}
	}
	var hand strings.Builder
	for _, k := range slices.Sorted(slices.Values(s.SecretEnv)) {
		fmt.Fprintf(&hand, "printf '%%s=%%s\\n' %s \"$%s\"; ", k, k)
	}
	values := map[string]string{}
	maps.Copy(values, s.SecretEnvValues())
	if s.AuthToken != "" {
		fmt.Fprintf(&hand, "printf '%%s=%%s\\n' %s \"$%s\"; ", authTokenVar, authTokenVar)
		values[authTokenVar] = s.AuthToken
	}
	deliver := "umask 077 && : > " + SecretsDir + "/.env && while IFS= read -r l; do case $l in " + authTokenVar + "=*) printf '%s' \"${l#*=}\" > " + SecretsDir + "/.tok && mv " + SecretsDir + "/.tok " + AuthTokenPath + " ;; *) printf '%s\\n' \"$l\" >> " + SecretsDir + "/.env ;; esac; done && mv " + SecretsDir + "/.env " + SecretsDir + "/env"
	script := "id=$(" + shell.Join(argv) + ") || exit $?\n" +
		"printf '%s\\n' \"$id\"\n" +
		"{ " + hand.String() + "} | docker exec -i \"$id\" sh -c " + shell.Quote(deliver) +
		" || { echo " + shell.Quote("rayform: could not hand container "+s.Name+" its secret environment") + " >&2; exit 1; }"
	return transport.Cmd{Script: script, Env: values}
}

// authTokenVar carries Ray's token from rayform to the container's
// SecretsDir (RunCmd); no process in the container has it in its
// environment.
const authTokenVar = "RAYFORM_RAY_AUTH_TOKEN"

// ClusterSpecs returns the desired container of every node of a cluster,
// head first. addrs maps node names to fabric addresses; a node without one
// gets an empty NodeIP (the plan shows it as known after observe).
func ClusterSpecs(cfg *Blocks, rc *RayCluster, addrs map[string]netip.Addr, ifaces map[string]string) []ContainerSpec {
	headIP := addrs[rc.Head]
	headAddr := ""
	if headIP.IsValid() {
		headAddr = netip.AddrPortFrom(headIP, uint16(rc.Port)).String()
	}
	name := ContainerName(rc)
	nw := cfg.Networks[rc.Network]
	volumes := rc.Volumes
	if wv := weightsVolumes(cfg, rc); len(wv) > 0 {
		volumes = slices.Concat(rc.Volumes, wv)
	}
	var specs []ContainerSpec
	for i, node := range rc.Nodes() {
		role := "worker"
		if i == 0 {
			role = "head"
		}
		env, err := cfg.ContainerEnv(rc.Name, node, addrs[node], ifaces[node])
		if err != nil {
			env = map[string]string{}
			for k, v := range rc.Env {
				env[k] = v
			}
		}
		env["VLLM_CONFIG_ROOT"] = VLLMConfigRoot
		var secret []string
		for k := range rc.Env {
			if rc.IsSensitive(fmt.Sprintf("env[%q]", k)) {
				secret = append(secret, k)
			}
		}
		sort.Strings(secret)
		nodeIP := ""
		if a := addrs[node]; a.IsValid() {
			nodeIP = a.String()
		}
		gpus := 0
		if n := cfg.Nodes[node]; n != nil {
			gpus = n.GPUs
		}
		specs = append(specs, withRecord(rc, ContainerSpec{
			Resource:      rc.Addr,
			Node:          node,
			Role:          role,
			Name:          name,
			Image:         rc.Image,
			NodeIP:        nodeIP,
			HeadAddr:      headAddr,
			GPUs:          gpus,
			Env:           env,
			SecretEnv:     secret,
			Volumes:       volumes,
			DockerArgs:    rc.DockerArgs,
			Port:          rc.Port,
			DashboardPort: rc.DashboardPort,
			DashboardHost: DashboardHost,
			NonCarryOver:  nonCarryOver(secret),
			ServeDir:      servefiles.Dir,
			SecretKey:     cfg.SecretKeys()[rc.Name],
			AuthToken:     authToken(cfg, rc),
		}, nodeIface(nw, node, ifaces)))
	}
	return specs
}

// weightsVolumes are the mounts of rc's containers for the weights its
// serves load (kind.Mounter): each provider's directory at the same path,
// read-only (rayform stages the weights on the host; vLLM reads them
// offline, HF_HUB_OFFLINE=1, and a process of the container can neither
// alter nor plant files in the host's cache), unless a volume of rc mounts
// something there already (nil when none, which leaves the containers'
// specs as they were).
func weightsVolumes(cfg *Blocks, rc *RayCluster) []string {
	var out []string
	for _, dir := range kind.MountsOn(cfg.Config, rc.Name) {
		if !mountsAt(rc.Volumes, dir) {
			out = hostplan.AppendUnique(out, dir+":"+dir+":ro")
		}
	}
	return out
}

// mountsAt reports whether one of volumes (docker -v specs,
// HOST:CONTAINER[:OPTIONS]) mounts something at the container path dir.
func mountsAt(volumes []string, dir string) bool {
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && path.Clean(parts[1]) == dir {
			return true
		}
	}
	return false
}

// nonCarryOver is vLLM's list of variables its Ray executor must not copy
// from the driver to the workers: the network's pins (each node has its
// own), the cluster's sensitive env (each node's container has it from
// its own secrets) and the secrets a serve hands vLLM on the head (its
// api_key as VLLM_API_KEY, and the Hub's token names): vLLM's Ray executor
// copies VLLM_* and HF_TOKEN from the driver to every worker over the
// fabric (vllm/ray/ray_env.py), so that no secret crosses the fabric in
// vLLM's environment map; a worker reads its own from its node's
// container.
func nonCarryOver(secret []string) []string {
	out := network.EnvKeys()
	for _, k := range slices.Concat(secret, []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "VLLM_API_KEY"}) {
		out = hostplan.AppendUnique(out, k)
	}
	return out
}
