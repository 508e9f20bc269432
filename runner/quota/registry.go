package quota

import "sync"

// Registry holds the pacers of the accounts a process talks to, so that
// every node sending to one account is paced together: the nodes of a run,
// or of every run a Temporal worker executes.
type Registry struct {
	mu sync.Mutex
	m  map[string]*Pacer
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{m: map[string]*Pacer{}} }

// Pacer returns the pacer of account, made with the declared limits the
// first time the account is asked for.
func (r *Registry) Pacer(account string, declared Limits) *Pacer {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.m[account]
	if !ok {
		p = NewPacer(declared, nil)
		r.m[account] = p
	}
	return p
}
