package cli

import "fmt"

// inputError marks bad input from the user (a path that is not a
// directory, an id that cannot be a subject token): the aptix CLI exits 2
// for it, and 1 for a failure while running. It is recognised by its
// IsInputError method, so the root command needs no import of this type.
type inputError struct{ err error }

func (e inputError) Error() string      { return e.err.Error() }
func (e inputError) Unwrap() error      { return e.err }
func (e inputError) IsInputError() bool { return true }

func inputf(format string, args ...any) error { return inputError{fmt.Errorf(format, args...)} }
