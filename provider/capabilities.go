package provider

import (
	"errors"
	"fmt"
)

// CheckCapabilities reports every capability p declares without the
// interface the recovery loop calls for it: Resume needs a Resumer, Check a
// Checker, Cancel a Canceler, Continue a Continuer. The runner calls it for
// every provider it builds, built-in or registered by kind, so that a
// promise an adapter cannot keep is an error before the run rather than a
// panic in the middle of one.
//
// The flags are not derived from the interfaces because an adapter's type
// may implement more than it can do in a given configuration (the chat
// adapter is a Continuer, but continues only when a continuation form is
// configured). They are read once, when the provider is built: a flag may
// go off during the provider's life (the chat adapter's Continue, when the
// server rejects the form) but must never come on later.
func CheckCapabilities(p Provider) error {
	caps := p.Capabilities()
	var errs []error
	for _, c := range []struct {
		set, has    bool
		flag, iface string
	}{
		{caps.Resume, implements[Resumer](p), "Resume", "Resumer"},
		{caps.Check, implements[Checker](p), "Check", "Checker"},
		{caps.Cancel, implements[Canceler](p), "Cancel", "Canceler"},
		{caps.Continue, implements[Continuer](p), "Continue", "Continuer"},
	} {
		if c.set && !c.has {
			errs = append(errs, fmt.Errorf("Capabilities().%s is set but %T is not a provider.%s", c.flag, p, c.iface))
		}
	}
	return errors.Join(errs...)
}

func implements[I any](p Provider) bool {
	_, ok := p.(I)
	return ok
}
