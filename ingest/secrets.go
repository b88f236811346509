package ingest

import (
	"regexp"
	"strings"
)

// secretPatterns are high-confidence formats of private keys and tokens.
// Each has markers: literal text that every match contains (and, for the
// expressions that start with \b, starts with, at the start of a word).
// The screen looks for the markers first (a plain substring search) and
// runs a pattern's expression only where one is present, so a handoff
// without any marker, nearly every one, is scanned without a regular
// expression: Go's backtracking matcher over every expression was half
// the parent's CPU at the bulk benchmark cell (issue 18).
// TestSecretMarkersNecessary checks that no pattern matches text without
// its markers.
var secretPatterns = []struct {
	what    string
	markers []string
	re      func() *regexp.Regexp
}{
	{"a private key block", []string{" PRIVATE KEY"}, lazyRegexp(`-----BEGIN[A-Z0-9 ]* PRIVATE KEY(?: BLOCK)?-----`)},
	{"an AWS access key id", []string{"AKIA", "ASIA"}, lazyRegexp(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{"a GitHub token", []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, lazyRegexp(`\bgh[pousr]_[A-Za-z0-9]{36,}\b`)},
	{"a GitHub token", []string{"github_pat_"}, lazyRegexp(`\bgithub_pat_[A-Za-z0-9_]{50,}`)},
	{"a Slack token", []string{"xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"}, lazyRegexp(`\bxox[abprs]-[0-9]+-[0-9A-Za-z-]{10,}`)},
	{"an Anthropic API key", []string{"sk-ant-"}, lazyRegexp(`\bsk-ant-[A-Za-z0-9_-]{32,}`)},
	{"an OpenAI API key", []string{"sk-proj-", "sk-svcacct-", "sk-admin-"}, lazyRegexp(`\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{32,}`)},
	{"an OpenAI API key", []string{"sk-"}, lazyRegexp(`\bsk-[A-Za-z0-9]{32,}\b`)},
	{"a Google API key", []string{"AIza"}, lazyRegexp(`\bAIza[0-9A-Za-z_-]{35}`)},
	{"a Stripe live key", []string{"rk_live_", "sk_live_"}, lazyRegexp(`\b[rs]k_live_[0-9A-Za-z]{20,}`)},
}

// secretProblem reports the earliest secret-looking text in s, as written
// or in its screen form (secretForm: a token spelled in fullwidth or
// lookalike letters, or broken by zero-width characters). The message
// names the kind and line, never the value, because it lands in receipts.
func secretProblem(s string) *Problem {
	if p := secretMatch(s); p != nil {
		return p
	}
	if f := secretForm(s); f != s {
		return secretMatch(f)
	}
	return nil
}

// secretMatch is secretProblem on s as it is.
func secretMatch(s string) *Problem {
	at, what := -1, ""
	for _, p := range secretPatterns {
		if !hasMarker(s, p.markers, strings.HasPrefix(p.re().String(), `\b`)) {
			continue
		}
		if loc := p.re().FindStringIndex(s); loc != nil && (at < 0 || loc[0] < at) {
			at, what = loc[0], p.what
		}
	}
	if at < 0 {
		return nil
	}
	line := strings.Count(s[:at], "\n") + 1
	p := problemf(ReasonSecretLike, "", "line %d looks like %s; remove it (and rotate it if it was real), or describe it without the value", line, what)
	return &p
}

// hasMarker reports whether s contains one of markers; with wordStart,
// only where no letter, digit or underscore comes before it (as \b then
// requires).
func hasMarker(s string, markers []string, wordStart bool) bool {
	for _, m := range markers {
		for from := 0; ; {
			i := strings.Index(s[from:], m)
			if i < 0 {
				break
			}
			i += from
			if !wordStart || i == 0 || !isWordByte(s[i-1]) {
				return true
			}
			from = i + 1
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
