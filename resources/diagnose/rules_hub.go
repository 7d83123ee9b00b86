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
	var repo, status, restricted string
	gated := false
	var picked []int
	for _, j := range hits {
		b := s.lines[j].body
		if m := hfStatusRE.FindStringSubmatch(b); m != nil && status == "" {
			status = m[1]
		}
		if containsAny(b, "Cannot access gated repo", "GatedRepoError", "gated repo.") {
			gated = true
		}
		if m := hfRestrictedRE.FindStringSubmatch(b); m != nil {
			repo, restricted = strings.TrimSuffix(m[1], "."), m[2]
		}
		if m := hfURLRE.FindStringSubmatch(b); m != nil && repo == "" {
			repo = strings.TrimSuffix(m[1], ".")
		}
		if m := hfNotIdentifierRE.FindStringSubmatch(b); m != nil && repo == "" {
			repo = m[1]
		}
		// The lines that say what happened, in log order: the status, the
		// URL refused, the Hub's own reason.
		if len(picked) < 3 && (hfStatusRE.MatchString(b) || containsAny(b, "Cannot access gated repo", "Repository Not Found", "Access to model ", " is not a local folder ")) {
			picked = append(picked, j)
		}
	}
	// huggingface_hub prints the status on a line of its own above the URL
	// ("403 Client Error. (Request ID: ...)").
	for _, j := range hits {
		lo, _ := s.logSpan(j)
		for k := max(lo, j-3); k < j && status == ""; k++ {
			if m := hfStatusRE.FindStringSubmatch(s.lines[k].body); m != nil {
				status = m[1]
				if len(picked) < 3 && !slices.Contains(picked, k) {
					picked = append([]int{k}, picked...)
				}
			}
		}
	}
	if len(picked) == 0 {
		picked = hits[:1]
	}
	slices.Sort(picked)
	ev := make([]Evidence, 0, len(picked))
	for _, j := range picked {
		ev = append(ev, s.evidence(j))
	}
	host := s.nodeOf(hits[0])
	c := s.ctx
	name := orDefault(repo, "the model repository")
	d := Diagnosis{Evidence: ev}
	token := "HF_TOKEN=<a token of an account with access> in the environment of vllm serve on every node that downloads (rayform: env[\"HF_TOKEN\"] of " + c.cluster() + ", a sensitive variable)"
	whoami := "check the token with `hf auth whoami` (older huggingface_hub: `huggingface-cli whoami`)"
	switch {
	case gated || restricted != "":
		d.Title = "Hugging Face refused the gated repository " + name + onHost(host)
		why := "The repository is gated: its files are served only to an account that accepted its conditions on the model page, and only with that account's token."
		switch {
		case strings.Contains(restricted, "not in the authorized list") || status == "403":
			why += " The token was sent and is valid, but its account has not been granted access (HTTP 403)."
		case strings.Contains(restricted, "You must be authenticated"):
			why += " No valid token was sent (HTTP 401): the process has no HF_TOKEN, or the token is wrong or expired."
		default:
			why += " HTTP " + orDefault(status, "401") + ": no valid token was sent, or the token's account has not been granted access."
		}
		d.Explanation = why
		d.Fix = "Request access on https://huggingface.co/" + orDefault(repo, "<repo>") + " with the account whose token vLLM uses (wait until it is granted), and set " + token + "; " + whoami + "."
	default:
		d.Title = "Hugging Face has no repository " + name + " visible to this process" + onHost(host)
		why := "The Hub answers \"Repository Not Found\" (HTTP " + orDefault(status, "401") + ") both when the name does not exist and when the repository is private or gated and the request carried no valid token: it does not reveal which."
		switch {
		case strings.HasPrefix(repo, "/") || strings.HasPrefix(repo, "./") || strings.HasPrefix(repo, "~"):
			why += " " + repo + " is a path: no such directory exists where the process runs (inside its container, unless it is mounted there), so it was taken for a Hub name."
		case repo != "" && !strings.Contains(repo, "/"):
			why += " " + repo + " has no namespace (owner/name): Hub repositories are named like Qwen/Qwen3-8B, so this name is most likely wrong."
		}
		d.Explanation = why
		d.Fix = "Check the model name on " + c.serve() + " (open https://huggingface.co/" + orDefault(repo, "<repo>") + "); if it is private or gated, set " + token + "; " + whoami + "."
	}
	return d, true
}
