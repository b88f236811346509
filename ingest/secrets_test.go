package ingest

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// secretProblemAll is the screen without markers: every expression over
// the whole text. secretProblem must agree with it on every input.
func secretProblemAll(s string) *Problem {
	at, what := -1, ""
	for _, p := range secretPatterns {
		if loc := p.re().FindStringIndex(s); loc != nil && (at < 0 || loc[0] < at) {
			at, what = loc[0], p.what
		}
	}
	if at < 0 {
		return nil
	}
	return &Problem{Reason: ReasonSecretLike, Message: what + "@" + strconv.Itoa(strings.Count(s[:at], "\n")+1)}
}

// fragments build texts near the patterns' edges.
var secretFragments = []string{
	"-----BEGIN", " PRIVATE KEY", "-----", " RSA", " BLOCK", "END", "AKIA", "ASIA", "AKIB",
	"gh", "p_", "o_", "s_", "ghp_", "github_pat_", "xox", "b-", "xoxp-", "-", "_", "sk-", "sk-ant-",
	"ant-", "proj-", "sk-proj-", "AIza", "rk_live_", "sk_live_", "k_live_", " ", "\n", ".",
	"ABCDEFGHIJKLMNOP", "0123456789", "abcdefghijklmnopqrstuvwxyzABCDEF", "Zz9_-",
}

// TestSecretMarkersNecessary: the markers never hide a match. On texts
// made of the patterns' own pieces, and on real-looking tokens of every
// kind, the screen with markers reports exactly what the full scan does.
// Invariant: no secret-like handoff is promoted because of the markers.
func TestSecretMarkersNecessary(t *testing.T) {
	tokens := []string{
		"-----BEGIN OPENSSH PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----", "-----BEGIN PGP PRIVATE KEY BLOCK-----",
		"AKIAIOSFODNN7EXAMPLE", "ASIAIOSFODNN7EXAMPLE",
		"ghp_" + strings.Repeat("a1", 18), "ghs_" + strings.Repeat("Z9", 20), "github_pat_" + strings.Repeat("x_", 26),
		"xoxb-1234-" + strings.Repeat("ab", 6), "sk-ant-" + strings.Repeat("k", 40), "sk-proj-" + strings.Repeat("p", 40),
		"sk-" + strings.Repeat("A", 40), "AIza" + strings.Repeat("b", 35), "rk_live_" + strings.Repeat("9", 24),
		"sk_live_" + strings.Repeat("z", 24),
	}
	for _, tok := range tokens {
		for _, s := range []string{tok, "see " + tok + " here", "line\n\n" + tok} {
			got := secretProblem(s)
			if got == nil || secretProblemAll(s) == nil {
				t.Errorf("%q: not found (markers %v, full scan %v)", s, got != nil, secretProblemAll(s) != nil)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50000 {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteString(secretFragments[rng.IntN(len(secretFragments))])
		}
		s := b.String()
		got, want := secretProblem(s), secretProblemAll(s)
		if (got == nil) != (want == nil) {
			t.Fatalf("%q: with markers %v, full scan %v", s, got, want)
		}
		if got != nil && !strings.Contains(got.Message, strings.Split(want.Message, "@")[0]) {
			t.Fatalf("%q: with markers %q, full scan %q", s, got.Message, want.Message)
		}
	}
}

// secretBenchTexts are 3 KB handoffs without a secret: one whose words
// hold no marker at a word's start (risk-, task- do not count), and one
// that names an sk- prefix, which runs that one expression.
var secretBenchTexts = []struct{ name, text string }{
	{"plain", strings.Repeat("## Summary\nWe changed how the sync retries after a dropped connection; "+
		"the highest gain is in the inner loop, a risk-free task-list change for github issues.\n", 20)},
	{"marker", strings.Repeat("## Summary\nWe changed how the sync retries after a dropped connection; "+
		"the highest gain is in the inner loop, which also handles names with an sk- prefix.\n", 20)},
}

// BenchmarkSecretScreen: the screen with markers against every expression
// over the whole text.
func BenchmarkSecretScreen(b *testing.B) {
	for _, tc := range secretBenchTexts {
		for _, v := range []struct {
			name   string
			screen func(string) *Problem
		}{{"markers", secretProblem}, {"full-scan", secretProblemAll}} {
			b.Run(tc.name+"/"+v.name, func(b *testing.B) {
				for range b.N {
					if v.screen(tc.text) != nil {
						b.Fatal("found a secret")
					}
				}
			})
		}
	}
}
