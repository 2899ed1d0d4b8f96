package syntax

// typeAliases maps connector types written under an older name to the
// canonical one.
var typeAliases = map[string]string{"S7": "SIEMENS_S7"}

// blockAliases maps block kinds written under an older name to the
// canonical one.
var blockAliases = map[string]string{"ROUTE_CONFIG": "CONNECTOR_CONFIG"}

// connector parses DEFINE CONNECTOR (or DEFINE ROUTE) after the keyword.
func (p *parser) connector(h DefHeader) *Connector {
	h.Name, h.NamePos = p.defName("the connector")
	c := &Connector{DefHeader: h}
	p.expectKw("WITH", "after DEFINE "+h.Keyword+" "+h.Name+" (WITH TYPE <type>)")
	p.expectKw("TYPE", "after DEFINE "+h.Keyword+" "+h.Name+" WITH")
	t := p.tok()
	if t.Kind != WORD && t.Kind != STRING {
		p.failf(t.Pos, "", "expected the connector type after WITH TYPE, found %s", t)
	}
	p.next()
	c.TypeWritten, c.TypePos = t.Value, t.Pos
	if t.Kind == STRING {
		c.TypeWritten = upper(t.Value)
	}
	c.Type = c.TypeWritten
	if a, ok := typeAliases[c.Type]; ok {
		c.Type = a
	}
	c.Pairs = p.pairs()
	if p.openLine() {
		root := &ConfigBlock{}
		p.configItems(root)
		c.Pairs = append(c.Pairs, root.Pairs...)
		c.Blocks = root.Blocks
	}
	return c
}

// configItems parses the lines of an indented configuration block into b.
func (p *parser) configItems(b *ConfigBlock) {
	p.enter()
	defer p.leave()
	p.items(func() {
		t := p.tok()
		switch {
		case kwAt(t, "WITH"):
			b.Pairs = append(b.Pairs, p.pairs()...)
		case kwAt(t, "ADD") || kwAt(t, "STORE"):
			b.Blocks = append(b.Blocks, p.configBlock())
		default:
			p.failf(t.Pos, suggest(t, "ADD", "WITH", "STORE"),
				"expected ADD <block> or WITH <KEY> <value> in the connector, found %s", t)
		}
	})
}

// configBlock parses ADD <KIND> [name] [WITH ...] (or STORE <name> WITH
// ...) and the block indented under it.
func (p *parser) configBlock() *ConfigBlock {
	first := p.next()
	b := &ConfigBlock{Start: first.Pos, Kind: "STORE", Written: "STORE", KindPos: first.Pos}
	if first.Value == "ADD" {
		k := p.tok()
		if k.Kind != WORD {
			p.failf(k.Pos, "", "expected a block kind after ADD (MODBUS_CONFIG, MAPPING, TAG, EVENT...), found %s", k)
		}
		p.next()
		b.Written, b.KindPos = k.Value, k.Pos
		b.Kind = k.Value
		if a, ok := blockAliases[k.Value]; ok {
			b.Kind = a
		}
	}
	if t := p.tok(); t.Kind == STRING {
		p.next()
		b.Name, b.NamePos = t.Value, t.Pos
	} else if (t.Kind == WORD && t.Value != "WITH") || t.Kind == NUMBER {
		b.Name, b.NamePos = p.defName("the " + b.Kind)
	}
	b.Pairs = p.pairs()
	if t := p.tok(); t.Kind != NEWLINE && t.Kind != EOF && t.Kind != DEDENT {
		p.failf(t.Pos, "", "unexpected %s after ADD %s", t, b.Written)
	}
	if p.at(NEWLINE) && p.peek(1).Kind == INDENT {
		p.next()
		p.next()
		p.configItems(b)
	}
	return b
}

// pairs parses WITH <KEY> <value...> clauses up to the end of the line.
func (p *parser) pairs() []*ConfigPair {
	var out []*ConfigPair
	for p.isKw("WITH") {
		w := p.next()
		k := p.tok()
		if k.Kind != WORD {
			p.failf(k.Pos, "", "expected a setting name after WITH, found %s", k)
		}
		p.next()
		pair := &ConfigPair{Start: w.Pos, Key: k.Value, KeyPos: k.Pos}
		pair.Values, pair.Raw = p.configValues()
		if len(pair.Values) == 0 {
			t := p.tok()
			p.failf(t.Pos, "", "setting %s needs a value", k.Text)
		}
		out = append(out, pair)
	}
	return out
}

// configValues reads value items up to the end of the line or the next
// WITH. Tokens glued together without space form one word (DB1.DBD0,
// ns=2;s=Temp).
func (p *parser) configValues() ([]ConfigValue, string) {
	var vals []ConfigValue
	first, last := -1, -1
	for {
		t := p.tok()
		if t.Kind == NEWLINE || t.Kind == EOF || t.Kind == DEDENT || t.Kind == INDENT || kwAt(t, "WITH") {
			break
		}
		if first < 0 {
			first = t.Pos.Offset
		}
		v := p.configValue()
		last = p.toks[p.i-1].End
		vals = append(vals, v)
	}
	if first < 0 {
		return nil, ""
	}
	return vals, p.src[first:last]
}

// configValue reads one value item.
func (p *parser) configValue() ConfigValue {
	t := p.next()
	v := ConfigValue{Pos: t.Pos, Text: t.Value}
	switch {
	case t.Kind == STRING && p.gluedEnd():
		v.Kind, v.Quote = ValueString, t.Quote
	case t.Kind == NUMBER && p.gluedEnd():
		v.Kind, v.Text, v.Number = ValueNumber, t.Text, numberValue(t.Text)
	case t.Kind == MINUS && p.at(NUMBER) && !p.tok().Spaced && p.gluedAfter(1):
		n := p.next()
		v.Kind, v.Text, v.Number = ValueNumber, "-"+n.Text, -numberValue(n.Text)
	case (kwAt(t, "TRUE") || kwAt(t, "FALSE")) && p.gluedEnd():
		v.Kind, v.Bool, v.Text = ValueBool, t.Value == "TRUE", t.Text
	case kwAt(t, "GET") && (p.isKw("ENV") || p.isKw("SECRET")) && p.peek(1).Kind == STRING:
		kind := p.next()
		name := p.next()
		v.Kind, v.Text = ValueEnv, name.Value
		if kind.Value == "SECRET" {
			v.Kind = ValueSecret
		}
	default:
		end := t.End
		for n := p.tok(); !n.Spaced && n.Kind != NEWLINE && n.Kind != EOF && n.Kind != DEDENT && n.Kind != INDENT; n = p.tok() {
			end = n.End
			p.next()
		}
		v.Kind, v.Text = ValueWord, p.src[t.Pos.Offset:end]
	}
	return v
}

// gluedEnd reports whether the token just read ends its value item: the
// next token is spaced from it or ends the line.
func (p *parser) gluedEnd() bool { return p.gluedAfter(0) }

func (p *parser) gluedAfter(n int) bool {
	t := p.peek(n)
	return t.Spaced || t.Kind == NEWLINE || t.Kind == EOF || t.Kind == DEDENT || t.Kind == INDENT
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}
