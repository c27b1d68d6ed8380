package layer

// ApplyOptions are ApplyWith's choices.
type ApplyOptions struct {
	DryRun bool // check and list, write nothing
	// Views is when the session's views ran (see Views): a host entry
	// changed since the view that copied it may have looked it up is a
	// conflict. Nil: only one changed after its copy was made is.
	Views *Views
	// Digest, when set, is a Diff's: Apply refuses (ErrDigest) unless
	// the layer still holds exactly what that Diff listed.
	Digest string
	// MaxBytes bounds the apparent size of the files written (0: no
	// bound); the project's free space bounds it too (checkSize): a
	// refusal, before anything is written.
	MaxBytes int64
	// Skip are directories (absolute) not looked in for nested git
	// repositories: the --writable ones, where commands write the host
	// directly.
	Skip []string
}
