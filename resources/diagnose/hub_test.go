package diagnose

import (
	"strings"
	"testing"
)

// TestHFNotAModelIdentifier: transformers' wrapping of the Hub's
// RepositoryNotFoundError (transformers 5.19 utils/hub.py: "… is not a
// local folder and is not a valid model identifier listed on
// 'https://huggingface.co/models'", and "… is not a local folder or a valid
// repository name on 'https://hf.co'") names the repository the Hub has
// no answer for.
func TestHFNotAModelIdentifier(t *testing.T) {
	tests := []struct{ name, log, repo, why string }{
		{
			// AIAnytime/Llama2-Medical-Chatbot#6 (comment of 2023-08-09).
			name: "model identifier",
			log: "OSError: private/model is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'\n" +
				"If this is a private repository, make sure to pass a token having permission to this repo with `use_auth_token` or log in with `huggingface-cli login` and pass `use_auth_token=True`.\n",
			repo: "private/model",
		},
		{
			name: "repository name",
			log:  "OSError: Qwen/Qwen3-8BB is not a local folder or a valid repository name on 'https://hf.co'.\n",
			repo: "Qwen/Qwen3-8BB",
		},
		{
			// A local path that is not there (a model directory not
			// mounted into the container) is taken for a Hub name.
			name: "missing path",
			log:  "OSError: /models/Qwen3-8B is not a local folder and is not a valid model identifier listed on 'https://huggingface.co/models'\n",
			repo: "/models/Qwen3-8B", why: "is a path: no such directory exists where the process runs",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Classify(Input{Logs: []Log{{Host: "gpu1", Source: "log", Text: []byte(tt.log)}}})
			if d.Cause != HFAccess || !strings.Contains(d.Title, tt.repo) || !strings.Contains(d.Explanation, tt.why) {
				t.Fatalf("cause %s, want %s naming %s:\n%s", d.Cause, HFAccess, tt.repo, d.Text())
			}
		})
	}
}
