package view

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHostCaches: the caches a view shows are the host's that exist, out
// of the directories the sandbox shows empty, and Go's module cache (shown
// at its own path) never over or under the project.
func TestHostCaches(t *testing.T) {
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		t.Fatal(err)
	}
	home, err := os.MkdirTemp(base, "jail-mcp-test-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	home, _ = filepath.EvalSymlinks(home)
	for _, d := range []string{"go/pkg/mod", ".cache/go-build", ".npm", "elsewhere/mod"} {
		os.MkdirAll(filepath.Join(home, d), 0o755)
	}
	inTmp := t.TempDir()
	project := filepath.Join(home, "project")
	os.MkdirAll(filepath.Join(project, "mod"), 0o755)
	names := func(cs []hostCache) map[string]string {
		m := map[string]string{}
		for _, c := range cs {
			m[c.name] = c.lower
		}
		return m
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		want map[string]string
	}{
		{"defaults", nil, map[string]string{"go-mod": home + "/go/pkg/mod", "go-build": home + "/.cache/go-build", "npm": home + "/.npm"}},
		{"GOMODCACHE", map[string]string{"GOMODCACHE": home + "/elsewhere/mod"}, map[string]string{"go-mod": home + "/elsewhere/mod", "go-build": home + "/.cache/go-build", "npm": home + "/.npm"}},
		{"in /tmp", map[string]string{"GOMODCACHE": inTmp, "GOCACHE": inTmp}, map[string]string{"npm": home + "/.npm"}},
		{"in the project", map[string]string{"GOMODCACHE": project + "/mod"}, map[string]string{"go-build": home + "/.cache/go-build", "npm": home + "/.npm"}},
		{"relative", map[string]string{"GOMODCACHE": "mod"}, map[string]string{"go-mod": home + "/go/pkg/mod", "go-build": home + "/.cache/go-build", "npm": home + "/.npm"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := names(hostCaches(tt.env, home, project))
			if len(got) != len(tt.want) {
				t.Fatalf("caches %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Fatalf("caches %v, want %v", got, tt.want)
				}
			}
		})
	}
	env := viewEnv(map[string]string{}, hostCaches(nil, home, project))
	if env["GOMODCACHE"] != home+"/go/pkg/mod" || len(env) != 1 {
		t.Fatalf("the view's variables: %v", env)
	}
}
