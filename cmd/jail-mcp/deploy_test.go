//go:build linux

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"go.yaml.in/yaml/v3"

	"github.com/jail-mcp/jail-mcp/cmd/jail-mcp/internal/testkit"
)

// k8sObject is what the test reads of a Kubernetes manifest.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		ClusterIP   string `yaml:"clusterIP"`
		ServiceName string `yaml:"serviceName"`
		Ports       []struct {
			Port int `yaml:"port"`
		} `yaml:"ports"`
		Template struct {
			Spec struct {
				HostUsers  *bool `yaml:"hostUsers"`
				Containers []struct {
					Args            []string       `yaml:"args"`
					SecurityContext k8sSecurityCtx `yaml:"securityContext"`
					Env             []struct {
						Name      string `yaml:"name"`
						ValueFrom struct {
							SecretKeyRef struct{ Name, Key string } `yaml:"secretKeyRef"`
						} `yaml:"valueFrom"`
					} `yaml:"env"`
					Ports []struct {
						ContainerPort int `yaml:"containerPort"`
					} `yaml:"ports"`
					ReadinessProbe k8sProbe `yaml:"readinessProbe"`
					LivenessProbe  k8sProbe `yaml:"livenessProbe"`
					VolumeMounts   []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata struct{ Name string } `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

// k8sSecurityCtx is what the test reads of a container's security
// context.
type k8sSecurityCtx struct {
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
	} `yaml:"capabilities"`
	SeccompProfile struct {
		Type             string `yaml:"type"`
		LocalhostProfile string `yaml:"localhostProfile"`
	} `yaml:"seccompProfile"`
	AppArmorProfile struct {
		Type string `yaml:"type"`
	} `yaml:"appArmorProfile"`
	ProcMount string `yaml:"procMount"`
}

type k8sProbe struct {
	HTTPGet struct{ Path string } `yaml:"httpGet"`
}

func readManifests(t *testing.T, files ...string) map[string]k8sObject {
	t.Helper()
	out := map[string]k8sObject{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var o k8sObject
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	return out
}

// serveArgs are a manifest's or the image's server arguments as this test
// runs them: its own project, on a free port of the same addresses.
func serveArgs(t *testing.T, args []string) (listen string, rest []string) {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("arguments %q do not start with serve", args)
	}
	for i := 1; i < len(args); i++ {
		name, value, inline := strings.Cut(strings.TrimPrefix(args[i], "--"), "=")
		if !inline && (name == "listen" || name == "project") && i+1 < len(args) {
			i++
			value = args[i]
		}
		switch name {
		case "listen":
			listen = value
		case "project":
		default:
			rest = append(rest, args[i])
		}
	}
	if !strings.HasSuffix(listen, ":8765") {
		t.Fatalf("listens on %q, not port 8765 as the balancer and Services expect", listen)
	}
	return strings.TrimSuffix(listen, "8765") + "0", rest
}

// argValue is the value of --name in args (--name=V or --name V).
func argValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// checkServes starts the server with args (as serveArgs makes them) and
// the token in its environment, as the deployment does, and checks that
// /healthz answers and a session runs a command in a jail of the project.
func checkServes(t *testing.T, args []string) {
	t.Helper()
	listen, rest := serveArgs(t, args)
	token := "jail-mcp-test-" + uuid.NewString()
	hs := testkit.StartHTTPOn(t, testkit.NewProject(t), listen, testkit.ServerEnv("JAIL_MCP_TOKEN="+token), rest...)
	hs.Token = token
	if code, body := httpGet(t, hs, "GET", "/healthz", ""); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	s := hs.Connect(t, "")
	if res, raw := s.Exec(map[string]any{"command": "echo hi > $HOME/f && cat $HOME/f"}); res.Stdout != "hi\n" || !strings.HasPrefix(res.Jail, hs.Project+"/.agent-home/") {
		t.Fatalf("a call: %+v %s", res, testkit.ResultText(raw))
	}
}

// TestDeployFiles: the Kubernetes manifests, the image recipe and the
// balancer's configuration agree (ports, names, the probe's path, the
// token's Secret, the jails' volume), and the server starts with exactly
// the arguments the StatefulSet and the image give it. (No cluster and no
// container engine run here: this is what can be checked without them.)
func TestDeployFiles(t *testing.T) {
	objs := readManifests(t, "jail-mcp.yaml", "haproxy.yaml", "secret.yaml", "namespace.yaml")
	sts, ok := objs["StatefulSet/jail-mcp"]
	if !ok || len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("no StatefulSet jail-mcp with one container: %v", objs)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	headless := objs["Service/"+sts.Spec.ServiceName]
	if headless.Spec.ClusterIP != "None" || len(headless.Spec.Ports) != 1 || headless.Spec.Ports[0].Port != 8765 {
		t.Errorf("the StatefulSet's Service %q is not headless on 8765: %+v", sts.Spec.ServiceName, headless.Spec)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8765 || objs["Service/jail-mcp"].Spec.Ports[0].Port != 8765 {
		t.Errorf("ports: container %+v, balancer's Service %+v", c.Ports, objs["Service/jail-mcp"].Spec.Ports)
	}
	if c.ReadinessProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes: readiness %q, liveness %q, want /healthz", c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
	}
	secret := objs["Secret/jail-mcp-token"]
	tokenFromSecret := false
	for _, e := range c.Env {
		ref := e.ValueFrom.SecretKeyRef
		if e.Name == "JAIL_MCP_TOKEN" && ref.Name == secret.Metadata.Name && secret.StringData[ref.Key] != "" {
			tokenFromSecret = true
		}
	}
	if !tokenFromSecret {
		t.Errorf("JAIL_MCP_TOKEN does not come from the Secret's key: %+v", c.Env)
	}
	// The jails (<project>/.agent-home) are on a volume of the claims.
	jails := argValue(c.Args, "project") + "/.agent-home"
	jailsOnVolume := false
	for _, m := range c.VolumeMounts {
		for _, v := range sts.Spec.VolumeClaimTemplates {
			jailsOnVolume = jailsOnVolume || m.Name == v.Metadata.Name && m.MountPath == jails
		}
	}
	if argValue(c.Args, "root") != "" || !jailsOnVolume {
		t.Errorf("the jails, %s, are not a volume of the StatefulSet's claims", jails)
	}

	cfg, err := os.ReadFile(filepath.Join("..", "..", "deploy", "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	dns := sts.Spec.ServiceName + ".jail-mcp.svc.cluster.local:8765"
	if !regexp.MustCompile(`(?m)^\s*server-template \S+ \d+ `+regexp.QuoteMeta(dns)+` check`).Match(cfg) || !regexp.MustCompile(`(?m)^\s*bind :8765$`).Match(cfg) {
		t.Errorf("deploy/haproxy.cfg does not listen on :8765 and find the servers at %s", dns)
	}
	kust, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kustomization.yaml"))
	if err != nil || !strings.Contains(string(kust), "namespace: jail-mcp") {
		t.Errorf("deploy/kustomization.yaml does not put everything in the namespace jail-mcp the balancer looks in: %v", err)
	}

	t.Run("StatefulSet's arguments", func(t *testing.T) { checkServes(t, c.Args) })
	t.Run("image's arguments", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "Containerfile"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^CMD (\[.*\])$`).FindSubmatch(b)
		var args []string
		if m == nil || json.Unmarshal(m[1], &args) != nil {
			t.Fatalf("no CMD [...] in deploy/Containerfile")
		}
		checkServes(t, args)
	})
}
