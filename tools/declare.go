package tools

import (
	"embed"
	"encoding/json"
	"io/fs"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jail-mcp/jail-mcp/session/layer"
)

// declarations are the tools' texts as written by hand: their
// descriptions (descriptions/NAME.txt, and NAME.view.txt added when the
// project view is on) and schemas (schemas/NAME.input.json, else
// empty.input.json, and NAME.output.json), NAME being the tool's name
// without its jail_ or jailed_. Every client accepts the schemas (no
// ["null","array"] types); golden files pin both.
//
//go:embed schemas/*.json descriptions/*.txt
var declarations embed.FS

// definitions are the tools, in the order they are listed; openWorld:
// network is on; view: the project view is on (--overlay), without which
// jail_diff, jail_apply and jail_discard could only refuse, so they are not listed.
func definitions(openWorld, view bool) []mcp.Tool {
	defs := []mcp.Tool{
		declare("jailed_exec", view, annotations("Run a command in the jail", false, true, false, openWorld)),
		declare("jail_status", view, annotations("Jail status", true, false, true, false)),
		declare("jail_reset", view, annotations("Reset the jail", false, true, true, false)),
		declare("jail_job", view, annotations("Follow a job", false, true, false, false)),
	}
	if view {
		defs = append(defs,
			declare("jail_diff", view, annotations("Changes in the project view", true, false, true, false)),
			declare("jail_apply", view, annotations("Apply changes to the project", false, true, false, false)),
			declare("jail_discard", view, annotations("Take the host's version", false, true, true, false)))
	}
	return defs
}

// declare builds the tool name from its texts.
func declare(name string, view bool, ann mcp.ToolAnnotation) mcp.Tool {
	short := strings.TrimPrefix(strings.TrimPrefix(name, "jailed_"), "jail_")
	desc := description(short)
	if extra := "descriptions/" + short + ".view.txt"; view && exists(extra) {
		desc += " " + oneLine(text(extra))
	}
	in := "empty"
	if exists("schemas/" + short + ".input.json") {
		in = short
	}
	return mcp.Tool{
		Name:            name,
		Description:     desc,
		RawInputSchema:  json.RawMessage(text("schemas/" + in + ".input.json")),
		RawOutputSchema: json.RawMessage(text("schemas/" + short + ".output.json")),
		Annotations:     ann,
	}
}

// description is descriptions/NAME.txt as one line, with {protected}
// standing for the names jail_apply never writes.
func description(name string) string {
	desc := oneLine(text("descriptions/" + name + ".txt"))
	return strings.ReplaceAll(desc, "{protected}", strings.Join(layer.ProtectedNames, ", "))
}

// oneLine is s with its lines joined and its runs of spaces folded.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// exists reports whether the embedded file name is there.
func exists(name string) bool {
	_, err := fs.Stat(declarations, name)
	return err == nil
}

// text is the embedded file name; a missing one is a bug of this package.
func text(name string) string {
	b, err := declarations.ReadFile(name)
	if err != nil {
		panic("tools: " + err.Error())
	}
	return string(b)
}

func annotations(title string, readOnly, destructive, idempotent, openWorld bool) mcp.ToolAnnotation {
	return mcp.ToolAnnotation{
		Title:           title,
		ReadOnlyHint:    &readOnly,
		DestructiveHint: &destructive,
		IdempotentHint:  &idempotent,
		OpenWorldHint:   &openWorld,
	}
}

// fieldsOf is the fields schemas/NAME.input.json takes, sorted.
func fieldsOf(name string) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal([]byte(text("schemas/"+name+".input.json")), &s); err != nil {
		panic("tools: bad schema: " + err.Error())
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
