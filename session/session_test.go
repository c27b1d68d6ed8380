package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jail-mcp/jail-mcp/jail"
	"github.com/jail-mcp/jail-mcp/session/jailfs"
	"github.com/jail-mcp/jail-mcp/session/jailfs/jailfstest"
	"github.com/jail-mcp/jail-mcp/session/limits"
)

// backends are the Linux backends the confinement tests run under, each
// as a subtest of its name: bwrap binds credentials, landlock places them
// as links for the call.
var backends = []string{"bwrap", "landlock"}

// forEachBackend runs f as one subtest per backend.
func forEachBackend(t *testing.T, f func(t *testing.T, backend string)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { f(t, b) })
	}
}

// newManager returns a manager over a fresh project with the real bwrap
// backend; prepare, when set, runs on the project before New.
func newManager(t testing.TB, edit func(*Config), prepare func(t testing.TB, project, root string)) (*Manager, string) {
	t.Helper()
	return newManagerOn(t, "bwrap", edit, prepare)
}

// newManagerOn is newManager with the named real backend.
func newManagerOn(t testing.TB, backend string, edit func(*Config), prepare func(t testing.TB, project, root string)) (*Manager, string) {
	t.Helper()
	m, project := buildManager(t, backend, edit, prepare)
	t.Cleanup(func() { m.Close() })
	return m, project
}

// buildManager is newManagerOn without closing the manager at the end of
// the test, for a test that must not wait on a session that hangs.
func buildManager(t testing.TB, backend string, edit func(*Config), prepare func(t testing.TB, project, root string)) (*Manager, string) {
	t.Helper()
	b, err := jail.Open(t.Context(), backend, jail.Options{})
	if err != nil {
		t.Fatalf("open %s backend: %v", backend, err)
	}
	project := canonTempDir(t)
	root, err := ResolveRoot(project, "")
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(t, project, root)
	}
	cfg := Config{
		Project:    project,
		Root:       root,
		Backend:    b,
		Network:    true,
		Environ:    []string{"PATH=/usr/bin:/bin"},
		Timeout:    10 * time.Second,
		MaxTimeout: time.Minute,
		MaxOutput:  65536,
	}
	if edit != nil {
		edit(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m, project
}

func openSession(t testing.TB, m *Manager, name string) *Session {
	t.Helper()
	s, err := m.Open(name)
	if err != nil {
		t.Fatalf("Open(%q): %v", name, err)
	}
	return s
}

// sorted is lists joined and sorted.
func sorted(lists ...[]string) []string {
	out := slices.Concat(lists...)
	slices.Sort(out)
	return out
}

// tree lists every path under dir with its type and content, without
// following symlinks, to prove that something was left untouched.
func tree(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out = append(out, rel+" -> "+target)
		case d.IsDir():
			out = append(out, rel+"/")
		default:
			b, _ := os.ReadFile(p)
			out = append(out, rel+": "+string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hostUsage is what the file system spends below dir, by the host's own
// walk (jailfstest.HostUsage).
func hostUsage(t testing.TB, dir string) jailfs.Usage {
	t.Helper()
	files, bytes := jailfstest.HostUsage(t, dir)
	return jailfs.Usage{Files: files, Bytes: bytes}
}

// skeletonUsage is what the skeleton's directories of the jail dir take,
// those that are directories.
func skeletonUsage(t testing.TB, dir string) jailfs.Usage {
	t.Helper()
	var u jailfs.Usage
	for _, d := range (&Manager{}).skeletonDirs() {
		if fi, err := os.Lstat(filepath.Join(dir, d)); err == nil && fi.IsDir() {
			u.Files++
			u.Bytes += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
	}
	return u
}

// skeletonTree is tree of a jail holding only the skeleton.
var skeletonTree = []string{"./", ".cache/", ".config/", ".local/", ".local/share/", ".local/state/", ".runtime/", ".tmp/"}

func TestOpenSkeleton(t *testing.T) {
	tests := []struct {
		name          string
		prepare       func(t testing.TB, project, root string)
		wantGitignore string
		wantTree      []string
	}{
		{
			name:          "fresh",
			wantGitignore: "*\n",
			wantTree:      skeletonTree,
		},
		{
			name: "existing gitignore kept",
			prepare: func(t testing.TB, project, root string) {
				writeFile(t, root+"/.gitignore", "mine\n")
			},
			wantGitignore: "mine\n",
			wantTree:      skeletonTree,
		},
		{
			name: "existing jail kept and completed",
			prepare: func(t testing.TB, project, root string) {
				writeFile(t, root+"/s/keep", "data")
				writeFile(t, root+"/s/.config/app", "cfg")
			},
			wantGitignore: "*\n",
			wantTree:      sorted(skeletonTree, []string{"keep: data", ".config/app: cfg"}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, project := newManager(t, nil, tt.prepare)
			s := openSession(t, m, "s")
			if want := filepath.Join(project, ".agent-home", "s"); s.Path != want {
				t.Errorf("jail %s, want %s", s.Path, want)
			}
			got, err := os.ReadFile(filepath.Join(project, ".agent-home", ".gitignore"))
			if err != nil || string(got) != tt.wantGitignore {
				t.Errorf(".gitignore %q, %v; want %q", got, err, tt.wantGitignore)
			}
			if got := sorted(tree(t, s.Path)); !slices.Equal(got, tt.wantTree) {
				t.Errorf("jail holds %q, want %q", got, tt.wantTree)
			}
			if again := openSession(t, m, "s"); again != s {
				t.Errorf("second Open returned a different session")
			}
		})
	}
}

func TestOpenRefuses(t *testing.T) {
	tests := []struct {
		name    string
		session string
		prepare func(t *testing.T, root, outside string)
	}{
		{"symlink to outside", "s", func(t *testing.T, root, outside string) {
			symlink(t, outside, root+"/s")
		}},
		{"symlink inside the base", "s", func(t *testing.T, root, outside string) {
			mkdirs(t, root+"/real")
			symlink(t, "real", root+"/s")
		}},
		{"dangling symlink", "s", func(t *testing.T, root, outside string) {
			symlink(t, outside+"/missing", root+"/s")
		}},
		{"a file", "s", func(t *testing.T, root, outside string) {
			writeFile(t, root+"/s", "")
		}},
		{"dot dot", "..", func(t *testing.T, root, outside string) {}},
		{"slash", "a/b", func(t *testing.T, root, outside string) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, project := newManager(t, nil, nil)
			root := filepath.Join(project, ".agent-home")
			outside := canonTempDir(t)
			tt.prepare(t, root, outside)
			before := tree(t, outside)
			if s, err := m.Open(tt.session); err == nil {
				t.Fatalf("Open(%q) = jail %s, want error", tt.session, s.Path)
			}
			if after := tree(t, outside); !slices.Equal(before, after) {
				t.Errorf("outside changed from %q to %q", before, after)
			}
			if _, err := m.Lookup(tt.session); !errors.Is(err, ErrNotFound) {
				t.Errorf("Lookup after refusal: %v, want ErrNotFound", err)
			}
		})
	}
}

func TestExecCwd(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		m, project := newManagerOn(t, backend, nil, nil)
		s1, s2 := openSession(t, m, "s1"), openSession(t, m, "s2")
		outside := canonTempDir(t)
		mkdirs(t, project+"/sub", s1.Path+"/work")
		writeFile(t, project+"/file", "")
		symlink(t, "sub", project+"/link-sub")
		symlink(t, s2.Path, project+"/to-s2")
		symlink(t, s1.Path+"/work", project+"/to-s1")
		symlink(t, "/etc", s1.Path+"/etc-link")
		symlink(t, outside, s1.Path+"/out-link")

		tests := []struct {
			name string
			cwd  string
			want string // "" for an *InputError
		}{
			{"default is the project", "", project},
			{"dot", ".", project},
			{"relative to the project", "sub", project + "/sub"},
			{"trailing slash", "sub/", project + "/sub"},
			{"absolute in the project", project + "/sub", project + "/sub"},
			{"symlink in the project", "link-sub", project + "/sub"},
			{"own jail", s1.Path, s1.Path},
			{"inside own jail", s1.Path + "/work", s1.Path + "/work"},
			{"own jail, relative", ".agent-home/s1/work", s1.Path + "/work"},
			{"symlink to own jail", "to-s1", s1.Path + "/work"},
			{"other jail refused", s2.Path, ""},
			{"other jail, relative, refused", ".agent-home/s2", ""},
			{"symlink to other jail refused", "to-s2", ""},
			{"dotdot into other jail refused", s1.Path + "/../s2", ""},
			{"jail base refused", ".agent-home", ""},
			{"outside the project refused", outside, ""},
			{"filesystem root refused", "/", ""},
			{"parent refused", "..", ""},
			{"dotdot escape refused", "sub/../..", ""},
			{"missing refused", "missing", ""},
			{"file refused", "file", ""},
			{"jail symlink to /etc refused", s1.Path + "/etc-link", ""},
			{"jail symlink outside refused", s1.Path + "/out-link", ""},
			{"NUL refused", "sub\x00", ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res, err := s1.Exec(t.Context(), Request{Command: "pwd", Cwd: tt.cwd})
				if tt.want == "" {
					var ie *InputError
					if !errors.As(err, &ie) {
						t.Fatalf("Exec with cwd %q: %v, %+v; want *InputError", tt.cwd, err, res)
					}
					return
				}
				if err != nil {
					t.Fatalf("Exec with cwd %q: %v", tt.cwd, err)
				}
				if res.ExitCode != 0 || res.Stdout.Text != tt.want+"\n" {
					t.Errorf("pwd in %q: exit %d stdout %q stderr %q; want %q", tt.cwd, res.ExitCode, res.Stdout.Text, res.Stderr.Text, tt.want)
				}
			})
		}
	})
}

func TestExecRefusals(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		m, _ := newManagerOn(t, backend, func(c *Config) { c.Network = false }, nil)
		s := openSession(t, m, "s")
		yes := true
		tests := []struct {
			name string
			req  Request
		}{
			{"nothing to run", Request{}},
			{"command and argv", Request{Command: "true", Argv: []string{"true"}}},
			{"empty argv[0]", Request{Argv: []string{"", "x"}}},
			{"NUL in command", Request{Command: "echo a\x00b"}},
			{"NUL in argv", Request{Argv: []string{"echo", "a\x00b"}}},
			{"reserved env", Request{Command: "true", Env: map[string]string{"HOME": "/"}}},
			{"bad env name", Request{Command: "true", Env: map[string]string{"A-B": "x"}}},
			{"negative timeout", Request{Command: "true", Timeout: -time.Second}},
			{"network on when operator said off", Request{Command: "true", Network: &yes}},
			{"auth not enabled", Request{Command: "true", Auth: []string{"gh"}}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res, err := s.Exec(t.Context(), tt.req)
				var ie *InputError
				if !errors.As(err, &ie) {
					t.Errorf("Exec: %v, %+v; want *InputError", err, res)
				}
			})
		}
	})
}

func TestReset(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		tests := []struct {
			name      string
			plant     func(t *testing.T, s *Session, outside string)
			wantFiles int64 // inodes, the skeleton's directories left out
		}{
			{"empty jail", func(t *testing.T, s *Session, outside string) {}, 0},
			{"files and directories", func(t *testing.T, s *Session, outside string) {
				writeFile(t, s.Path+"/a", "abc")
				writeFile(t, s.Path+"/d/b", "12345")
				writeFile(t, s.Path+"/d/e/c", "")
				writeFile(t, s.Path+"/.cache/x", "1234567")
			}, 6},
			{"symlink to a file outside", func(t *testing.T, s *Session, outside string) {
				writeFile(t, outside+"/secret", "do not delete")
				symlink(t, outside+"/secret", s.Path+"/link")
			}, 1},
			{"symlink to a directory outside", func(t *testing.T, s *Session, outside string) {
				writeFile(t, outside+"/dir/f1", "one")
				writeFile(t, outside+"/dir/sub/f2", "two")
				symlink(t, outside+"/dir", s.Path+"/dlink")
				symlink(t, outside+"/dir/", s.Path+"/.cache/dlink-slash")
			}, 2},
			{"skeleton directory replaced by a symlink outside", func(t *testing.T, s *Session, outside string) {
				writeFile(t, outside+"/cache/keep", "keep")
				if err := os.Remove(s.Path + "/.cache"); err != nil {
					t.Fatal(err)
				}
				symlink(t, outside+"/cache", s.Path+"/.cache")
			}, 1},
			{"dangling symlink", func(t *testing.T, s *Session, outside string) {
				symlink(t, outside+"/missing", s.Path+"/dangling")
			}, 1},
			{"hard link to a file outside", func(t *testing.T, s *Session, outside string) {
				writeFile(t, outside+"/hard", "shared")
				if err := os.Link(outside+"/hard", s.Path+"/hard"); err != nil {
					t.Fatal(err)
				}
			}, 1},
			{"read-only directory", func(t *testing.T, s *Session, outside string) {
				writeFile(t, s.Path+"/ro/f", "xy")
				if err := os.Chmod(s.Path+"/ro", 0o500); err != nil {
					t.Fatal(err)
				}
			}, 2},
			{"planted by a jailed command", func(t *testing.T, s *Session, outside string) {
				writeFile(t, outside+"/dir/f", "outside")
				res, err := s.Exec(t.Context(), Request{
					Command: `mkdir -p d/e && printf 12345 > d/e/f && ln -s "$OUT/dir" link && ln -s "$OUT/dir/f" .config/flink && mkfifo fifo`,
					Cwd:     s.Path,
					Env:     map[string]string{"OUT": outside},
				})
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("plant: %v %+v", err, res)
				}
			}, 8}, // and the call's .jail-mcp/state/
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				m, _ := newManagerOn(t, backend, nil, nil)
				s := openSession(t, m, "s")
				outside := canonTempDir(t)
				tt.plant(t, s, outside)
				before := tree(t, outside)
				os.Chmod(s.Path+"/ro", 0o700)
				held, skel := hostUsage(t, s.Path), skeletonUsage(t, s.Path)
				os.Chmod(s.Path+"/ro", 0o500)
				want := jailfs.Usage{Files: held.Files - skel.Files, Bytes: held.Bytes - skel.Bytes}
				if want.Files != tt.wantFiles {
					t.Fatalf("planted %d inodes, want %d", want.Files, tt.wantFiles)
				}

				r, err := s.Reset(t.Context())
				if err != nil {
					t.Fatalf("Reset: %v", err)
				}
				if r.RemovedFiles != want.Files || r.RemovedBytes != want.Bytes || r.Killed != 0 {
					t.Errorf("Reset = %+v, want %+v and 0 killed", r, want)
				}
				if got := sorted(tree(t, s.Path)); !slices.Equal(got, skeletonTree) {
					t.Errorf("jail after reset holds %q, want the skeleton %q", got, skeletonTree)
				}
				if after := tree(t, outside); !slices.Equal(before, after) {
					t.Errorf("outside changed from %q to %q", before, after)
				}
				if u, err := s.Usage(); err != nil || u != hostUsage(t, s.Path) || u.Files != int64(len((&Manager{}).skeletonDirs())) {
					t.Errorf("Usage after reset = %+v, %v; want the skeleton's %+v", u, err, hostUsage(t, s.Path))
				}
			})
		}
	})
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, jailDir, outside string)
		files int64 // inodes beyond the skeleton's
	}{
		{"skeleton only", func(t *testing.T, jailDir, outside string) {}, 0},
		{"files", func(t *testing.T, jailDir, outside string) {
			writeFile(t, jailDir+"/a", "abc")
			writeFile(t, jailDir+"/d/e/b", strings.Repeat("x", 1000))
			writeFile(t, jailDir+"/.tmp/empty", "")
		}, 5},
		{"symlink to a big directory outside", func(t *testing.T, jailDir, outside string) {
			for i := range 50 {
				writeFile(t, fmt.Sprintf("%s/big/f%d", outside, i), strings.Repeat("x", 4096))
			}
			symlink(t, outside+"/big", jailDir+"/big")
			symlink(t, outside+"/big/f0", jailDir+"/f0")
		}, 2},
		{"skeleton directory replaced by a symlink outside", func(t *testing.T, jailDir, outside string) {
			writeFile(t, outside+"/cache/blob", strings.Repeat("x", 1<<16))
			if err := os.Remove(jailDir + "/.cache"); err != nil {
				t.Fatal(err)
			}
			symlink(t, outside+"/cache", jailDir+"/.cache")
		}, 0},
		{"directories and symlinks", func(t *testing.T, jailDir, outside string) {
			for i := range 20 {
				if err := os.Mkdir(fmt.Sprintf("%s/d%d", jailDir, i), 0o700); err != nil {
					t.Fatal(err)
				}
				symlink(t, strings.Repeat("x", 4000), fmt.Sprintf("%s/l%d", jailDir, i))
			}
		}, 40},
		{"hard links once", func(t *testing.T, jailDir, outside string) {
			writeFile(t, jailDir+"/a", strings.Repeat("x", 10000))
			for _, l := range []string{"/b", "/.tmp/c"} {
				if err := os.Link(jailDir+"/a", jailDir+l); err != nil {
					t.Fatal(err)
				}
			}
		}, 1},
		{"unreadable directory", func(t *testing.T, jailDir, outside string) {
			writeFile(t, jailDir+"/locked/f", strings.Repeat("x", 10000))
			if err := os.Chmod(jailDir+"/locked", 0o000); err != nil {
				t.Fatal(err)
			}
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newManager(t, nil, nil)
			s := openSession(t, m, "s")
			tt.plant(t, s.Path, canonTempDir(t))
			got, err := s.Usage()
			os.Chmod(s.Path+"/locked", 0o700)
			want := hostUsage(t, s.Path)
			if err != nil || got != want || got.Files != int64(len((&Manager{}).skeletonDirs()))+tt.files {
				t.Errorf("Usage() = %+v, %v; want %+v, %d inodes beyond the skeleton", got, err, want, tt.files)
			}
		})
	}
}

func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

func TestExecOutput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		seq := seqOutput(200000)
		tests := []struct {
			name       string
			command    string
			plant      func(t *testing.T, s *Session, outside string)
			wantStdout string // whole stream
			wantStderr string
			wantKept   bool // OutputPath holds the whole output
		}{
			{name: "small output inline", command: "echo hi; echo err >&2", wantStdout: "hi\n", wantStderr: "err\n"},
			{name: "stdout cut", command: "seq 1 200000; echo err >&2", wantStdout: seq, wantStderr: "err\n", wantKept: true},
			{name: "stderr cut", command: "seq 1 200000 >&2; echo out", wantStdout: "out\n", wantStderr: seq, wantKept: true},
			{
				name:    "output directory planted as a symlink outside",
				command: "seq 1 200000",
				plant: func(t *testing.T, s *Session, outside string) {
					if err := os.MkdirAll(s.Path+"/.jail-mcp", 0o700); err != nil {
						t.Fatal(err)
					}
					symlink(t, outside, s.Path+"/.jail-mcp/output")
				},
				wantStdout: seq,
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				m, _ := newManagerOn(t, backend, nil, nil)
				s := openSession(t, m, "s")
				outside := canonTempDir(t)
				if tt.plant != nil {
					tt.plant(t, s, outside)
				}
				res, err := s.Exec(t.Context(), Request{Command: tt.command})
				if err != nil || res.ExitCode != 0 {
					t.Fatalf("Exec: %v %+v", err, res)
				}
				limit := m.Config().MaxOutput
				for _, st := range []struct {
					name string
					got  Stream
					want string
				}{{"stdout", res.Stdout, tt.wantStdout}, {"stderr", res.Stderr, tt.wantStderr}} {
					cut := len(st.want) > limit
					if st.got.Bytes != int64(len(st.want)) || st.got.Truncated != cut {
						t.Errorf("%s: Bytes %d Truncated %t, want %d %t", st.name, st.got.Bytes, st.got.Truncated, len(st.want), cut)
					}
					if !cut {
						if st.got.Text != st.want {
							t.Errorf("%s: Text %q, want %q", st.name, st.got.Text, st.want)
						}
						continue
					}
					marker := cutMarker(t, st.want, st.got, limit)
					if tt.wantKept && !strings.Contains(marker, res.OutputPath) {
						t.Errorf("%s: marker does not name %s: %q", st.name, res.OutputPath, marker)
					}
					if !tt.wantKept && !strings.Contains(marker, "could not be kept") {
						t.Errorf("%s: marker does not say the output could not be kept: %q", st.name, marker)
					}
				}
				if !tt.wantKept {
					if res.OutputPath != "" {
						t.Errorf("OutputPath %q, want none", res.OutputPath)
					}
					if got := tree(t, outside); !slices.Equal(got, []string{"./"}) {
						t.Errorf("output written outside the jail: %q", got)
					}
					return
				}
				if !strings.HasPrefix(res.OutputPath, s.Path+"/.jail-mcp/output/") {
					t.Fatalf("OutputPath %q is not inside the jail's output directory", res.OutputPath)
				}
				for name, want := range map[string]string{"stdout": tt.wantStdout, "stderr": tt.wantStderr} {
					got, err := os.ReadFile(filepath.Join(res.OutputPath, name))
					if err != nil || string(got) != want {
						t.Errorf("%s file: %d bytes, %v; want %d bytes byte-identical", name, len(got), err, len(want))
					}
				}
			})
		}
	})
}

// cutMarker checks the inline text of a cut stream as a call returns it
// (session/output's tests check the cut itself): at most limit bytes, a
// head and a tail of the stream around a marker, which it returns.
func cutMarker(t *testing.T, stream string, s Stream, limit int) string {
	t.Helper()
	if len(s.Text) > limit {
		t.Errorf("inline text is %d bytes, more than the limit %d", len(s.Text), limit)
	}
	head, rest, ok := strings.Cut(s.Text, "\n[... ")
	i := strings.Index(rest, " ...]\n")
	if !ok || i < 0 {
		t.Fatalf("no marker in %q", s.Text)
	}
	tail := rest[i+len(" ...]\n"):]
	if !strings.HasPrefix(stream, head) || !strings.HasSuffix(stream, tail) {
		t.Errorf("head %q or tail %q is not from the stream", head, tail)
	}
	return s.Text[len(head) : len(s.Text)-len(tail)]
}

// survivors lists the processes that have marker as an argument.
func survivors(t *testing.T, marker string) []string {
	t.Helper()
	paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		if slices.Contains(strings.Split(string(b), "\x00"), marker) {
			out = append(out, filepath.Base(filepath.Dir(p))+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

func TestExecKillsEverything(t *testing.T) {
	forEachBackend(t, func(t *testing.T, backend string) {
		tests := []struct {
			name        string
			command     string // %[1]s is the marker, a sleep duration no other process uses
			timeout     time.Duration
			cancelAfter time.Duration
		}{
			{"timeout, background sleeps", "sleep %[1]s & sleep %[1]s", time.Second, 0},
			{"timeout, setsid daemon", "setsid sleep %[1]s > /dev/null 2>&1 < /dev/null & sleep %[1]s", time.Second, 0},
			{"timeout, double fork", "(sleep %[1]s &) ; sleep %[1]s", time.Second, 0},
			{"cancel, background sleeps", "sleep %[1]s & sleep %[1]s", 20 * time.Second, 300 * time.Millisecond},
		}
		m, _ := newManagerOn(t, backend, nil, nil)
		s := openSession(t, m, "s")
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				marker := fmt.Sprintf("9%d%d.5", os.Getpid(), i)
				ctx := t.Context()
				// Before the cancel is set: a loaded machine may pause
				// between the two, which must not shorten the call.
				start := time.Now()
				if tt.cancelAfter > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					defer cancel()
					time.AfterFunc(tt.cancelAfter, cancel)
				}
				deadline := tt.timeout
				if tt.cancelAfter > 0 {
					deadline = tt.cancelAfter
				}
				res, err := s.Exec(ctx, Request{Command: fmt.Sprintf(tt.command, marker), Timeout: tt.timeout})
				elapsed := time.Since(start)
				if err != nil {
					t.Fatalf("Exec: %v", err)
				}
				if tt.cancelAfter > 0 {
					if res.End != Cancelled || res.Limit != "" {
						t.Errorf("end %d limit %q, want cancelled only", res.End, res.Limit)
					}
				} else if res.End != TimedOut || res.Limit != limits.BoundTimeout {
					t.Errorf("end %d limit %q, want timed out by timeout", res.End, res.Limit)
				}
				if res.ExitCode != -1 || res.Signal != "SIGKILL" {
					t.Errorf("exit %d signal %q, want -1 SIGKILL", res.ExitCode, res.Signal)
				}
				if elapsed < deadline || elapsed > deadline+3*time.Second {
					t.Errorf("returned after %v, want between %v and %v", elapsed, deadline, deadline+3*time.Second)
				}
				if got := survivors(t, marker); len(got) > 0 {
					t.Errorf("processes outlived the call: %q", got)
				}
				if n := s.Running(); n != 0 {
					t.Errorf("Running() = %d after Exec returned", n)
				}
			})
		}
	})
}

// TestExecExitKillsLeftovers: a command that exits at once, leaving
// background, setsid and double-forked processes behind, returns at once
// and takes them with it (bwrap: its pid namespace ends; landlock: the
// backend kills the call's domain).
func TestExecExitKillsLeftovers(t *testing.T) {
	tests := []struct {
		name    string
		command string // %[1]s is the marker
	}{
		{"background sleep holding the output", "sleep %[1]s & exit 3"},
		{"setsid daemon", "setsid sleep %[1]s > /dev/null 2>&1 < /dev/null & exit 3"},
		{"double fork", "(sleep %[1]s > /dev/null 2>&1 < /dev/null &) ; exit 3"},
		{"setsid double fork", "setsid sh -c '(sleep %[1]s > /dev/null 2>&1 < /dev/null &)' ; exit 3"},
	}
	forEachBackend(t, func(t *testing.T, backend string) {
		m, _ := newManagerOn(t, backend, nil, nil)
		s := openSession(t, m, "left")
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				marker := fmt.Sprintf("8%d%d.5", os.Getpid(), i)
				start := time.Now()
				res, err := s.Exec(t.Context(), Request{Command: fmt.Sprintf(tt.command, marker), Timeout: 20 * time.Second})
				elapsed := time.Since(start)
				if err != nil {
					t.Fatalf("Exec: %v", err)
				}
				if res.ExitCode != 3 || res.End != Exited || res.Limit != "" {
					t.Errorf("exit %d end %d limit %q, want exit 3 only", res.ExitCode, res.End, res.Limit)
				}
				if elapsed > 3*time.Second {
					t.Errorf("returned after %v, want at once", elapsed)
				}
				if got := survivors(t, marker); len(got) > 0 {
					t.Errorf("processes outlived the call: %q", got)
				}
			})
		}
	})
}

func TestExecSignal(t *testing.T) {
	tests := []struct {
		name      string
		signal    string
		number    int
		wantLimit limits.Bound
	}{
		{"terminated", "TERM", 15, ""},
		{"file size signal names the bound", "XFSZ", fileSizeSignal, "file_size"},
	}
	forEachBackend(t, func(t *testing.T, backend string) {
		m, _ := newManagerOn(t, backend, nil, nil)
		s := openSession(t, m, "sig")
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res, err := s.Exec(t.Context(), Request{Command: "echo before; kill -s " + tt.signal + " $$; echo after"})
				if err != nil {
					t.Fatalf("Exec: %v", err)
				}
				if res.Stdout.Text != "before\n" || res.Limit != tt.wantLimit {
					t.Errorf("stdout %q limit %q, want %q %q", res.Stdout.Text, res.Limit, "before\n", tt.wantLimit)
				}
				// The session agent is the command's parent, on both
				// backends: the signal itself is seen.
				if res.ExitCode != -1 || res.Signal != "SIG"+tt.signal || res.SignalNumber != tt.number {
					t.Errorf("exit %d signal %q (%d), want -1 SIG%s (%d)", res.ExitCode, res.Signal, res.SignalNumber, tt.signal, tt.number)
				}
			})
		}
	})
}

// TestDiskUsageCache: the disk check before a call takes a count of the
// last second instead of walking the jail each time; a fresh count
// (jail_status, the watchdog) replaces it, and a reset drops it.
func TestDiskUsageCache(t *testing.T) {
	m, _ := newManager(t, nil, nil)
	s := openSession(t, m, "usage")
	before, err := s.diskUsage(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Path, "f"), []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.diskUsage(time.Hour); got != before {
		t.Errorf("cached count %+v, want the earlier %+v", got, before)
	}
	want := hostUsage(t, s.Path)
	if got, _ := s.Usage(); got != want {
		t.Errorf("Usage() = %+v, want a fresh %+v", got, want)
	}
	if got, _ := s.diskUsage(time.Hour); got != want {
		t.Errorf("cached count %+v, want the fresh %+v", got, want)
	}
	if _, err := s.Reset(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.diskUsage(time.Hour); got != hostUsage(t, s.Path) {
		t.Errorf("count after reset %+v, want the skeleton's %+v", got, hostUsage(t, s.Path))
	}
}

// TestSkeletonRemade: a skeleton directory a command removed (or whose
// parent it removed) is there again for the next call; one it replaced by
// a file stays the command's.
func TestSkeletonRemade(t *testing.T) {
	m, _ := newManager(t, nil, nil)
	s := openSession(t, m, "s")
	for _, gone := range []string{".tmp", ".cache", ".local/share", ".local"} {
		if err := os.RemoveAll(filepath.Join(s.Path, gone)); err != nil {
			t.Fatal(err)
		}
		s.ensureSkeleton()
		if got := sorted(tree(t, s.Path)); !slices.Equal(got, skeletonTree) {
			t.Errorf("after removing %s the jail holds %q, want %q", gone, got, skeletonTree)
		}
	}
	os.Remove(filepath.Join(s.Path, ".runtime"))
	writeFile(t, filepath.Join(s.Path, ".runtime"), "mine")
	s.ensureSkeleton()
	if fi, err := os.Lstat(filepath.Join(s.Path, ".runtime")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf(".runtime, a file the command made, is now %v %v", fi, err)
	}
}

// writeFile is jailfstest's, named short for the tests of this package.
var writeFile = jailfstest.WriteFile
