package profile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

// Load reads a YAML file of profiles keyed by name and merges it over the
// built-ins: a profile named like a built-in starts from it and overrides only
// the fields the file sets, so `ci: {retries: 1}` keeps ci's other values.
func Load(path string) (Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load on bytes; name is used in errors.
func Parse(name string, data []byte) (Set, error) {
	set := Set(Builtins())
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return set, nil
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: profiles file must be a mapping of name to profile", name, root.Line)
	}
	var errs []error // every problem of every profile, not only the first
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		p, ok := set[key.Value]
		if !ok {
			p = set["default"]
		}
		p.Name = key.Value
		if err := decodeStrict(val, &p); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: profile %q: %w", name, val.Line, key.Value, err))
			continue
		}
		if err := p.Validate(); err != nil {
			for _, e := range unjoin(err) {
				errs = append(errs, fmt.Errorf("%s:%d: %w", name, val.Line, e))
			}
			continue
		}
		set[key.Value] = p
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return set, nil
}

// unjoin lists the errors an errors.Join holds.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// decodeStrict decodes n into v, rejecting unknown fields.
func decodeStrict(n *yaml.Node, v any) error {
	out, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	dec.KnownFields(true)
	return dec.Decode(v)
}
