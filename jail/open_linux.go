package jail

import "context"

const (
	goos      = "linux"
	preferred = "bwrap"
)

func probe(ctx context.Context, name string, opts Options) Report {
	switch name {
	case "bwrap":
		return probeBwrap(ctx, opts)
	case "landlock":
		return Report{Backend: name, Reason: "the landlock backend is not supported yet"}
	default:
		return Report{Backend: name, Reason: name + " exists only on macOS"}
	}
}

func construct(name string, r Report) (Backend, error) {
	return &bwrap{path: r.Path}, nil
}
