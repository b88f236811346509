package manifest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Size
	}{
		{"1", 1},
		{"1000", 1000},
		{"1B", 1},
		{"1b", 1},
		{"512KiB", 512 << 10},
		{"1MiB", 1 << 20},
		{"1 MiB", 1 << 20},
		{"  1mib  ", 1 << 20},
		{"2GiB", 2 << 30},
		{"1KB", 1000},
		{"1MB", 1000000},
		{"1mb", 1000000},
		{"3GB", 3000000000},
		{"8589934591GiB", 8589934591 << 30},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", "whole number"},
		{"MiB", "whole number"},
		{"0", "must be positive"},
		{"0MiB", "must be positive"},
		{"-1", "must be positive"},
		{"-1MiB", "must be positive"},
		{"1.5MiB", "whole number"},
		{"1XB", `unknown unit "XB"`},
		{"1M", `unknown unit "M"`},
		{"1 TiB", `unknown unit "TiB"`},
		{"1MiB extra", "unknown unit"},
		{"8589934592GiB", "too large"},
		{"99999999999999999999", "too large"},
	} {
		_, err := ParseSize(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSize(%q) error = %v; want it to contain %q", tc.in, err, tc.want)
		}
	}
}

func TestSizeString(t *testing.T) {
	for _, tc := range []struct {
		in   Size
		want string
	}{
		{0, "0B"},
		{1, "1B"},
		{999, "999B"},
		{1000, "1KB"},
		{1024, "1KiB"},
		{MiB, "1MiB"},
		{1536 * KiB, "1536KiB"},
		{2 * GiB, "2GiB"},
		{1500 * KB, "1500KB"},
		{64 * MiB, "64MiB"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("Size(%d).String() = %q; want %q", int64(tc.in), got, tc.want)
		}
		if tc.in > 0 {
			if back, err := ParseSize(tc.in.String()); err != nil || back != tc.in {
				t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in.String(), back, err, tc.in)
			}
		}
	}
}

func TestSizeJSON(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Size
		wantErr bool
	}{
		{`1048576`, MiB, false},
		{`"1MiB"`, MiB, false},
		{`"512 KiB"`, 512 * KiB, false},
		{`0`, 0, true},
		{`-5`, 0, true},
		{`1.5`, 0, true},
		{`true`, 0, true},
		{`[1]`, 0, true},
		{`"1 parsec"`, 0, true},
	} {
		var s Size
		err := json.Unmarshal([]byte(tc.in), &s)
		if (err != nil) != tc.wantErr || s != tc.want {
			t.Errorf("unmarshal %s = %d, %v; want %d, error %v", tc.in, s, err, tc.want, tc.wantErr)
		}
	}
	b, err := json.Marshal(struct{ S Size }{512 * KiB})
	if err != nil || string(b) != `{"S":"512KiB"}` {
		t.Errorf("marshal = %s, %v", b, err)
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"0s", 0},
		{"10s", 10 * time.Second},
		{"5m", 5 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"250ms", 250 * time.Millisecond},
		{" 2m ", 2 * time.Minute},
		{"1d", 24 * time.Hour},
		{"30d", 30 * 24 * time.Hour},
		{"0d", 0},
	} {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", "want a number with a unit"},
		{"10", "want a number with a unit"},
		{"fast", "want a number with a unit"},
		{"d", "want a number with a unit"},
		{"1.5d", "want a number with a unit"},
		{"1d12h", "want a number with a unit"},
		{"1w", "want a number with a unit"},
		{"-1s", "must not be negative"},
		{"-1d", "must not be negative"},
		{"106752d", "too large"},
		{"99999999999999999999d", "too large"},
	} {
		_, err := ParseDuration(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseDuration(%q) error = %v; want it to contain %q", tc.in, err, tc.want)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{`"10s"`, 10 * time.Second, false},
		{`"30d"`, 720 * time.Hour, false},
		{`0`, 0, false},
		{`10`, 0, true},
		{`"-5m"`, 0, true},
		{`false`, 0, true},
	} {
		var d Duration
		err := json.Unmarshal([]byte(tc.in), &d)
		if (err != nil) != tc.wantErr || d.Duration != tc.want {
			t.Errorf("unmarshal %s = %v, %v; want %v, error %v", tc.in, d, err, tc.want, tc.wantErr)
		}
	}
	b, err := json.Marshal(struct{ D Duration }{Duration{90 * time.Second}})
	if err != nil || string(b) != `{"D":"1m30s"}` {
		t.Errorf("marshal = %s, %v", b, err)
	}
}
