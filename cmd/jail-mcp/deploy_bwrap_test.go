//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// seccompProfile is what the test reads of an OCI seccomp profile.
type seccompProfile struct {
	DefaultAction string `json:"defaultAction"`
	Syscalls      []struct {
		Names    []string         `json:"names"`
		Action   string           `json:"action"`
		ErrnoRet *uint32          `json:"errnoRet"`
		Args     []map[string]any `json:"args"`
		Includes map[string]any   `json:"includes"`
		Excludes map[string]any   `json:"excludes"`
	} `json:"syscalls"`
}

// bwrapNeeds are the calls bubblewrap and the project view make that the
// runtime's default profile denies a container without CAP_SYS_ADMIN.
var bwrapNeeds = []string{"clone", "unshare", "setns", "mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "move_mount", "open_tree"}

// neverAllowed are calls the runtime's default profile denies a container
// without capabilities that neither bubblewrap nor the view needs: the
// shipped profile must keep denying them.
var neverAllowed = []string{
	"bpf", "perf_event_open", "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct",
	"settimeofday", "clock_settime", "iopl", "ioperm", "open_by_handle_at",
	"userfaultfd", "lookup_dcookie", "quotactl", "quotactl_fd", "syslog", "fanotify_init",
	"kcmp", "pidfd_getfd", "process_madvise", "mount_setattr", "fspick", "sethostname", "setdomainname",
	"chroot", "vhangup", "nfsservctl", "uselib", "_sysctl", "ustat", "mbind", "set_mempolicy",
	"get_mempolicy", "move_pages", "lsm_set_self_attr",
}

// TestDeployBwrap: the team deployment (and its image) runs bubblewrap
// with the view,
// with the narrowest settings that let it run in a pod: a user namespace of
// the pod's own, no capability, no privilege escalation, /proc unmasked
// (only with hostUsers: false), and the shipped seccomp profile, which
// allows what bubblewrap and the view need unconditionally and nothing
// else the runtime's default denies; the landlock variant keeps the
// runtime's own profile. (TestOverlayEscapeInUserNamespace runs the
// server in a user namespace standing for the pod.)
func TestDeployBwrap(t *testing.T) {
	objs := readManifests(t, "jail-mcp.yaml")
	spec := objs["StatefulSet/jail-mcp"].Spec.Template.Spec
	c := spec.Containers[0]
	if spec.HostUsers == nil || *spec.HostUsers {
		t.Errorf("hostUsers: want false (the pod's own user namespace)")
	}
	if argValue(c.Args, "backend") != "bwrap" || argValue(c.Args, "overlay") != "on" {
		t.Errorf("arguments %q: want --backend=bwrap --overlay=on", c.Args)
	}
	img, err := os.ReadFile(filepath.Join("..", "..", "deploy", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var cmd []string
	if m := regexp.MustCompile(`(?m)^CMD (\[.*\])$`).FindSubmatch(img); m == nil || json.Unmarshal(m[1], &cmd) != nil || argValue(cmd, "backend") != "bwrap" || argValue(cmd, "overlay") != "on" {
		t.Errorf("the image's CMD %q: want --backend bwrap --overlay on", cmd)
	}
	sc := c.SecurityContext
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("privileges: %+v, want no escalation and every capability dropped", sc)
	}
	if sc.ProcMount != "Unmasked" || sc.AppArmorProfile.Type != "Unconfined" {
		t.Errorf("procMount %q, AppArmor %q: bubblewrap mounts its own /proc and mounts in its namespaces", sc.ProcMount, sc.AppArmorProfile.Type)
	}
	if sc.SeccompProfile.Type != "Localhost" || filepath.Base(sc.SeccompProfile.LocalhostProfile) != "seccomp-bwrap.json" {
		t.Fatalf("seccomp: %+v, want Localhost .../seccomp-bwrap.json", sc.SeccompProfile)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "seccomp-bwrap.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p seccompProfile
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("deploy/kubernetes/seccomp-bwrap.json: %v", err)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Errorf("defaultAction %q: want SCMP_ACT_ERRNO (deny what is not listed)", p.DefaultAction)
	}
	unconditional, anyRule := map[string]bool{}, map[string]bool{}
	for _, r := range p.Syscalls {
		if r.Action != "SCMP_ACT_ALLOW" {
			continue
		}
		for _, n := range r.Names {
			anyRule[n] = true
			if len(r.Args) == 0 && r.Includes == nil && r.Excludes == nil {
				unconditional[n] = true
			}
		}
	}
	for _, n := range append(slices.Clone(bwrapNeeds), "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "seccomp", "prctl", "execve", "openat", "ioctl") {
		if !unconditional[n] {
			t.Errorf("the profile does not allow %s, which the server, bubblewrap or the view need", n)
		}
	}
	for _, n := range neverAllowed {
		if anyRule[n] {
			t.Errorf("the profile allows %s, which the runtime's default denies and nothing of jail-mcp needs", n)
		}
	}
	if len(unconditional) < 300 {
		t.Errorf("the profile allows %d calls unconditionally: the runtime's default allows about 360", len(unconditional))
	}

	// The landlock variant: the runtime's own seccomp profile and /proc,
	// the node's users.
	k, err := os.ReadFile(filepath.Join("..", "..", "deploy", "landlock", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kust struct {
		Resources []string `yaml:"resources"`
		Patches   []struct {
			Patch string `yaml:"patch"`
		} `yaml:"patches"`
	}
	if err := yaml.Unmarshal(k, &kust); err != nil || len(kust.Patches) != 1 || !slices.Contains(kust.Resources, "../") {
		t.Fatalf("deploy/landlock/kustomization.yaml: %v %+v", err, kust)
	}
	for _, want := range []string{"--backend=landlock", "--overlay=off", "RuntimeDefault", "path: /spec/template/spec/hostUsers"} {
		if !strings.Contains(kust.Patches[0].Patch, want) {
			t.Errorf("the landlock variant's patch lacks %q", want)
		}
	}
}
