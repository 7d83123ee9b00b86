package model

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/rayform/rayform/engine/config"
	"github.com/rayform/rayform/engine/observe"
)

// Type is the model kind's block type.
const Type = "model"

// DefaultCacheDir is the hosts' Hugging Face hub cache (HF_HUB_CACHE)
// when a model block does not set cache_dir.
const DefaultCacheDir = "/var/lib/rayform/huggingface/hub"

// DefaultEndpoint is the hub's URL (HF_ENDPOINT) when a model block does
// not set endpoint.
const DefaultEndpoint = "https://huggingface.co"

// Model is a model block: one revision of a hub repository, in the hub
// cache at CacheDir on every node that needs it.
type Model struct {
	config.Decl
	Name   string `rayform:",name"`
	Source string `rayform:"source"`
	// Rev is the revision argument (Revision is what the serve runs).
	Rev      string `rayform:"revision"`
	CacheDir string `rayform:"cache_dir"`
	// Token is the hub token, "" for none; it reaches the hosts only on
	// stdin (HF_TOKEN in the downloader's environment), never in argv.
	Token    string `rayform:"token"`
	Endpoint string `rayform:"endpoint"`

	// resolve answers the hub's list of the revision's files (Lookup),
	// asked once, when first needed; nil when Lookup was not called.
	resolve func() *Resolution
}

// Resolution is the hub's list of the revision's files, or the nodes'
// record of it when the hub does not answer (Lookup, UseResolution),
// asked on the first call; nil when the model was not looked up. Only a
// plan asks: a destroy never reaches for the hub.
func (m *Model) Resolution() *Resolution {
	if m.resolve == nil {
		return nil
	}
	return m.resolve()
}

// Descriptor is the model block's schema (Kind.Schema).
func Descriptor() config.Kind {
	str := cty.String
	return config.Kind{
		Type:    Type,
		Noun:    "model",
		Summary: "a Hugging Face model revision for the nodes that serve it",
		Args: []config.Arg{
			{Name: "source", Type: str, Required: true, Exported: true, Applied: true, ForcesReplacement: true,
				Description: "the hub repository, `\"ORG/NAME\"`; a `vllm_serve` uses it as `model = model.NAME.source`"},
			{Name: "revision", Type: str, Default: cty.StringVal("main"), Exported: true, Applied: true, ForcesReplacement: true,
				Description: "branch, tag or commit of the repository; plan resolves it to a commit"},
			{Name: "cache_dir", Type: str, Default: cty.StringVal(DefaultCacheDir), Exported: true, Applied: true, ForcesReplacement: true,
				Description: "the Hugging Face hub cache on every host (`HF_HUB_CACHE`: files under `models--ORG--NAME/snapshots/COMMIT/`)"},
			{Name: "token", Type: str, Sensitive: true, DefaultDoc: "none",
				Description: "hub token for a gated or private repository, from a sensitive variable; it reaches a host only as `HF_TOKEN` on stdin, never in argv, a file or a log"},
			{Name: "endpoint", Type: str, Default: cty.StringVal(DefaultEndpoint), Exported: true,
				Description: "the hub's URL (`HF_ENDPOINT`), for a mirror or the lab's hub"},
		},
		New:   func() any { return &Model{} },
		Check: check,
	}
}

var (
	revRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`)
	dirRE = regexp.MustCompile(`^/[A-Za-z0-9._/-]+$`)
)

// check checks a model block's arguments on their own.
func check(b *config.Block) {
	m := b.Value().(*Model)
	if b.IsSet("source") && !ValidRepo(m.Source) {
		b.Error("source", "Invalid model source",
			fmt.Sprintf("source is %q; want a hub repository id ORG/NAME, like \"Qwen/Qwen3-8B\" (letters, digits, '.', '_', '-'; no \"--\", which the cache's directory names use as the separator).", m.Source))
	}
	if b.IsSet("revision") && (!revRE.MatchString(m.Rev) || strings.Contains(m.Rev, "..") || len(m.Rev) > 200) {
		b.Error("revision", "Invalid revision",
			fmt.Sprintf("revision is %q; want a branch, tag or commit of the repository, like \"main\" or a 40-character commit hash.", m.Rev))
	}
	if b.IsSet("cache_dir") && (!dirRE.MatchString(m.CacheDir) || path.Clean(m.CacheDir) != m.CacheDir || strings.Contains(m.CacheDir, "/../")) {
		b.Error("cache_dir", "Invalid cache directory",
			fmt.Sprintf("cache_dir is %q; want an absolute, clean path of letters, digits, '.', '_', '-' and '/', like %q.", m.CacheDir, DefaultCacheDir))
	}
	if b.IsSet("endpoint") {
		u, err := url.Parse(m.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
			b.Error("endpoint", "Invalid hub endpoint",
				fmt.Sprintf("endpoint is %q; want the hub's base URL, like %q.", m.Endpoint, DefaultEndpoint))
		}
	}
	// The token is never quoted back: it is a secret.
	if strings.ContainsAny(m.Token, "\r\n\x00 ") {
		b.Error("token", "Invalid hub token", "token contains whitespace or a NUL byte, which a hub token never does; check the variable it comes from.")
	}
}

// Dir is the repository's directory in the model's cache on every host.
func (m *Model) Dir() string { return path.Join(m.CacheDir, CacheDirName(m.Source)) }

// Serving returns the model blocks of cfg whose source is a serve's model
// (a vllm_serve written `model = model.NAME.source`), sorted by name.
func Serving(cfg *config.Config, serveModel string) []*Model {
	var out []*Model
	for _, v := range cfg.Blocks(Type) {
		if m := v.(*Model); m.Source == serveModel {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *Model) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Copies are the nodes' copies of m as the tree probe of m.Dir() saw them
// (an unobserved node's tree is empty, with its free space unknown).
func (m *Model) Copies(nodes []string, facts func(node string) *observe.HostFacts) []NodeCopy {
	l := HFCacheLayout(m.CacheDir, m.Source)
	var out []NodeCopy
	for _, n := range nodes {
		t := observe.TreeFacts{FreeBytes: -1, Err: "not observed"}
		if f := facts(n); f != nil {
			if got, ok := f.Trees[l.Dir]; ok {
				t = got
			}
		}
		out = append(out, NodeCopy{Node: n, Layout: l, Tree: t})
	}
	return out
}
