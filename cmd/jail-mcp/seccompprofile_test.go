//go:build linux

package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// compileProfile compiles the OCI seccomp profile at path for this
// machine's architecture into a classic BPF program (what a container
// runtime loads), without the calls in drop, and writes it to a file of
// the test's: the rules this test reads (unconditional names, the first
// argument compared with SCMP_CMP_LT, _EQ and _GT, includes.arches, an
// errno of its own),
// others refused. Names come from golang.org/x/sys's table of this
// architecture.
func compileProfile(t *testing.T, path string, drop ...string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p seccompProfile
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	nrs := syscallNumbers(t)
	arch, ok := map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]
	if !ok {
		t.Fatalf("no audit architecture for %s", runtime.GOARCH)
	}
	errno := bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)}
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
		bpf.LoadAbsolute{Off: 0, Size: 4}, // nr
	}
	dropped := map[string]bool{}
	for _, n := range drop {
		dropped[n] = true
	}
	goarch := map[string]string{"amd64": "amd64", "arm64": "arm64"}[runtime.GOARCH]
	for _, r := range p.Syscalls {
		if r.Action == "SCMP_ACT_ERRNO" && r.ErrnoRet != nil && len(r.Args) == 0 && r.Includes == nil {
			for _, name := range r.Names {
				if nr, ok := nrs[name]; ok {
					prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1}, bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | *r.ErrnoRet})
				}
			}
			continue
		}
		if r.Action != "SCMP_ACT_ALLOW" || r.Excludes != nil {
			continue
		}
		if arches, ok := r.Includes["arches"].([]any); ok && !slices.Contains(arches, any(goarch)) || r.Includes != nil && r.Includes["arches"] == nil {
			continue
		}
		for _, name := range r.Names {
			nr, ok := nrs[name]
			if !ok || dropped[name] {
				continue
			}
			if len(r.Args) == 0 {
				prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1}, allow)
				continue
			}
			// One condition on the first argument's low half: checked,
			// then the number is loaded again for the next rule.
			a := r.Args[0]
			v := uint32(a["value"].(float64))
			cond, known := map[string]bpf.JumpTest{"SCMP_CMP_LT": bpf.JumpLessThan, "SCMP_CMP_EQ": bpf.JumpEqual, "SCMP_CMP_GT": bpf.JumpGreaterThan}[a["op"].(string)]
			if len(r.Args) != 1 || a["index"].(float64) != 0 || !known {
				t.Fatalf("a rule this test does not read: %+v", r)
			}
			prog = append(prog,
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 4},
				bpf.LoadAbsolute{Off: 16, Size: 4}, // args[0], low half (little endian)
				bpf.JumpIf{Cond: cond, Val: v, SkipFalse: 1},
				allow,
				bpf.LoadAbsolute{Off: 0, Size: 4},
			)
		}
	}
	prog = append(prog, errno)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, ins := range raw {
		out = binary.LittleEndian.AppendUint16(out, ins.Op)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.LittleEndian.AppendUint32(out, ins.K)
	}
	file := filepath.Join(t.TempDir(), "profile.bpf")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// syscallNumbers are this architecture's system calls by name, from
// golang.org/x/sys's table (zsysnum_linux_GOARCH.go).
func syscallNumbers(t *testing.T) map[string]uint32 {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Fatalf("find golang.org/x/sys: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "unix", "zsysnum_linux_"+runtime.GOARCH+".go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint32{}
	for _, m := range regexp.MustCompile(`(?m)^\s*SYS_(\w+)\s*=\s*(\d+)`).FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.ParseUint(m[2], 10, 32)
		out[strings.ToLower(m[1])] = uint32(n)
	}
	if len(out) < 300 || out["openat"] == 0 {
		t.Fatalf("golang.org/x/sys's table of %s: %d calls", runtime.GOARCH, len(out))
	}
	return out
}
