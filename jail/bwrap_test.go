//go:build linux

package jail_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jail-mcp/jail-mcp/jail"
)

// goldenSpec is the Spec most golden cases start from.
func goldenSpec() jail.Spec {
	return jail.Spec{
		Argv:      []string{"/bin/sh", "-c", "echo ok"},
		Dir:       "/home/u/project",
		Env:       []string{"HOME=/home/u/project/.agent-home/s", "PATH=/usr/bin:/bin"},
		Jail:      "/home/u/project/.agent-home/s",
		Network:   true,
		MaxMemory: 4 << 30,
	}
}

func TestBwrapArgs(t *testing.T) {
	tests := []struct {
		name string
		spec func(*jail.Spec)
	}{
		{"network_on", func(s *jail.Spec) {}},
		{"no_memory_bound", func(s *jail.Spec) { s.MaxMemory = 0 }},
		// A bubblewrap older than 0.7, which cannot bound a tmpfs (--size).
		{"unsized_bwrap", func(s *jail.Spec) {}},
		{"network_off", func(s *jail.Spec) { s.Network = false }},
		// Other sessions' jails: an empty .agent-home but for this jail
		// and the .gitignore the server keeps there.
		{"siblings_hidden", func(s *jail.Spec) { s.Siblings = "/home/u/project/.agent-home" }},
		{"credential_mount", func(s *jail.Spec) {
			s.Mounts = []jail.Mount{
				{Source: "/home/u/.config/gh", Target: s.Jail + "/.config/gh"},
				{Source: "/home/u/.gitconfig", Target: s.Jail + "/.gitconfig"},
			}
		}},
		{"credential_state", func(s *jail.Spec) {
			s.Mounts = []jail.Mount{
				{Source: s.Jail + "/.jail-mcp/state/claude/.claude", Target: s.Jail + "/.claude", Writable: true},
				{Source: "/home/u/.claude/.credentials.json", Target: s.Jail + "/.claude/.credentials.json"},
				{Source: s.Jail + "/.jail-mcp/state/claude/.claude.json", Target: s.Jail + "/.claude.json", Writable: true},
			}
			s.Hide = []string{s.Jail + "/.jail-mcp/state"}
		}},
		{"env_values", func(s *jail.Spec) {
			s.Env = append(s.Env,
				"SPACES=a b  c ",
				"NEWLINES=line1\nline2\n",
				"EQUALS=k=v=w",
				"EMPTY=",
				"QUOTES='\"$HOME`",
			)
		}},
		{"jail_path_quotes", func(s *jail.Spec) {
			s.Jail = `/home/u/my "project" it's/.agent-home/s 1`
			s.Dir = `/home/u/my "project" it's`
			s.Env = []string{"HOME=" + s.Jail}
		}},
		{"argv_dash", func(s *jail.Spec) {
			s.Argv = []string{"--bind", "/", "/", "-rf", "--"}
		}},
		{"project_in_tmp", func(s *jail.Spec) {
			s.Jail = "/tmp/p/.agent-home/s"
			s.Dir = "/tmp/p/src"
			s.Env = []string{"HOME=" + s.Jail, "PATH=/tmp/tools/bin:/usr/bin"}
			// The project, a PATH directory and the resolver's file as
			// bwrap adds them; one below another and one outside the
			// shadowed directories need no bind of their own.
			s.Visible = []string{"/tmp/p", "/tmp/tools/bin", "/run/systemd/resolve/stub-resolv.conf", "/tmp/p/src", "/home/u/bin"}
		}},
		// The project's directories commands write in place: bound
		// writable over its read-only view, before the jail.
		{"writable", func(s *jail.Spec) {
			s.Siblings = "/home/u/project/.agent-home"
			s.Writable = []jail.WritableDir{{Path: "/home/u/project/node_modules"}, {Path: "/home/u/project/web/build dir"}}
		}},
		// By descriptor: theirs come first (fd 3 on), then the jail's and
		// the credentials', in the order bwrapFiles passes them.
		{"writable_by_descriptor", func(s *jail.Spec) {
			s.JailFile = devNull(t)
			s.Writable = []jail.WritableDir{{Path: "/home/u/project/node_modules", File: devNull(t)}, {Path: "/home/u/project/build", File: devNull(t)}}
			s.Mounts = []jail.Mount{{Source: "/home/u/.gitconfig", Target: s.Jail + "/.gitconfig", File: devNull(t)}}
		}},
		// Shadowed by bwrap without agents: bound after the project is
		// bound back.
		{"writable_in_tmp", func(s *jail.Spec) {
			s.Jail = "/tmp/p/.agent-home/s"
			s.Dir = "/tmp/p"
			s.Env = []string{"HOME=" + s.Jail}
			s.Visible = []string{"/tmp/p"}
			s.Writable = []jail.WritableDir{{Path: "/tmp/p/node_modules"}}
		}},
		// What no command reads (masks below): a directory empty but for
		// what stays shown in it, a file unreadable whose data is a
		// descriptor after the bound ones (the jail's, a credential's),
		// before the filter and the info pipe.
		// The project view, mounted by the session agent in a user
		// namespace of its own: the jail, the layer and the writable
		// directories bound aside for it, namespaces left to it.
		{"overlay_nested", func(s *jail.Spec) { overlaySpec(t, s, false) }},
		// The project view, mounted by bubblewrap itself (0.9 and later):
		// the overlay right after the host, the writable directories, the
		// jail and the masks over it at their places, the caches' overlays
		// after the jail, no namespace for anything in the sandbox.
		{"overlay_native", func(s *jail.Spec) { overlaySpec(t, s, true) }},
		{"masks", func(s *jail.Spec) {
			s.JailFile = devNull(t)
			s.Mounts = []jail.Mount{{Source: "/home/u/.gitconfig", Target: s.Jail + "/.gitconfig", File: devNull(t)}}
			s.Visible = []string{"/home/u/project", "/home/u", "/home/u/.ssh/known_hosts"}
		}},
	}
	// The masks of a case, as masksOf would find them on a host.
	masks := map[string][]jail.Mask{
		"masks":          {{Path: "/home/u/.ssh", Dir: true}, {Path: "/home/u/.netrc"}},
		"overlay_native": {{Path: "/home/u/project/secrets", Dir: true}, {Path: "/home/u/project/.env"}, {Path: "/home/u/.netrc"}},
		"overlay_nested": {{Path: "/home/u/.netrc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := goldenSpec()
			tt.spec(&spec)
			feat := jail.BwrapFeatures{Size: tt.name != "unsized_bwrap", Overlay: tt.name == "overlay_native"}
			args := jail.BwrapArgs(spec, jail.ShadowDirs, feat, masks[tt.name]...)

			// Everything after the first "--" is the command, verbatim: an
			// argument starting with "-" must never be read by bwrap.
			i := slices.Index(args, "--")
			if i < 0 {
				t.Fatalf("no -- separator in %q", args)
			}
			if got := args[i+1:]; !slices.Equal(got, spec.Argv) {
				t.Errorf("command after --: got %q, want %q", got, spec.Argv)
			}
			// Descriptors from 3 on, in argument order: what is bound by
			// descriptor, the file masks' data, the filter, the info pipe.
			fd := 3
			for j := 0; j < i; j++ {
				switch args[j] {
				case "--setenv":
					j += 2
				case "--bind-fd", "--ro-bind-fd", "--ro-bind-data", "--seccomp", "--info-fd":
					if args[j+1] != strconv.Itoa(fd) {
						t.Errorf("%s %s: want descriptor %d", args[j], args[j+1], fd)
					}
					fd++
				case "--overlay":
					for k := 1; k <= 2; k++ {
						if want := "/proc/self/fd/" + strconv.Itoa(fd); args[j+k] != want {
							t.Errorf("--overlay %s: want %s", args[j+k], want)
						}
						fd++
					}
				}
			}

			var b strings.Builder
			for _, a := range args {
				b.WriteString(strconv.Quote(a))
				b.WriteByte('\n')
			}
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run go test -update to create it): %v", err)
			}
			if got := b.String(); got != string(want) {
				t.Errorf("BwrapArgs differs from %s (run go test -update if intended):\n%s", golden, lineDiff(string(want), got))
			}
		})
	}
}

// overlaySpec gives s the project view, with a writable directory of the
// project, a credential, two host caches (one in the jail, one at its own
// place) and the layer hidden; native: the layer bubblewrap mounts
// itself.
func overlaySpec(t *testing.T, s *jail.Spec, native bool) {
	s.Project, s.Dir = "/home/u/project", "/home/u/project"
	s.Siblings = "/home/u/project/.agent-home"
	s.Visible = []string{s.Project}
	s.JailFile = devNull(t)
	s.Writable = []jail.WritableDir{{Path: "/home/u/project/node_modules", File: devNull(t)}}
	s.Mounts = []jail.Mount{{Source: "/home/u/.gitconfig", Target: s.Jail + "/.gitconfig", File: devNull(t)}}
	s.Hide = []string{s.Jail + "/.overlay"}
	s.Overlay = &jail.Overlay{Layer: devNull(t), Caches: []jail.CacheMount{
		{Name: "npm", Lower: "/home/u/.npm", Target: s.Jail + "/.npm"},
		{Name: "go-mod", Lower: "/home/u/go/pkg/mod", Target: "/home/u/go/pkg/mod"},
	}}
	if native {
		var files []*os.File
		for range 6 {
			files = append(files, devNull(t))
		}
		jail.NativeLayer(s.Overlay, files...)
	}
}

// devNull is an open file for a Spec's descriptor fields, closed when t ends.
func devNull(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// lineDiff shows the first line where want and got part.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want " + wl + "\n  got  " + gl
		}
	}
	return "(no line differs)"
}

func TestSpecStringHidesEnvValues(t *testing.T) {
	tests := []struct {
		name   string
		env    []string
		names  []string
		values []string
	}{
		{"plain", []string{"GH_TOKEN=ghp_s3cr3tvalue"}, []string{"GH_TOKEN"}, []string{"ghp_s3cr3tvalue"}},
		{"equals in value", []string{"AWS_SECRET_ACCESS_KEY=abc=def=ghi"}, []string{"AWS_SECRET_ACCESS_KEY"}, []string{"abc=def=ghi", "def", "ghi"}},
		{"spaces and newline", []string{"PASSWORD=hunter two\nthree"}, []string{"PASSWORD"}, []string{"hunter", "three"}},
		{"several", []string{"A=valueA1", "B=valueB2", "C="}, []string{"A", "B", "C"}, []string{"valueA1", "valueB2"}},
		{"empty", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := goldenSpec()
			spec.Env = tt.env
			s := spec.String()
			for _, v := range tt.values {
				if strings.Contains(s, v) {
					t.Errorf("String() = %q contains env value %q", s, v)
				}
			}
			for _, n := range tt.names {
				if !strings.Contains(s, n) {
					t.Errorf("String() = %q lacks env name %q", s, n)
				}
			}
		})
	}
}

// TestBwrapConfines runs the real bubblewrap backend: with session agents
// (this kernel's Landlock ABI), and as on a kernel without Landlock ABI 6,
// each command a bwrap of its own.
func TestBwrapConfines(t *testing.T) {
	for _, mode := range []struct {
		name   string
		agents bool
		opts   jail.Options
	}{
		{"agents", true, jail.Options{}},
		{"without-landlock", false, jail.Options{LandlockABI: func() (int, error) { return 0, unix.ENOSYS }}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			b, err := jail.Open(t.Context(), "bwrap", mode.opts)
			if err != nil {
				t.Fatalf("open bwrap backend: %v", err)
			}
			if b.Name() != "bwrap" || !b.Confined() || b.Agents() != mode.agents {
				t.Fatalf("backend %s confined=%t agents=%t, want bwrap confined, agents %t", b.Name(), b.Confined(), b.Agents(), mode.agents)
			}
			testBwrapConfines(t, b, mode.agents)
		})
	}
}

func testBwrapConfines(t *testing.T, b jail.Backend, agents bool) {
	hostNet, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		network bool
		script  string // $OUTSIDE is a sibling of the jail
		wantOK  bool
		check   func(t *testing.T, jailDir, outside, stdout, stderr string)
	}{
		{
			name: "write inside jail", network: true, wantOK: true,
			script: `echo ok > "$HOME/f" && cat "$HOME/f"`,
			check: func(t *testing.T, jailDir, outside, stdout, stderr string) {
				got, err := os.ReadFile(filepath.Join(jailDir, "f"))
				if err != nil || string(got) != "ok\n" {
					t.Errorf("jail file: got %q, %v; want %q", got, err, "ok\n")
				}
			},
		},
		{
			name: "write outside jail", network: true, wantOK: false,
			script: `echo bad > "$OUTSIDE/f"`,
			check: func(t *testing.T, jailDir, outside, stdout, stderr string) {
				if !strings.Contains(stderr, "Read-only file system") {
					t.Errorf("stderr %q does not say Read-only file system", stderr)
				}
				if _, err := os.Lstat(filepath.Join(outside, "f")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("file outside the jail exists (err %v)", err)
				}
			},
		},
		{
			name: "network off leaves loopback only", network: false, wantOK: true,
			script: `cat /proc/net/dev; readlink /proc/self/ns/net`,
			check: func(t *testing.T, jailDir, outside, stdout, stderr string) {
				lines := strings.Split(strings.TrimSpace(stdout), "\n")
				if len(lines) < 3 {
					t.Fatalf("unexpected output %q", stdout)
				}
				var ifaces []string
				for _, l := range lines[2 : len(lines)-1] {
					name, _, _ := strings.Cut(l, ":")
					ifaces = append(ifaces, strings.TrimSpace(name))
				}
				if !slices.Equal(ifaces, []string{"lo"}) {
					t.Errorf("interfaces %q, want only lo", ifaces)
				}
				if ns := lines[len(lines)-1]; ns == hostNet {
					t.Errorf("network namespace %s is the host's", ns)
				}
			},
		},
		{
			name: "network on shares host namespace", network: true, wantOK: true,
			script: `readlink /proc/self/ns/net`,
			check: func(t *testing.T, jailDir, outside, stdout, stderr string) {
				if ns := strings.TrimSpace(stdout); ns != hostNet {
					t.Errorf("network namespace %s, want the host's %s", ns, hostNet)
				}
			},
		},
		{
			// A FIFO there, opened for writing, would reach a host reader
			// through the read-only view: an agent's Landlock layer denies
			// the open; without it they are empty but for what must stay
			// visible (Spec.Visible, the jail).
			name: "host tmp, var/tmp and run", network: true, wantOK: true,
			script: `for f in $MARKS; do [ -e "$f" ] && echo "VISIBLE $f"; ( : >> "$f" ) 2>/dev/null && echo "WRITTEN $f"; done
[ -d "$OUTSIDE" ] && echo outside-visible
touch /tmp/x /run/x 2>/dev/null || echo read-only
true`,
			check: func(t *testing.T, jailDir, outside, stdout, stderr string) {
				if got := strings.Count(stdout, "VISIBLE"); agents && got != 3 || !agents && got != 0 {
					t.Errorf("stdout %q: %d host files visible, want 3 with agents, none without", stdout, got)
				}
				if strings.Contains(stdout, "WRITTEN") || !strings.Contains(stdout, "outside-visible\nread-only") {
					t.Errorf("stdout %q: want nothing written, the visible path shown, both read-only", stdout)
				}
			},
		},
		{
			// Memory a command may fill outside the jail, which outlives
			// it in a sandbox's tmpfs: /dev is read-only (without agents
			// there is no Landlock layer over it), /dev/shm a tmpfs of
			// Spec.MaxMemory.
			name: "dev read-only, dev/shm bounded", network: true, wantOK: true,
			script: `( echo x > /dev/jail-mcp-fill ) 2>/dev/null && echo "WROTE /dev"
head -c 33554432 /dev/zero > /dev/shm/fill 2>/dev/null
echo "shm $(stat -c %s /dev/shm/fill)"`,
			check: func(t *testing.T, jailDir, outside, stdout, stderr string) {
				if strings.Contains(stdout, "WROTE") || !strings.Contains(stdout, fmt.Sprintf("shm %d\n", 16<<20)) {
					t.Errorf("stdout %q: want /dev read-only and 16 MiB at most in /dev/shm", stdout)
				}
			},
		},
		{
			name: "no capabilities", network: true, wantOK: true,
			script: `grep ^Cap /proc/self/status`,
			check: func(t *testing.T, jailDir, outside, stdout, stderr string) {
				lines := strings.Split(strings.TrimSpace(stdout), "\n")
				if len(lines) != 5 {
					t.Fatalf("want 5 Cap lines, got %q", stdout)
				}
				for _, l := range lines {
					if !strings.HasSuffix(l, "\t0000000000000000") {
						t.Errorf("capability set not empty: %q", l)
					}
				}
			},
		},
	}
	// A file in each shadowed directory, or in one below it where only
	// root may write it (/run/lock is world-writable).
	var marks []string
	for _, dir := range jail.ShadowDirs {
		made := false
		for _, d := range []string{dir, filepath.Join(dir, "lock")} {
			f := filepath.Join(d, fmt.Sprintf("jail-mcp-shadow-%d", os.Getpid()))
			if os.WriteFile(f, nil, 0o644) == nil {
				t.Cleanup(func() { os.Remove(f) })
				marks, made = append(marks, f), true
				break
			}
		}
		if !made {
			t.Fatalf("no file can be made in %s or %s/lock: the shadowing cannot be shown", dir, dir)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jailDir, outside := t.TempDir(), t.TempDir()
			spec := jail.Spec{
				Argv:    []string{"/bin/sh", "-c", tt.script},
				Dir:     jailDir,
				Env:     []string{"PATH=/usr/bin:/bin", "HOME=" + jailDir, "OUTSIDE=" + outside, "MARKS=" + strings.Join(marks, " ")},
				Jail:    jailDir,
				Network: tt.network,
				Visible: []string{outside},
				// The jail's bound of /dev/shm.
				MaxMemory: 16 << 20,
			}
			stdout, stderr, exit, err := runSpec(t, b, spec)
			if ok := err == nil && exit.Code == 0; ok != tt.wantOK {
				t.Fatalf("run: exit %+v err %v, want success %t\nstdout: %s\nstderr: %s", exit, err, tt.wantOK, stdout, stderr)
			}
			tt.check(t, jailDir, outside, stdout, stderr)
		})
	}
}

func TestOpenBwrapMissing(t *testing.T) {
	tests := []struct {
		name    string
		backend string
		path    string
	}{
		{"nonexistent dir", "bwrap", "/nonexistent"},
		{"empty PATH", "bwrap", ""},
		{"relative dirs only", "bwrap", "usr/bin:bin"},
		// Landlock too old here: auto has nothing to fall back to.
		{"auto explains with bwrap", "auto", "/nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "PATH" {
					return tt.path
				}
				return ""
			}
			tooOld := func() (int, error) { return jail.MinLandlockABI - 1, nil }
			b, err := jail.Open(t.Context(), tt.backend, jail.Options{Getenv: getenv, LandlockABI: tooOld})
			if err == nil {
				t.Fatalf("Open(%s) with PATH=%q = %s, want error", tt.backend, tt.path, b.Name())
			}
			if !errors.Is(err, jail.ErrUnavailable) {
				t.Errorf("error %v does not wrap ErrUnavailable", err)
			}
			var ue *jail.UnavailableError
			if !errors.As(err, &ue) {
				t.Fatalf("error %T is not *UnavailableError", err)
			}
			if ue.Backend != "bwrap" || ue.Hint != "sudo apt-get install bubblewrap" {
				t.Errorf("got backend %q hint %q, want bwrap, %q", ue.Backend, ue.Hint, "sudo apt-get install bubblewrap")
			}
		})
	}
}

// TestSkipTrialRun: without the trial run, Open trusts the cheap checks.
// A bubblewrap that is there and a kernel that lets this user create
// namespaces make bwrap the choice of auto even when bwrap itself is broken
// (the trial run would have chosen Landlock); the caller finds out from
// the command (jail-mcp run does). The chosen backend runs a command.
func TestSkipTrialRun(t *testing.T) {
	fake := t.TempDir()
	if err := os.WriteFile(filepath.Join(fake, "bwrap"), []byte("#!/bin/sh\necho 'bwrap: broken' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path string
		skip       bool
		want       string
	}{
		{"working bwrap", "/usr/bin:/bin", true, "bwrap"},
		{"working bwrap, trial run", "/usr/bin:/bin", false, "bwrap"},
		{"broken bwrap", fake + ":/usr/bin:/bin", true, "bwrap"},
		{"broken bwrap, trial run", fake + ":/usr/bin:/bin", false, "landlock"},
		{"no bwrap", "/nonexistent", true, "landlock"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := jail.Options{Getenv: func(k string) string { return map[string]string{"PATH": tt.path}[k] }, SkipTrialRun: tt.skip}
			b, err := jail.Open(t.Context(), "auto", opts)
			if err != nil || b.Name() != tt.want {
				t.Fatalf("Open(auto) = %v, %v; want %s", b, err, tt.want)
			}
			if tt.name == "broken bwrap" {
				if r := jail.Probe(t.Context(), "bwrap", opts); r.Available || !strings.Contains(r.Reason, "bwrap: broken") {
					t.Errorf("Probe ignores the broken bwrap: %+v", r)
				}
				return
			}
			dir := canonTemp(t)
			if _, _, exit, err := runSpec(t, b, jail.Spec{Argv: []string{"/bin/true"}, Dir: dir, Jail: dir, Env: []string{"PATH=/usr/bin:/bin"}}); err != nil || exit.Code != 0 {
				t.Fatalf("/bin/true under %s: %+v %v", b.Name(), exit, err)
			}
		})
	}
}

// TestSeccompFilter pins the filter bwrap loads, per architecture and
// for a server running as root or not, as hex: any change to it shows in
// review.
func TestSeccompFilter(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		for _, root := range []bool{false, true} {
			name := "seccomp_" + arch
			if root {
				name += "_root"
			}
			t.Run(name, func(t *testing.T) {
				got, err := jail.SeccompFilter(arch, root)
				if err != nil {
					t.Fatal(err)
				}
				golden(t, filepath.Join("testdata", name+".golden"), filterHex(t, got))
			})
		}
	}
	if _, err := jail.SeccompFilter("riscv64", false); err == nil {
		t.Error("a filter for an architecture without syscall numbers")
	}
}
