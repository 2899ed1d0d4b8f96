package syntax

// suggest returns "did you mean W?" when the word token t is a likely
// misspelling of one of words, else "".
func suggest(t Token, words ...string) string {
	return suggestFor(t, "did you mean ", words...)
}

// suggestFor is suggest with another lead-in: it returns lead + W + "?"
// for the closest of words, or "".
func suggestFor(t Token, lead string, words ...string) string {
	if t.Kind != WORD {
		return ""
	}
	if w := Closest(t.Value, words); w != "" {
		return lead + w + "?"
	}
	return ""
}

// closeTo reports whether word is a likely misspelling of want.
func closeTo(word, want string) bool { return Closest(word, []string{want}) != "" }

// Closest returns the candidate nearest to word (compared in upper case)
// when it is near enough to be a likely misspelling: at most one edit for
// short words, about one edit per three letters for longer ones. An exact
// match is not a misspelling and returns "".
func Closest(word string, candidates []string) string {
	w := upper(word)
	best, bestD := "", 1<<30
	for _, c := range candidates {
		cu := upper(c)
		if cu == w {
			return ""
		}
		limit := max(1, min(len(w), len(cu))/3)
		if d := editDistance(w, cu, limit); d <= limit && d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance (adjacent swaps count
// as one edit) between a and b, or limit+1 when it is larger than limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	if len(a) > 64 || len(b) > 64 {
		return limit + 1
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
