package workspace

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"ws", "wss", 1}, {"ws", "ws", 0}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"wś", "ws", 1}} {
		if got := distance(tc.a, tc.b); got != tc.want {
			t.Errorf("distance(%q, %q) = %d; want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
