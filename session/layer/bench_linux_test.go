package layer

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkCompute diffs a layer of 20,000 files, as an npm install
// leaves it: the host has a .gitignore naming node_modules/, a package.json
// and src/ with 1,000 files of 1 KiB; the upper has node_modules/ added
// whole (19,000 files of 1 KiB, 1,000 packages of 19 files in two
// directories each, ignored and summarised), and src/ copied up whole:
// 500 files edited, 500 unchanged copy-ups (read and compared).
func BenchmarkCompute(b *testing.B) {
	line := strings.Repeat("x", 63) + "\n"
	body := strings.Repeat(line, 16)
	host := []node{file(".gitignore", "node_modules/\n"), file("package.json", "{}\n")}
	var upper []node
	for i := range 1000 {
		p := fmt.Sprintf("src/f%04d.js", i)
		host = append(host, file(p, body))
		if i%2 == 0 {
			upper = append(upper, file(p, strings.Replace(body, "x", "y", 1)))
		} else {
			upper = append(upper, file(p, body))
		}
	}
	for i := range 1000 {
		for j := range 19 {
			sub := "lib"
			if j >= 10 {
				sub = "lib/util"
			}
			upper = append(upper, file(fmt.Sprintf("node_modules/pkg%04d/%s/m%02d.js", i, sub, j), body))
		}
	}
	up, project := setup(b, host, upper)
	for _, opt := range []Options{{}, {Patch: true}, {All: true}} {
		b.Run(fmt.Sprintf("all=%v,patch=%v", opt.All, opt.Patch), func(b *testing.B) {
			for b.Loop() {
				d, err := Compute(up, project, opt)
				if err != nil {
					b.Fatal(err)
				}
				if !opt.All && (len(d.Changes) != 500 || len(d.Ignored) != 1 || d.Ignored[0].Files != 19000) {
					b.Fatalf("%d changes, %+v", len(d.Changes), d.Ignored)
				}
			}
		})
	}
}
