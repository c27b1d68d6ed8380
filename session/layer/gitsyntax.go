package layer

import (
	"errors"
	"fmt"
	"strings"
)

// gitVar is one variable of a git configuration file: section and key
// in lower case, the subsection as written.
type gitVar struct {
	section, subsection, key, value string
}

// errGitSyntax is a configuration file git itself would not parse.
var errGitSyntax = errors.New("not git's configuration syntax")

// parseGitConfig reads data as git's config.c does (git_parse_source):
// a UTF-8 byte order mark skipped, "\r\n" as "\n", comments from '#' or
// ';', a key on the line of its [section], a "\" at a line's end
// joining the next line, quotes and the \t \b \n \\ \" escapes, the old
// [section.subsection] form. go-git's decoder (gcfg) differs where it
// matters here: it keeps the newline of a continued line, so that a
// hooks path or an include split over two lines would be read as a
// name git never uses, and that name protected instead of git's.
func parseGitConfig(data string) ([]gitVar, error) {
	p := &gitParser{s: strings.TrimPrefix(data, "\ufeff"), line: 1}
	var out []gitVar
	var section, sub string
	comment := false
	for {
		c, eof := p.next()
		switch {
		case eof:
			return out, nil
		case c == '\n':
			comment = false
		case comment || isSpace(c):
		case c == '#' || c == ';':
			comment = true
		case c == '[':
			var err error
			if section, sub, err = p.sectionName(); err != nil {
				return nil, err
			}
		case isAlpha(c):
			key, value, err := p.variable(c)
			if err != nil {
				return nil, err
			}
			out = append(out, gitVar{section, sub, key, value})
		default:
			return nil, p.fail()
		}
	}
}

type gitParser struct {
	s    string
	i    int
	line int  // of the last byte read
	nl   bool // that byte ended its line
}

// next is the next byte, "\r\n" read as "\n"; at the end, a "\n" and
// true (git's get_next_char gives a last newline too).
func (p *gitParser) next() (byte, bool) {
	if p.nl {
		p.line++
		p.nl = false
	}
	if p.i >= len(p.s) {
		return '\n', true
	}
	c := p.s[p.i]
	p.i++
	if c == '\r' && p.i < len(p.s) && p.s[p.i] == '\n' {
		c = '\n'
		p.i++
	}
	p.nl = c == '\n'
	return c, false
}

func (p *gitParser) fail() error {
	return fmt.Errorf("line %d: %w", p.line, errGitSyntax)
}

// sectionName reads what follows "[": a name of key characters and dots
// (lower-cased, "a.b" being section a, subsection b), then optionally
// a quoted subsection kept as written.
func (p *gitParser) sectionName() (string, string, error) {
	var b strings.Builder
	for {
		c, eof := p.next()
		switch {
		case eof || c == '\n':
			return "", "", p.fail()
		case c == ']':
			name := b.String()
			if name == "" {
				return "", "", p.fail()
			}
			sec, sub, _ := strings.Cut(name, ".")
			return sec, sub, nil
		case isSpace(c):
			return p.subsection(b.String())
		case isKeyChar(c) || c == '.':
			b.WriteByte(lower(c))
		default:
			return "", "", p.fail()
		}
	}
}

// subsection reads ` "name"]` after the section name (git's
// get_extended_base_var).
func (p *gitParser) subsection(section string) (string, string, error) {
	if section == "" || strings.Contains(section, ".") {
		return "", "", p.fail()
	}
	c, _ := p.next()
	for isSpace(c) && c != '\n' {
		c, _ = p.next()
	}
	if c != '"' {
		return "", "", p.fail()
	}
	var b strings.Builder
	for {
		c, eof := p.next()
		if eof || c == '\n' {
			return "", "", p.fail()
		}
		if c == '"' {
			break
		}
		if c == '\\' {
			if c, eof = p.next(); eof || c == '\n' {
				return "", "", p.fail()
			}
		}
		b.WriteByte(c)
	}
	if c, _ := p.next(); c != ']' {
		return "", "", p.fail()
	}
	return section, b.String(), nil
}

// variable reads a key starting with first and its value; a key alone
// is a true boolean ("").
func (p *gitParser) variable(first byte) (string, string, error) {
	var b strings.Builder
	b.WriteByte(lower(first))
	c, eof := p.next()
	for !eof && isKeyChar(c) {
		b.WriteByte(lower(c))
		c, eof = p.next()
	}
	for c == ' ' || c == '\t' {
		c, _ = p.next()
	}
	if c == '\n' {
		return b.String(), "", nil
	}
	if c != '=' {
		return "", "", p.fail()
	}
	v, err := p.value()
	return b.String(), v, err
}

// value reads a value to the end of its line (git's parse_value).
func (p *gitParser) value() (string, error) {
	var b strings.Builder
	quote, comment, space := false, false, 0
	for {
		c, _ := p.next()
		if c == '\n' {
			if quote {
				return "", p.fail()
			}
			return b.String(), nil
		}
		if comment {
			continue
		}
		if isSpace(c) && !quote {
			if b.Len() > 0 {
				space++
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		for ; space > 0; space-- {
			b.WriteByte(' ')
		}
		switch c {
		case '\\':
			c, _ = p.next()
			switch c {
			case '\n':
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", p.fail()
			}
			b.WriteByte(c)
		case '"':
			quote = !quote
		default:
			b.WriteByte(c)
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isKeyChar(c byte) bool {
	return isAlpha(c) || c >= '0' && c <= '9' || c == '-'
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
