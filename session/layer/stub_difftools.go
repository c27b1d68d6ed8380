package layer

// Temporary: the API of branch layer (compute.go, apply.go), so that
// branch difftools builds before it merges layer. Removed by that merge.

import "errors"

type Options struct {
	All   bool
	Patch bool
}

type Change struct {
	Path     string `json:"path"`
	Change   string `json:"change"`
	Type     string `json:"type"`
	HostType string `json:"host_type,omitempty"`
	Size     int64  `json:"size"`
	HostSize int64  `json:"host_size,omitempty"`
	Mode     string `json:"mode,omitempty"`
	Special  bool   `json:"special,omitempty"`
	Target   string `json:"target,omitempty"`
}

type Summary struct {
	Dir    string `json:"dir"`
	Change string `json:"change"`
	Files  int    `json:"files"`
	Bytes  int64  `json:"bytes"`
}

type Diff struct {
	Changes []Change
	Ignored []Summary
	Patch   []byte
}

func Compute(upper, project string, opt Options) (*Diff, error) {
	return nil, errors.ErrUnsupported
}

type Refusal struct {
	Path, Reason string
}

type Applied struct {
	Changes []Change
	Refused []Refusal
	DryRun  bool
}

func Apply(upper, project string, paths []string, dryRun bool) (*Applied, error) {
	return nil, errors.ErrUnsupported
}
