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
	// SkipTrialRun trusts cheap checks (the program is there, the Landlock
	// ABI is enough) instead of running /bin/true under the real policy
	// first. It is for a caller that runs one command and checks its
	// outcome (jail-mcp run): a jail that cannot be set up still never runs
	// the command, since bwrap exits before starting it and Landlock fails
	// Start, and the caller then probes with Probe to say why. When auto
	// chooses, bwrap is taken only if this user can create the namespaces
	// it needs (one clone, about 2 ms), so that a container that forbids
	// them gets Landlock instead.
	SkipTrialRun bool

	// choosing is set while auto probes: only then does a cheap check that
	// bwrap cannot work here matter before trying it.
	choosing bool
}

// Open returns the named backend ("auto" picks the first usable one of this
// OS) after probing that it really confines here. When it cannot, the error
// is an *UnavailableError that wraps ErrUnavailable.
func Open(ctx context.Context, name string, opts Options) (Backend, error) {
	if name == "auto" {
		// Probe in order of preference and stop at the first that works.
		var reports []Report
		opts.choosing = true
		for _, n := range Names {
			r := probe(ctx, n, opts)
			if r.Available {
				return construct(n, r)
			}
			reports = append(reports, r)
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

// Probe checks one backend, with the trial run whatever opts say.
func Probe(ctx context.Context, name string, opts Options) Report {
	opts.SkipTrialRun = false
	return probe(ctx, name, opts)
}

// Detect probes every backend of the contract on this host.
func Detect(ctx context.Context, opts Options) []Report {
	out := make([]Report, 0, len(Names))
	for _, n := range Names {
		out = append(out, probe(ctx, n, opts))
	}
	return out
}
