package cluster

import (
	"fmt"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/lock"
	"github.com/rayform/rayform/engine/names"
	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/kind"
	"github.com/rayform/rayform/resources/kit"
)

// hasSecrets reports whether rc or a block on it (kind.SecretHolder: its
// serves) has a sensitive value
// that a digest records (an env entry, an api_key): only then does a plan
// read the cluster's secret-digest key, so a configuration without secrets
// keeps its probes and its hashes.
func hasSecrets(cfg *Config, rc *RayCluster) bool {
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
func secretKeyProbes(spec *observe.Spec, cfg *Config, project string) {
	for _, rc := range sortedClusters(cfg) {
		if !hasSecrets(cfg, rc) {
			continue
		}
		hs, ok := spec.Hosts[rc.Head]
		if !ok {
			continue
		}
		hs.SecretKeys = kit.AppendUnique(hs.SecretKeys, secretKeyName(project, rc.Name))
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

// secretKeyName is the name of a cluster's key file, as the lock's fence
// names it (engine/lock.AdvanceFence): its lock's name as one path segment.
func secretKeyName(project, cluster string) string {
	return names.Segment(lock.Name(project, cluster))
}
