package kindstest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/engine/plan"
	"github.com/rayform/rayform/resources/cluster"
	"github.com/rayform/rayform/resources/serve"
)

// keyedToken is the bench configuration's token; keyedConfig gives it to
// the serve's api_key too, so both the containers and the serve record a
// digest of it.
const keyedToken = "hf_not_a_real_token"

func keyedConfig(token string) []byte {
	src := strings.Replace(string(benchConfig(2)), "  max_model_len          = 32768\n", "  max_model_len          = 32768\n  api_key                = var.hf_token\n", 1)
	return []byte(strings.Replace(src, `default   = "`+keyedToken+`"`, `default   = "`+token+`"`, 1))
}

// unkeyedDigest is the digest earlier versions recorded: the first 64 bits
// of the token's plain SHA-256, one hash per guess.
func unkeyedDigest(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:8])
}

// planWithKeys plans src against c's facts with the secret-digest keys
// keys, as rayform plan does once the heads' probes read them.
func planWithKeys(t *testing.T, src []byte, c converged, keys map[string][]byte) *plan.Plan {
	t.Helper()
	cfg := planConfig(t, string(src), c.facts)
	cfg.SetSecretKeys(keys)
	return Plan(PlanInput{Config: cfg, Facts: c.facts, Project: benchProject}).Plan
}

func actions(p *plan.Plan) map[string]plan.Action {
	out := map[string]plan.Action{}
	for _, ch := range p.Changes {
		out[ch.Address] = ch.Action
	}
	return out
}

// Issue 23, item 7: with the deployment's key, what rayform records of a
// secret (spec hashes, the rayform.attrs label, the serve record, the
// docker exec that writes it) holds only an HMAC under the key, never the
// plain digest of earlier versions.
func TestKeyedDigestsHoldNoPlainDigest(t *testing.T) {
	key := bytes.Repeat([]byte{7}, observe.SecretKeyLen)
	keyed := convergedFrom(t, keyedConfig(keyedToken), map[string][]byte{"main": key})
	unkeyed := convergedFrom(t, keyedConfig(keyedToken), nil)
	cfg := planConfig(t, string(keyedConfig(keyedToken)), keyed.facts)
	cfg.SetSecretKeys(map[string][]byte{"main": key})
	spec, err := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves["llama"])
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for node, hf := range keyed.facts.Hosts {
		for _, c := range hf.Containers.List {
			labels, _ := json.Marshal(c.Labels)
			seen = append(seen, string(labels), attrsLabel(c))
			if u := unkeyed.facts.Hosts[node].Containers.List[0].SpecHash; u == c.SpecHash {
				t.Errorf("%s: the keyed spec hash is the unkeyed one", node)
			}
			if !strings.Contains(attrsLabel(c), "hmac-sha256:") {
				t.Errorf("%s: rayform.attrs holds no keyed digest: %s", node, attrsLabel(c))
			}
		}
	}
	seen = append(seen, strings.Join(spec.ExecArgs(""), " "))
	rec, _ := json.Marshal(keyed.facts.Hosts["gpu[\"h1\"]"].Records)
	seen = append(seen, string(rec))
	if !strings.Contains(strings.Join(seen, "\n"), "hmac-sha256:") {
		t.Fatalf("no keyed digest in what was scanned: the test proves nothing:\n%s", strings.Join(seen, "\n"))
	}
	for _, s := range seen {
		if strings.Contains(s, unkeyedDigest(keyedToken)) || strings.Contains(s, keyedToken) {
			t.Errorf("the token or its unkeyed digest is in %s", s)
		}
	}
	other := bytes.Repeat([]byte{8}, observe.SecretKeyLen)
	cfg.SetSecretKeys(map[string][]byte{"main": other})
	if s2, _ := serve.ServeSpecFor(serve.View(cfg.Config), cfg.Serves["llama"]); s2.Hash() == spec.Hash() {
		t.Error("the serve's hash does not depend on the key")
	}
}

// Issue 23, item 7: an upgrade replaces nothing whose secret did not
// change. Containers and a serve made by an earlier rayform (labelled with
// unkeyed digests) are current to a plan that has the key; a changed
// secret is still a change; and what is made with the key is current.
func TestKeyedDigestUpgrade(t *testing.T) {
	key := bytes.Repeat([]byte{7}, observe.SecretKeyLen)
	keys := map[string][]byte{"main": key}
	legacy := convergedFrom(t, keyedConfig(keyedToken), nil)
	if l := attrsLabel(legacy.facts.Hosts[`gpu["h1"]`].Containers.List[0]); !strings.Contains(l, `"sha256:`+unkeyedDigest(keyedToken)) {
		t.Fatalf("the legacy container is not labelled the old way: %s", l)
	}
	checkNoChanges(t, planWithKeys(t, keyedConfig(keyedToken), legacy, keys))
	checkNoChanges(t, planWithKeys(t, keyedConfig(keyedToken), legacy, nil))

	// Replaced for another reason, the legacy ones show their secrets
	// unchanged: compared in the form they were made with.
	other := strings.NewReplacer("vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.11.1", "= 32768", "= 16384").Replace(string(keyedConfig(keyedToken)))
	for _, ch := range planWithKeys(t, []byte(other), legacy, keys).Changes {
		for _, a := range ch.Attrs {
			if (a.Name == "env" || a.Name == "api_key") && a.Changed() {
				t.Errorf("%s: %s shown changed, though only the image and max_model_len changed", ch.Address, a.Name)
			}
		}
		if ch.Action != plan.Replace {
			t.Errorf("%s: %s, want replace", ch.Address, ch.Action)
		}
	}

	changed := actions(planWithKeys(t, keyedConfig("hf_another_token"), legacy, keys))
	for _, addr := range []string{"ray_cluster.main", "vllm_serve.llama"} {
		if a := changed[addr]; a != plan.Replace {
			t.Errorf("%s after the secret changed: %q, want replace (changes %v)", addr, a, changed)
		}
	}

	current := convergedFrom(t, keyedConfig(keyedToken), keys)
	checkNoChanges(t, planWithKeys(t, keyedConfig(keyedToken), current, keys))
	changed = actions(planWithKeys(t, keyedConfig("hf_another_token"), current, keys))
	if a := changed["vllm_serve.llama"]; a != plan.Replace {
		t.Errorf("keyed serve after the secret changed: %q, want replace (changes %v)", a, changed)
	}
	// Under another key (the key file lost), the keyed digests no longer
	// match: replaced, never taken as current.
	if a := actions(planWithKeys(t, keyedConfig(keyedToken), current, map[string][]byte{"main": bytes.Repeat([]byte{9}, observe.SecretKeyLen)}))["ray_cluster.main"]; a != plan.Replace {
		t.Errorf("containers keyed with another key: %q, want replace", a)
	}
}

// attrsLabel is a container's rayform.attrs label, decoded.
func attrsLabel(c observe.Container) string {
	b, err := base64.RawURLEncoding.DecodeString(c.Labels[cluster.LabelAttrs])
	if err != nil {
		return "undecodable: " + err.Error()
	}
	return string(b)
}

// The head's probe reads the key only for a cluster with secrets (Ray's
// token is one), so a configuration without secrets keeps its probe; UseSecretKeys takes the
// key the head's probe read, by cluster.
func TestSecretKeyReadOnlyWithSecrets(t *testing.T) {
	c := convergedFrom(t, keyedConfig(keyedToken), nil)
	name := "bench.main" // lock.Name(benchProject, "main")
	spec := ObserveSpec(c.loaded, nil, benchProject)
	for host, hs := range spec.Hosts {
		want := 0
		if host == c.loaded.RayClusters["main"].Head {
			want = 1
		}
		if len(hs.SecretKeys) != want || want == 1 && hs.SecretKeys[0] != name {
			t.Errorf("%s reads keys %v, want %d (%s)", host, hs.SecretKeys, want, name)
		}
	}
	// Without secrets and without Ray's token authentication (which
	// reads the deployment's token beside the key).
	plain := strings.NewReplacer("    HF_TOKEN = var.hf_token\n", "", "  api_key                = var.hf_token\n", "", "ray_cluster \"main\" {\n", "ray_cluster \"main\" {\n  auth = \"none\"\n").Replace(string(keyedConfig(keyedToken)))
	for host, hs := range ObserveSpec(convergedFrom(t, []byte(plain), nil).loaded, nil, benchProject).Hosts {
		if len(hs.SecretKeys) != 0 {
			t.Errorf("without secrets, %s reads keys %v", host, hs.SecretKeys)
		}
	}
	key := bytes.Repeat([]byte{7}, observe.SecretKeyLen)
	head := c.facts.Hosts[c.loaded.RayClusters["main"].Head]
	head.SecretKeys = map[string][]byte{name: key}
	cfg := planConfig(t, string(keyedConfig(keyedToken)), c.facts)
	cfg.UseSecretKeys(c.facts, benchProject)
	if !bytes.Equal(cfg.SecretKeys()["main"], key) {
		t.Errorf("SecretKeys = %v, want the head's key for main", cfg.SecretKeys())
	}
	cfg.UseSecretKeys(c.facts, "another-project")
	if cfg.SecretKeys() != nil {
		t.Errorf("another project's plan took the key: %v", cfg.SecretKeys())
	}
}
