package manifest

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
)

// FieldError is one problem found in a manifest. [Load] and [Parse] return
// every problem they find, each a *FieldError, joined with [errors.Join]
// (even when there is only one); [FieldErrors] lists them.
type FieldError struct {
	// File is the manifest's path; Error shows only its base name.
	File string
	// Host is the name of the host the problem belongs to, as written in
	// the file, or "" for a top-level field or a host without a name.
	Host string
	// Field is the path of the field from the top of the document, such
	// as "hosts[1].ssh.port" or "defaults.max_depth", or "" for a problem
	// with the file as a whole, such as a YAML syntax error.
	Field string
	// Value is the offending value as written, or "" when it is missing.
	Value string
	// Msg says what is wrong.
	Msg string
	// Hint says what to do about it, for a "hint:" line.
	Hint string
}

// Error returns the problem on one line, such as
//
//	writers.yaml: host "laptop": ssh.port: 70000 is out of range 1-65535
//
// When Host is set, the field is shown relative to that host.
func (e *FieldError) Error() string {
	var parts []string
	if e.File != "" {
		parts = append(parts, filepath.Base(e.File))
	}
	field := e.Field
	if e.Host != "" {
		parts = append(parts, "host "+strconv.Quote(e.Host))
		if strings.HasPrefix(field, "hosts[") {
			if _, rest, ok := strings.Cut(field, "]"); ok {
				field = strings.TrimPrefix(rest, ".")
			}
		}
	}
	if field != "" {
		parts = append(parts, field)
	}
	return strings.Join(append(parts, e.Msg), ": ")
}

// FieldErrors returns the [*FieldError] values in err, which may be one
// such error or a join of them, in the order they were found. It returns
// nil if err holds none, as for a file that could not be read.
func FieldErrors(err error) []*FieldError {
	var fes []*FieldError
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			fes = append(fes, FieldErrors(e)...)
		}
		return fes
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		fes = append(fes, fe)
	}
	return fes
}
