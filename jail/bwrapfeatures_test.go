package jail

import "testing"

// TestParseBwrapHelp: the features are read off the options --help
// lists, whatever the version says, and none for a setuid bubblewrap.
func TestParseBwrapHelp(t *testing.T) {
	v08 := "usage: bwrap [OPTIONS...] [--] COMMAND [ARGS...]\n\n    --help                       Print this help\n    --disable-userns             Disable further use of user namespaces inside sandbox\n    --size BYTES                 Set size of next argument (only for --tmpfs)\n"
	v011 := v08 + "    --overlay-src SRC            Read files from SRC in the following overlay\n    --overlay RWSRC WORKDIR DEST Mount overlayfs on DEST, with RWSRC as the host path for writes and\n                                 WORKDIR an empty directory on the same filesystem as RWSRC\n    --tmp-overlay DEST           Mount overlayfs on DEST, with writes going to an invisible tmpfs\n"
	v06 := "    --tmpfs DEST                 Mount new tmpfs on DEST\n    --perms OCTAL                Set permissions of next argument (--bind-data, --file, etc.)\n"
	// Text that merely names an option is not the option.
	mention := "    --tmpfs DEST                 like --overlay-src and --size, some day\n"
	tests := []struct {
		name   string
		help   string
		setuid bool
		want   BwrapFeatures
	}{
		{"0.6", v06, false, BwrapFeatures{}},
		{"0.8", v08, false, BwrapFeatures{Size: true}},
		{"0.11", v011, false, BwrapFeatures{Size: true, Overlay: true}},
		{"0.11_setuid", v011, true, BwrapFeatures{}},
		{"mention", mention, false, BwrapFeatures{}},
		{"only_overlay_src", "    --overlay-src SRC\n", false, BwrapFeatures{}},
	}
	for _, tt := range tests {
		if got := parseBwrapHelp(tt.help, tt.setuid); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
