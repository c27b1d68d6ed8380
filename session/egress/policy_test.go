package egress

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"github.com", "github.com", ""},
		{"GitHub.COM.", "github.com", ""},
		{"*.npmjs.org,registry.npmjs.org:443", "*.npmjs.org,registry.npmjs.org:443", ""},
		{" pypi.org , files.pythonhosted.org ", "pypi.org,files.pythonhosted.org", ""},
		{"10.0.0.1:8080,[::1]:8080,::1", "10.0.0.1:8080,[::1]:8080,[::1]", ""},
		{"a.com,a.com", "a.com", ""},
		{"", "", "empty allowlist"},
		{",", "", "empty allowlist"},
		{"a.com:0", "", "port from 1 to 65535"},
		{"a.com:99999", "", "port from 1 to 65535"},
		{"a.com:http", "", "port from 1 to 65535"},
		{"*.com", "", "want a host name"},
		{"*.example.com.", "*.example.com", ""},
		{"*", "", "want a host name"},
		{"*.", "", "want a host name"},
		{"a..b", "", "want a host name"},
		{"-a.com", "", "want a host name"},
		{"a b.com", "", "want a host name"},
		{"http://a.com", "", "want"},
		{"a.com/path", "", "want a host name"},
	} {
		p, err := Parse(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Parse(%q) = %v, %v; want an error with %q", tc.in, p, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("Parse(%q): %v", tc.in, err)
		case tc.err == "" && p.String() != tc.want:
			t.Errorf("Parse(%q) = %q, want %q", tc.in, p, tc.want)
		}
	}
}

func TestAllows(t *testing.T) {
	p, err := Parse("github.com,*.npmjs.org,api.example.com:443,127.0.0.1:8080")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host              string
		port              int
		allowed, explicit bool
	}{
		{"github.com", 443, true, true},
		{"GITHUB.com.", 22, true, true},
		{"api.github.com", 443, false, false},
		{"registry.npmjs.org", 443, true, false},
		{"a.b.npmjs.org", 80, true, false},
		{"npmjs.org", 443, false, false},
		{"evilnpmjs.org", 443, false, false},
		{"api.example.com", 443, true, true},
		{"api.example.com", 80, false, false},
		{"127.0.0.1", 8080, true, true},
		{"127.0.0.1", 8081, false, false},
		{"[127.0.0.1]", 8080, true, true},
	} {
		allowed, explicit := p.Allows(tc.host, tc.port)
		if allowed != tc.allowed || explicit != tc.explicit {
			t.Errorf("Allows(%q, %d) = %t %t, want %t %t", tc.host, tc.port, allowed, explicit, tc.allowed, tc.explicit)
		}
	}
}

func TestNarrow(t *testing.T) {
	p, _ := Parse("github.com,*.npmjs.org,pypi.org:443")
	for _, tc := range []struct {
		sub string
		ok  bool
	}{
		{"github.com", true},
		{"github.com:443", true},
		{"registry.npmjs.org", true},
		{"*.npmjs.org", true},
		{"*.registry.npmjs.org:443", true},
		{"pypi.org:443", true},
		{"pypi.org", false},
		{"pypi.org:80", false},
		{"npmjs.org", false},
		{"example.com", false},
		{"github.com,example.com", false},
	} {
		sub, err := Parse(tc.sub)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Narrow(sub); (err == nil) != tc.ok {
			t.Errorf("Narrow(%q): %v, want ok %t", tc.sub, err, tc.ok)
		}
	}
}
