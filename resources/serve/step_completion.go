package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/rayform/rayform/resources/stepenv"
)

// completionMaxTokens is the size of the smoke-test completion.
const completionMaxTokens = 16

// completionPrompt is the smoke-test prompt.
const completionPrompt = "The capital of France is"

// completionStep sends one small completion and reports tokens per second.
type completionStep struct{ r *serveRun }

func newCompletionStep(r *serveRun) *completionStep { return &completionStep{r: r} }

// Name names the served model and the head.
func (s *completionStep) Name() string {
	return fmt.Sprintf("test a completion of %s on %s", s.r.spec.ServedName, s.r.node())
}

// Check always tests.
func (s *completionStep) Check(context.Context) (bool, error) { return false, nil }

// Run posts the completion and reports its speed.
func (s *completionStep) Run(ctx context.Context, progress func(string)) error {
	body, _ := json.Marshal(map[string]any{"model": s.r.spec.ServedName, "prompt": completionPrompt,
		"max_tokens": completionMaxTokens, "temperature": 0})
	res, err := s.r.curl(ctx, "-m", "300", "-w", "\\n%{http_code} %{time_total}",
		"-H", "Content-Type: application/json", "-d", string(body), s.r.url("/v1/completions"))
	if err != nil {
		return fmt.Errorf("POST /v1/completions on %s: %w", s.r.node(), err)
	}
	out, tail := stepenv.HTTPAnswer(res.Stdout)
	code, total, _ := strings.Cut(tail, " ")
	if code != "200" {
		return s.r.diagnose(ctx, fmt.Errorf("POST /v1/completions on %s answered HTTP %s: %s", s.r.node(), code, shortBody(out)))
	}
	var resp struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return fmt.Errorf("POST /v1/completions on %s: %w: %s", s.r.node(), err, shortBody(out))
	}
	secs, _ := strconv.ParseFloat(total, 64)
	n := resp.Usage.CompletionTokens
	if secs > 0 {
		progress(fmt.Sprintf("completion: %d tokens in %.2fs (%.1f tokens/s)", n, secs, float64(n)/secs))
	} else {
		progress(fmt.Sprintf("completion: %d tokens", n))
	}
	return nil
}

// Verify has nothing to read back: the answer was the test.
func (s *completionStep) Verify(context.Context) error { return nil }
