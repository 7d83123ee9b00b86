package serve

import (
	"fmt"
	"maps"
	"slices"

	"github.com/rayform/rayform/engine/observe"
	"github.com/rayform/rayform/resources/servefiles"
)

// ServeURL is the loopback URL of path on a serve's port.
func ServeURL(port int, path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", port, path)
}

// serveHTTPProbes ask for /health and /v1/models on a serve's port, each
// sent only when the port's listener is a process of the head container
// (rayform's serve), never to a foreign listener.
func serveHTTPProbes(container string, port int) []observe.HTTPProbe {
	return []observe.HTTPProbe{
		{URL: ServeURL(port, "/health"), Owner: container},
		{URL: ServeURL(port, "/v1/models"), Owner: container},
	}
}

// ServeAnswer is what the serve's own port answered (Observed false when
// the head was not asked).
func ServeAnswer(hf *observe.HostFacts, port int) VLLM {
	if hf == nil {
		return VLLM{}
	}
	h, ok := hf.HTTP[ServeURL(port, "/health")]
	return ParseVLLM(h, hf.HTTP[ServeURL(port, "/v1/models")], ok)
}

// ServeRecordName is the file name (without extension) of a serve's
// record, pid, lock and log in servefiles.Dir.
func ServeRecordName(name string) string { return "serve-" + name }

// serveRecordProbe asks for a serve's record in the head container.
func serveRecordProbe(project, node, container, name string) observe.RecordProbe {
	return observe.RecordProbe{Name: ServeRecordName(name), HostDir: servefiles.Host(project, node, container),
		Container: container, Dir: servefiles.Dir, LegacyDir: servefiles.LegacyDir}
}

// ServeRecord is the record of serve name the head's probe read.
func ServeRecord(hf *observe.HostFacts, name string) observe.ProcessRecord {
	if hf == nil {
		return observe.ProcessRecord{}
	}
	return hf.Records[ServeRecordName(name)]
}

func sortedServes(cfg *Blocks) []*VLLMServe {
	out := make([]*VLLMServe, 0, len(cfg.Serves))
	for _, k := range slices.Sorted(maps.Keys(cfg.Serves)) {
		out = append(out, cfg.Serves[k])
	}
	return out
}
