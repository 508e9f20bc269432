package yamlnode

import "strings"

// Lines is the message of a file's problems, each error a line (each says
// its own line of the file): a decoder reports a file whole, not one
// problem per try.
func Lines[E error](errs []E) string {
	s := make([]string, len(errs))
	for i, e := range errs {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Errors is errs as the Unwrap() []error of their list, so that errors.Is
// and errors.As look at every problem.
func Errors[E error](errs []E) []error {
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return out
}
