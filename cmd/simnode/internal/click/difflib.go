package click

import "sort"

// closeMatches is Python's difflib.get_close_matches(word, possibilities,
// n=3, cutoff=0.6), which click uses to suggest options: candidates whose
// SequenceMatcher ratio against word reaches the cutoff, best first, ties
// broken by the larger string (heapq.nlargest over (score, x) tuples).
func closeMatches(word string, possibilities []string) []string {
	type scored struct {
		score float64
		s     string
	}
	var res []scored
	for _, x := range possibilities {
		if r := ratio(x, word); r >= 0.6 {
			res = append(res, scored{r, x})
		}
	}
	sort.Slice(res, func(i, j int) bool {
		if res[i].score != res[j].score {
			return res[i].score > res[j].score
		}
		return res[i].s > res[j].s
	})
	if len(res) > 3 {
		res = res[:3]
	}
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = r.s
	}
	return out
}

// ratio is SequenceMatcher(None, a, b).ratio() without junk heuristics
// (autojunk only applies to sequences of 200+ elements).
func ratio(a, b string) float64 {
	ar, br := []rune(a), []rune(b)
	total := len(ar) + len(br)
	if total == 0 {
		return 1
	}
	b2j := map[rune][]int{}
	for i, r := range br {
		b2j[r] = append(b2j[r], i)
	}
	matches := 0
	type span struct{ alo, ahi, blo, bhi int }
	queue := []span{{0, len(ar), 0, len(br)}}
	for len(queue) > 0 {
		s := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		i, j, k := longestMatch(ar, b2j, s.alo, s.ahi, s.blo, s.bhi)
		if k == 0 {
			continue
		}
		matches += k
		if s.alo < i && s.blo < j {
			queue = append(queue, span{s.alo, i, s.blo, j})
		}
		if i+k < s.ahi && j+k < s.bhi {
			queue = append(queue, span{i + k, s.ahi, j + k, s.bhi})
		}
	}
	return 2 * float64(matches) / float64(total)
}

// longestMatch is SequenceMatcher.find_longest_match with no junk: the
// earliest longest common block in a[alo:ahi] and b[blo:bhi].
func longestMatch(a []rune, b2j map[rune][]int, alo, ahi, blo, bhi int) (int, int, int) {
	besti, bestj, bestsize := alo, blo, 0
	j2len := map[int]int{}
	for i := alo; i < ahi; i++ {
		newj2len := map[int]int{}
		for _, j := range b2j[a[i]] {
			if j < blo {
				continue
			}
			if j >= bhi {
				break
			}
			k := j2len[j-1] + 1
			newj2len[j] = k
			if k > bestsize {
				besti, bestj, bestsize = i-k+1, j-k+1, k
			}
		}
		j2len = newj2len
	}
	return besti, bestj, bestsize
}
