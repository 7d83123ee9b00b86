package config

import "fmt"

// suggest returns the candidate closest to given when it is close enough to
// be a plausible misspelling, or "" otherwise. Ties go to the candidate that
// comes first, so callers pass candidates in a deterministic order.
func suggest(given string, candidates []string) string {
	best, bestDist := "", 0
	for _, c := range candidates {
		d := editDistance(given, c)
		if d < 3 && (best == "" || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// Suggest returns the candidate closest to given when it is close enough to
// be a plausible misspelling (an edit distance below 3), or "". The CLI uses
// it for mistyped commands.
func Suggest(given string, candidates []string) string { return suggest(given, candidates) }

// didYouMean formats a suggestion as a sentence to append to a detail, or ""
// when there is none. format receives the suggestion, e.g. "node.%s".
func didYouMean(given string, candidates []string, format string) string {
	s := suggest(given, candidates)
	if s == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %s?", fmt.Sprintf(format, s))
}

// editDistance is the Levenshtein distance between a and b, counted in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// DidYouMean formats the candidate closest to given ([Suggest]) as a
// sentence to append to a detail, " Did you mean X?", or "" when there is
// none; format receives the candidate, e.g. "node.%s". Kinds use it in
// their own diagnostics.
func DidYouMean(given string, candidates []string, format string) string {
	return didYouMean(given, candidates, format)
}
