package anthropic

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/noderun/noderun/diagnostics"
	"github.com/noderun/noderun/provider"
)

// Continue (provider.Continuer) re-sends req with the output delivered so
// far as a prefilled final assistant turn, and emits only what follows it.
//
// The API rejects a prefill that ends in whitespace, so trailing
// whitespace is held back with the bytes of a character the drop cut short
// (provider.SplitWhole): the continuation must begin with them, and they
// are not emitted twice; if it does not, the output is rewritten from the
// prefix (NR113). A 400 to the first prefill of this adapter means the
// model does not accept prefills (Claude 4.6 models answer "Prefilling
// assistant messages is not supported for this model"): the error wraps
// provider.ErrContinueRejected and Continue is no longer declared, so the
// node is retried (NR112). After one prefill was accepted, a 400 is an
// ordinary rejection of the request.
func (p *Provider) Continue(ctx context.Context, req provider.Request, have string, emit provider.Emit) error {
	whole, cut := provider.SplitWhole(have)
	prefix := strings.TrimRight(whole, " \t\r\n")
	held := whole[len(prefix):] + cut
	f := provider.NewContinueFilter(prefix, held, emit)
	status, err := p.stream(ctx, request(req, prefix), f.Emit)
	if prefix == "" {
		return err // nothing was prefilled: an ordinary request
	}
	if status == http.StatusOK {
		p.accepted.Store(true)
	}
	if err == nil {
		return nil
	}
	if ce := diagnostics.Classify(err); ce.Status == http.StatusBadRequest && !p.accepted.Load() {
		p.rejected.Store(true)
		return &diagnostics.Error{Class: ce.Class, Status: ce.Status, RetryAfter: ce.RetryAfter,
			Err: fmt.Errorf("%w (continuation: %s): %w", provider.ErrContinueRejected, p.form, err)}
	}
	return err
}
