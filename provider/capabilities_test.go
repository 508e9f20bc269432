package provider

import (
	"context"
	"strings"
	"testing"
)

// streamer can only stream; its capabilities are whatever the test says.
// Each of the others adds one optional interface to it; everyOne adds all.
type (
	streamer  struct{ caps Capabilities }
	resumer   struct{ streamer }
	checker   struct{ streamer }
	canceler  struct{ streamer }
	continuer struct{ streamer }
	everyOne  struct{ streamer }
)

func (p streamer) Capabilities() Capabilities                { return p.caps }
func (streamer) Stream(context.Context, Request, Emit) error { return nil }

func (resumer) Resume(context.Context, Request, Cursor, Emit) error     { return nil }
func (checker) Check(context.Context, string) (Status, error)           { return Status{}, nil }
func (canceler) Cancel(context.Context, string) error                   { return nil }
func (continuer) Continue(context.Context, Request, string, Emit) error { return nil }

func (everyOne) Resume(context.Context, Request, Cursor, Emit) error   { return nil }
func (everyOne) Check(context.Context, string) (Status, error)         { return Status{}, nil }
func (everyOne) Cancel(context.Context, string) error                  { return nil }
func (everyOne) Continue(context.Context, Request, string, Emit) error { return nil }

// Every flag is checked against its interface, and only against it.
func TestCheckCapabilities(t *testing.T) {
	cases := []struct {
		name string
		caps Capabilities
		p    func(Capabilities) Provider
		want []string // what the error names; none: no error
	}{
		{"resume with a Resumer", Capabilities{Resume: true}, func(c Capabilities) Provider { return resumer{streamer{c}} }, nil},
		{"check with a Checker", Capabilities{Check: true}, func(c Capabilities) Provider { return checker{streamer{c}} }, nil},
		{"cancel with a Canceler", Capabilities{Cancel: true}, func(c Capabilities) Provider { return canceler{streamer{c}} }, nil},
		{"continue with a Continuer", Capabilities{Continue: true}, func(c Capabilities) Provider { return continuer{streamer{c}} }, nil},
		{"idle handled needs nothing", Capabilities{IdleHandled: true}, func(c Capabilities) Provider { return streamer{c} }, nil},
		{"nothing promised", Capabilities{}, func(c Capabilities) Provider { return streamer{c} }, nil},
		{"everything with everything", Capabilities{Resume: true, Check: true, Cancel: true, IdleHandled: true, Continue: true},
			func(c Capabilities) Provider { return everyOne{streamer{c}} }, nil},
		{"resume without a Resumer", Capabilities{Resume: true}, func(c Capabilities) Provider { return continuer{streamer{c}} },
			[]string{"Capabilities().Resume is set but provider.continuer is not a provider.Resumer"}},
		{"check without a Checker", Capabilities{Check: true}, func(c Capabilities) Provider { return resumer{streamer{c}} },
			[]string{"Capabilities().Check is set but provider.resumer is not a provider.Checker"}},
		{"cancel without a Canceler", Capabilities{Cancel: true}, func(c Capabilities) Provider { return checker{streamer{c}} },
			[]string{"Capabilities().Cancel is set but provider.checker is not a provider.Canceler"}},
		{"continue without a Continuer", Capabilities{Continue: true}, func(c Capabilities) Provider { return canceler{streamer{c}} },
			[]string{"Capabilities().Continue is set but provider.canceler is not a provider.Continuer"}},
		{"every broken promise at once", Capabilities{Resume: true, Check: true, Cancel: true, Continue: true},
			func(c Capabilities) Provider { return streamer{c} },
			[]string{"Resume is set", "Check is set", "Cancel is set", "Continue is set"}},
	}
	for _, c := range cases {
		err := CheckCapabilities(c.p(c.caps))
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error, want one naming %q", c.name, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}
