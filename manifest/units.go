package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Size is a number of bytes. In the manifest it is written as a whole
// number of bytes (1048576) or as a whole number with a unit ("1MiB",
// "512 KiB", "1MB"). Units are case-insensitive: B, KB, MB and GB are
// powers of 1000; KiB, MiB and GiB are powers of 1024.
type Size int64

// Units of Size.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	KB  Size = 1e3
	MB  Size = 1e6
	GB  Size = 1e9
)

// sizeUnits lists the units String tries, largest first.
var sizeUnits = []struct {
	name string
	size Size
}{
	{"GiB", GiB}, {"GB", GB}, {"MiB", MiB}, {"MB", MB}, {"KiB", KiB}, {"KB", KB},
}

// ParseSize parses a size such as "1MiB", "512 KiB", "1MB" or "1000". The
// size must be positive and fit in an int64.
func ParseSize(s string) (Size, error) {
	num := strings.TrimSpace(s)
	i := 0
	for i < len(num) && num[i] >= '0' && num[i] <= '9' {
		i++
	}
	digits, unit := num[:i], strings.TrimSpace(num[i:])
	if strings.HasPrefix(num, "-") {
		return 0, fmt.Errorf("invalid size %q: must be positive", s)
	}
	if digits == "" || strings.HasPrefix(unit, ".") {
		return 0, fmt.Errorf("invalid size %q: want a whole number with an optional unit", s)
	}
	mult := Size(1)
	if unit != "" && !strings.EqualFold(unit, "B") {
		mult = 0
		for _, u := range sizeUnits {
			if strings.EqualFold(unit, u.name) {
				mult = u.size
			}
		}
		if mult == 0 {
			return 0, fmt.Errorf("invalid size %q: unknown unit %q (use B, KB, MB, GB, KiB, MiB or GiB)", s, unit)
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > math.MaxInt64/int64(mult) {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	if n == 0 {
		return 0, fmt.Errorf("invalid size %q: must be positive", s)
	}
	return Size(n) * mult, nil
}

// String returns the size with the largest unit that divides it exactly,
// such as "1MiB", "1500KB" or "999B".
func (s Size) String() string {
	for _, u := range sizeUnits {
		if s != 0 && s%u.size == 0 {
			return strconv.FormatInt(int64(s/u.size), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// MarshalJSON encodes the size as a string, such as "1MiB".
func (s Size) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.String())
}

// UnmarshalJSON accepts a JSON number of bytes or a string for [ParseSize].
func (s *Size) UnmarshalJSON(b []byte) error {
	text, err := scalar(b)
	if err != nil {
		return errors.New("a size must be a number of bytes or a string such as \"1MiB\"")
	}
	v, err := ParseSize(text)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Duration is a length of time. In the manifest it is written in Go's
// duration syntax ("10s", "5m", "1h30m") or as a whole number of days
// ("30d"). It is never negative.
type Duration struct {
	time.Duration
}

// ParseDuration parses a duration in Go's syntax, such as "90s" or
// "1h30m", or a whole number of days, such as "30d". Negative durations are
// errors.
func ParseDuration(s string) (time.Duration, error) {
	text := strings.TrimSpace(s)
	if strings.HasPrefix(text, "-") {
		return 0, fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	if days, ok := strings.CutSuffix(text, "d"); ok && days != "" && strings.Trim(days, "0123456789") == "" {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n > math.MaxInt64/int64(24*time.Hour) {
			return 0, fmt.Errorf("invalid duration %q: too large", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: want a number with a unit such as 10s, 5m, 1h30m or 30d", s)
	}
	return d, nil
}

// MarshalJSON encodes the duration as a string in Go's syntax, such as
// "5m0s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON accepts a string for [ParseDuration]. A bare number is
// accepted only if [ParseDuration] accepts its text, which means only 0.
func (d *Duration) UnmarshalJSON(b []byte) error {
	text, err := scalar(b)
	if err != nil {
		return errors.New("a duration must be a string such as \"10s\" or \"30d\"")
	}
	v, err := ParseDuration(text)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// scalar returns the text of a JSON string or number.
func scalar(b []byte) (string, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	}
	return "", errors.New("not a string or number")
}
