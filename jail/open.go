package jail

import (
	"context"
)

// Options are what backend selection needs from the host; tests pass their own.
type Options struct {
	// Getenv reads the server's environment (PATH, to find bwrap).
	Getenv func(string) string
	// ReadFile reads kernel settings under /proc/sys to explain a failure.
	ReadFile func(string) ([]byte, error)
	// LandlockABI reads the kernel's Landlock ABI version.
	LandlockABI func() (int, error)
}

// Open returns the named backend ("auto" picks the first usable one of this
// OS) after probing that it really confines here. When it cannot, the error
// is an *UnavailableError that wraps ErrUnavailable.
func Open(ctx context.Context, name string, opts Options) (Backend, error) {
	if name == "auto" {
		reports := Detect(ctx, opts)
		for _, r := range reports {
			if r.Available {
				return Open(ctx, r.Backend, opts)
			}
		}
		// Explain with the backend this OS would prefer, and say why the
		// others of this OS cannot stand in.
		for _, r := range reports {
			if r.Backend != preferred {
				continue
			}
			ue := &UnavailableError{Backend: r.Backend, Reason: r.Reason, Hint: r.Hint}
			for _, o := range reports {
				if o.Backend != preferred && native(o.Backend) {
					ue.Reason += "; " + o.Backend + ": " + o.Reason
				}
			}
			return nil, ue
		}
		return nil, &UnavailableError{Backend: "auto", Reason: "no confining backend exists on " + goos}
	}
	r := probe(ctx, name, opts)
	if !r.Available {
		return nil, &UnavailableError{Backend: name, Reason: r.Reason, Hint: r.Hint}
	}
	return construct(name, r)
}

// Detect probes every backend of the contract on this host.
func Detect(ctx context.Context, opts Options) []Report {
	out := make([]Report, 0, len(Names))
	for _, n := range Names {
		out = append(out, probe(ctx, n, opts))
	}
	return out
}
