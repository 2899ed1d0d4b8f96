package config

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed intro.md
var introMarkdown string

//go:embed example.json
var exampleJSON []byte

// Markdown is the operator's configuration reference, docs/configuration.md:
// an introduction, then one table per section with every field's
// environment variable, default, range or values and description, then the
// checks across fields and the warnings. It is generated from the struct
// tags, so it cannot fall behind the code.
func Markdown() string {
	var b strings.Builder
	intro := strings.NewReplacer(
		"{{EXAMPLE}}", strings.TrimSpace(string(exampleJSON)),
		"{{DEV}}", strings.TrimSpace(string(devJSON)),
	).Replace(introMarkdown)
	b.WriteString(strings.TrimSpace(intro) + "\n\n## Settings\n")
	for _, sec := range schema.sections {
		writeSection(&b, sec)
	}
	b.WriteString("\n## Checks across fields\n\n")
	b.WriteString("Besides each field's range, a configuration must meet these rules:\n\n")
	for _, r := range rules {
		b.WriteString("- " + codeSpans(r.doc, nil) + "\n")
	}
	b.WriteString("\n## Warnings at start\n\n")
	b.WriteString("A valid configuration still logs a warning when:\n\n")
	for _, w := range warnings {
		b.WriteString("- " + codeSpans(w.text, nil) + ".\n")
	}
	return b.String()
}

func writeSection(b *strings.Builder, sec *section) {
	if sec.name == "" {
		b.WriteString("\n### Top level\n")
	} else {
		fmt.Fprintf(b, "\n### %s\n\n%s\n", sec.name, codeSpans(sec.doc, sec))
	}
	group := ""
	for i, f := range sec.fields {
		if f.group != group || i == 0 {
			if group = f.group; group != "" {
				fmt.Fprintf(b, "\n#### %s\n", group)
			}
			b.WriteString("\n| Field | Environment variable | Default | Range or values | Description |\n")
			b.WriteString("|---|---|---|---|---|\n")
		}
		fmt.Fprintf(b, "| `%s` | `%s` | %s | %s | %s |\n",
			f.name, f.env, defaultCell(f), rangeCell(f), cell(codeSpans(f.doc, sec, f.values...)))
	}
}

func defaultCell(f *field) string {
	ref, sub := f.derivation()
	switch {
	case f.derive == "hostname":
		return "host name"
	case sub != "":
		return "`" + sub + "` in " + refName(ref)
	case f.derive != "":
		return "same as " + refName(ref)
	case f.hasDef:
		return "`" + f.def + "`"
	}
	return "—"
}

// refName names the field at path for a reader of another section.
func refName(path string) string {
	if !strings.Contains(path, ".") {
		return "the top-level `" + path + "`"
	}
	return "`" + path + "`"
}

func rangeCell(f *field) string {
	switch {
	case f.spans != nil:
		return strings.ReplaceAll(f.rng, "..", "–")
	case f.values != nil:
		return "`" + strings.Join(f.values, "`, `") + "`"
	case f.kind == kindBool:
		return "`true`, `false`"
	}
	text := map[string]string{
		"ip":        "IP address",
		"multicast": "multicast IP address",
		"hostport":  "list of `host:port`",
		"path":      "path",
	}[f.format]
	if text == "" {
		text = "text"
	}
	if f.require {
		text += ", not empty"
	}
	return text
}

// cell escapes text for a table cell.
func cell(text string) string {
	return strings.ReplaceAll(text, "|", `\|`)
}

// codeSpans puts backquotes around the words of text that are field paths,
// field names of sec, one of values, true, false, reason codes (0x97) or
// topics and endpoints ($SYS/..., /cluster).
func codeSpans(text string, sec *section, values ...string) string {
	words := strings.Split(text, " ")
	for i, w := range words {
		core := strings.TrimLeft(w, "(")
		core = strings.TrimRight(core, ".,;:)")
		if core != "" && isCodeWord(core, sec, values) {
			words[i] = strings.Replace(w, core, "`"+core+"`", 1)
		}
	}
	return strings.Join(words, " ")
}

func isCodeWord(w string, sec *section, values []string) bool {
	switch {
	case schema.byPath[w] != nil, w == "true", w == "false":
		return true
	case strings.HasPrefix(w, "0x"), strings.HasPrefix(w, "$SYS/"), strings.HasPrefix(w, "/") && len(w) > 1:
		return true
	case sec != nil && sec.name != "" && schema.byPath[sec.name+"."+w] != nil:
		return true
	}
	for _, v := range values {
		if w == v {
			return true
		}
	}
	return false
}
