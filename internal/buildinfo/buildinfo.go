// Package buildinfo says which build of noderun is running, for --version:
// the module version and VCS commit the go command stamps, or, where it
// stamps none (GOFLAGS=-buildvcs=false, a source tarball), the version the
// Makefile passes with -ldflags -X (`git describe`).
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Text is the --version line. stamped is the Makefile's `git describe
// --tags --always --dirty` ("v1.2.0-3-gf047788-dirty", or a bare commit
// where there is no tag), empty for a plain `go build`.
func Text(stamped string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "noderun (no build info)"
	}
	return text(bi, stamped)
}

func text(bi *debug.BuildInfo, stamped string) string {
	v := bi.Main.Version
	if v == "(devel)" {
		v = ""
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-dirty"
			}
		}
	}
	switch {
	case v != "" && rev != "":
		return fmt.Sprintf("noderun %s (commit %s%s, %s)", v, rev, modified, bi.GoVersion)
	case v != "" && stamped != "":
		return fmt.Sprintf("noderun %s (%s, %s)", v, stamped, bi.GoVersion)
	case v != "":
		return fmt.Sprintf("noderun %s (%s)", v, bi.GoVersion)
	case stamped != "": // the go command stamped nothing: the Makefile's word
		return fmt.Sprintf("noderun %s (%s)", stamped, bi.GoVersion)
	case rev != "":
		return fmt.Sprintf("noderun commit %s%s (%s)", rev, modified, bi.GoVersion)
	}
	return fmt.Sprintf("noderun (devel, not built by `make build`: no version stamped) (%s)", bi.GoVersion)
}
