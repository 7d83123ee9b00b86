package diagnose

import (
	"regexp"
	"slices"
	"strings"
)

// This file holds the rules of the hub domain: the Hugging Face Hub's
// answers for the model repository.

// ---- Hugging Face refused the model repository ------------------------------

var (
	// huggingface_hub: "Cannot access gated repo for url https://huggingface.co/<repo>/resolve/...",
	// "Repository Not Found for url: https://huggingface.co/<repo>/resolve/...",
	// requests: "401 Client Error: Unauthorized for url: https://huggingface.co/<repo>/resolve/...".
	hfURLRE = regexp.MustCompile(`https://huggingface\.co/(?:api/models/)?([^\s/]+(?:/[^\s/]+)?)/(?:resolve|tree|revision|auth-check)\b`)
	// "Access to model black-forest-labs/FLUX.1-dev is restricted."
	hfRestrictedRE = regexp.MustCompile(`Access to model (\S+) is restricted(.*)`)
	// transformers' wrapping of a RepositoryNotFoundError: "<repo> is not
	// a local folder and is not a valid model identifier listed on
	// 'https://huggingface.co/models'" (utils/hub.py cached_files), "<repo>
	// is not a local folder or a valid repository name on 'https://hf.co'."
	hfNotIdentifierRE = regexp.MustCompile(`(\S+) is not a local folder (?:and is not a valid model identifier|or a valid repository name)`)
	hfStatusRE        = regexp.MustCompile(`\b(401|403|404) Client Error`)
	hfAuthStatusRE    = regexp.MustCompile(`\b(401|403) Client Error`)
)

func matchHF(b string) bool {
	switch {
	case containsAny(b, "Entry Not Found", "EntryNotFoundError"):
		return false // a file missing from an existing repository, not access
	case containsAny(b, "Cannot access gated repo", "GatedRepoError", "RepositoryNotFoundError", "You are trying to access a gated repo"):
		return true
	case strings.Contains(b, "Repository Not Found for url: https://huggingface.co/"):
		return true
	case strings.Contains(b, " Client Error") && strings.Contains(b, "huggingface.co/") && hfAuthStatusRE.MatchString(b):
		return true
	case strings.Contains(b, "Access to model ") && strings.Contains(b, " is restricted"):
		return true
	case strings.Contains(b, " is not a local folder ") && hfNotIdentifierRE.MatchString(b):
		return true
	}
	return false
}

func buildHF(s *scan, hits []int) (Diagnosis, bool) {
	r := readHFRefusal(s, hits)
	ev := make([]Evidence, 0, len(r.picked))
	for _, j := range r.picked {
		ev = append(ev, s.evidence(j))
	}
	d := Diagnosis{Evidence: ev}
	host := s.nodeOf(hits[0])
	if r.gated || r.restricted != "" {
		r.gatedRepo(&d, s.ctx, host)
	} else {
		r.repoNotFound(&d, s.ctx, host)
	}
	return d, true
}

// hfRefusal is what the Hub's refusal lines say: the repository, the HTTP
// status, the Hub's reason for a restricted repository, whether it is
// gated, and the lines that say so (in log order).
type hfRefusal struct {
	repo, status, restricted string
	gated                    bool
	picked                   []int
}

// readHFRefusal reads the refusal from the rule's hits, and the status
// line huggingface_hub prints on its own above the URL ("403 Client
// Error. (Request ID: ...)").
func readHFRefusal(s *scan, hits []int) hfRefusal {
	var r hfRefusal
	for _, j := range hits {
		b := s.lines[j].body
		if m := hfStatusRE.FindStringSubmatch(b); m != nil && r.status == "" {
			r.status = m[1]
		}
		if containsAny(b, "Cannot access gated repo", "GatedRepoError", "gated repo.") {
			r.gated = true
		}
		if m := hfRestrictedRE.FindStringSubmatch(b); m != nil {
			r.repo, r.restricted = strings.TrimSuffix(m[1], "."), m[2]
		}
		if m := hfURLRE.FindStringSubmatch(b); m != nil && r.repo == "" {
			r.repo = strings.TrimSuffix(m[1], ".")
		}
		if m := hfNotIdentifierRE.FindStringSubmatch(b); m != nil && r.repo == "" {
			r.repo = m[1]
		}
		// The lines that say what happened, in log order: the status, the
		// URL refused, the Hub's own reason.
		if len(r.picked) < 3 && (hfStatusRE.MatchString(b) || containsAny(b, "Cannot access gated repo", "Repository Not Found", "Access to model ", " is not a local folder ")) {
			r.picked = append(r.picked, j)
		}
	}
	for _, j := range hits {
		lo, _ := s.logSpan(j)
		for k := max(lo, j-3); k < j && r.status == ""; k++ {
			if m := hfStatusRE.FindStringSubmatch(s.lines[k].body); m != nil {
				r.status = m[1]
				if len(r.picked) < 3 && !slices.Contains(r.picked, k) {
					r.picked = append([]int{k}, r.picked...)
				}
			}
		}
	}
	if len(r.picked) == 0 {
		r.picked = hits[:1]
	}
	slices.Sort(r.picked)
	return r
}

// hfTokenFix is how to give vllm serve a token, and check it.
func hfTokenFix(c Context) string {
	return "HF_TOKEN=<a token of an account with access> in the environment of vllm serve on every node that downloads (rayform: env[\"HF_TOKEN\"] of " + c.cluster() + ", a sensitive variable); " +
		"check the token with `hf auth whoami` (older huggingface_hub: `huggingface-cli whoami`)"
}

// gatedRepo completes d for a gated repository: no valid token, or an
// account not granted access.
func (r hfRefusal) gatedRepo(d *Diagnosis, c Context, host string) {
	d.Title = "Hugging Face refused the gated repository " + orDefault(r.repo, "the model repository") + onHost(host)
	why := "The repository is gated: its files are served only to an account that accepted its conditions on the model page, and only with that account's token."
	switch {
	case strings.Contains(r.restricted, "not in the authorized list") || r.status == "403":
		why += " The token was sent and is valid, but its account has not been granted access (HTTP 403)."
	case strings.Contains(r.restricted, "You must be authenticated"):
		why += " No valid token was sent (HTTP 401): the process has no HF_TOKEN, or the token is wrong or expired."
	default:
		why += " HTTP " + orDefault(r.status, "401") + ": no valid token was sent, or the token's account has not been granted access."
	}
	d.Explanation = why
	d.Fix = "Request access on https://huggingface.co/" + orDefault(r.repo, "<repo>") + " with the account whose token vLLM uses (wait until it is granted), and set " + hfTokenFix(c) + "."
}

// repoNotFound completes d for a repository the Hub does not show: a
// wrong name (a path, no namespace) or a private one without a token.
func (r hfRefusal) repoNotFound(d *Diagnosis, c Context, host string) {
	d.Title = "Hugging Face has no repository " + orDefault(r.repo, "the model repository") + " visible to this process" + onHost(host)
	why := "The Hub answers \"Repository Not Found\" (HTTP " + orDefault(r.status, "401") + ") both when the name does not exist and when the repository is private or gated and the request carried no valid token: it does not reveal which."
	switch {
	case strings.HasPrefix(r.repo, "/") || strings.HasPrefix(r.repo, "./") || strings.HasPrefix(r.repo, "~"):
		why += " " + r.repo + " is a path: no such directory exists where the process runs (inside its container, unless it is mounted there), so it was taken for a Hub name."
	case r.repo != "" && !strings.Contains(r.repo, "/"):
		why += " " + r.repo + " has no namespace (owner/name): Hub repositories are named like Qwen/Qwen3-8B, so this name is most likely wrong."
	}
	d.Explanation = why
	d.Fix = "Check the model name on " + c.serve() + " (open https://huggingface.co/" + orDefault(r.repo, "<repo>") + "); if it is private or gated, set " + hfTokenFix(c) + "."
}
