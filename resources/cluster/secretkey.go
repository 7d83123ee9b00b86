package cluster

import (
	"fmt"
	"strconv"

	"github.com/rayform/rayform/engine/transport/shell"
	"github.com/rayform/rayform/resources/node"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/kind"
	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/names"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/hostplan"
)

// hasSecrets reports whether rc or a block on it (kind.SecretHolder: its
// serves) has a sensitive value
// that a digest records (an env entry, an api_key): only then does a plan
// read the cluster's secret-digest key, so a configuration without secrets
// keeps its probes and its hashes.
func hasSecrets(cfg *Blocks, rc *RayCluster) bool {
	if rc.Auth == AuthToken {
		return true
	}
	for k := range rc.Env {
		if rc.IsSensitive(fmt.Sprintf("env[%q]", k)) {
			return true
		}
	}
	return kind.SecretsOn(cfg.Config, rc.Name)
}

// secretKeyProbes asks the head of every cluster with secrets for the
// deployment's secret-digest key, which the lock holder makes (see
// engine/lock.AdvanceFence): one more section of the head's first probe.
func secretKeyProbes(spec *observe.Spec, cfg *Blocks, project string) {
	for _, rc := range sortedClusters(cfg) {
		if !hasSecrets(cfg, rc) {
			continue
		}
		hs, ok := spec.Hosts[rc.Head]
		if !ok {
			continue
		}
		hs.SecretKeys = hostplan.AppendUnique(hs.SecretKeys, secretKeyName(project, rc.Name))
		spec.Hosts[rc.Head] = hs
	}
}

// ReadSecretKeys are the clusters' secret-digest keys (by cluster name)
// the heads' probes read, for kind.Facts.SecretKeys. A
// cluster whose key does not exist yet (no apply made it) digests its
// secrets unkeyed: there is nothing of it on the hosts to compare them
// with but what an earlier rayform made, unkeyed; apply makes the key
// under the lock and observes again before it creates anything.
func ReadSecretKeys(cfg *config.Config, facts *observe.Facts, project string) map[string][]byte {
	var keys map[string][]byte
	for _, rc := range sortedClusters(View(cfg)) {
		if facts == nil {
			break
		}
		head := facts.Hosts[rc.Head]
		if head == nil {
			continue
		}
		if k, ok := head.SecretKeys[secretKeyName(project, rc.Name)]; ok {
			if keys == nil {
				keys = map[string][]byte{}
			}
			keys[rc.Name] = k
		}
	}
	return keys
}

// Ray's authentication modes (RayCluster.Auth).
const (
	// AuthToken is Ray's token authentication (RAY_AUTH_MODE=token, Ray
	// 2.52 and later), with the deployment's bearer token.
	AuthToken = "token"
	// AuthNone leaves Ray without authentication.
	AuthNone = "none"
)

// bearerLock is the lock name whose bearer token the cluster's Ray
// demands ("" without authentication): the HTTP probes of its dashboard
// send it (observe.HTTPProbe.Bearer).
func (r *RayCluster) bearerLock(project string) string {
	if r.Auth != AuthToken {
		return ""
	}
	return secretKeyName(project, r.Name)
}

// ReadBearers are the clusters' bearer tokens (by cluster name) the
// heads' probes read, for kind.Facts.Bearers; a cluster with token
// authentication whose token was not made yet has none (apply makes it
// under the lock and observes again before it creates anything).
func ReadBearers(cfg *config.Config, facts *observe.Facts, project string) map[string]string {
	out := map[string]string{}
	for _, rc := range sortedClusters(View(cfg)) {
		if facts == nil || rc.Auth != AuthToken {
			continue
		}
		if head := facts.Hosts[rc.Head]; head != nil && head.Bearers[secretKeyName(project, rc.Name)] != "" {
			out[rc.Name] = head.Bearers[secretKeyName(project, rc.Name)]
		}
	}
	return out
}

// authToken is the token rc's Ray demands, as the head's probe read it
// ("" without authentication or before it is made).
func authToken(cfg *Blocks, rc *RayCluster) string {
	if rc.Auth != AuthToken {
		return ""
	}
	return kind.ConfigFacts(cfg.Config).Bearers[rc.Name]
}

// secretKeyName is the name of a cluster's key file, as the lock's fence
// names it (engine/lock.AdvanceFence): its lock's name as one path segment.
func secretKeyName(project, cluster string) string {
	return names.Segment(lock.Name(project, cluster))
}

// dashboardTunnel is the ssh command that forwards the operator's port to
// the dashboard on head's loopback (DashboardHost).
func dashboardTunnel(head *node.Node, port int) string {
	fwd := fmt.Sprintf("%d:%s:%d", port, DashboardHost, port)
	argv := []string{"ssh", "-N", "-L", fwd}
	if head.Port > 0 {
		argv = append(argv, "-p", strconv.Itoa(head.Port))
	}
	dest := head.Host
	if head.User != "" {
		dest = head.User + "@" + dest
	}
	return shell.Join(append(argv, dest))
}
