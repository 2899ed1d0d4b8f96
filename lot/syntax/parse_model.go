package syntax

// model parses DEFINE MODEL after the MODEL keyword.
func (p *parser) model(h DefHeader) *Model {
	h.Name, h.NamePos = p.defName("the model")
	m := &Model{DefHeader: h}
	p.modelHeader(m)
	for p.isKw("ADD") { // the flat form: fields on the header line
		m.Fields = append(m.Fields, p.field())
	}
	if p.openLine() {
		p.enter()
		defer p.leave()
		p.items(func() { p.modelLine(m) })
	}
	return m
}

var modelOptions = []string{"COLLAPSED", "FROM", "WITH", "KEEP", "RETAIN", "AND", "QOS0", "QOS1", "QOS2"}

// modelHeader parses the options on the DEFINE MODEL line.
func (p *parser) modelHeader(m *Model) {
	for !p.isKw("ADD") {
		t := p.tok()
		if t.Kind != WORD {
			if t.Kind != NEWLINE && t.Kind != EOF {
				p.failf(t.Pos, "", "unexpected %s in the header of model %s", t, m.Name)
			}
			return
		}
		p.next()
		switch t.Value {
		case "COLLAPSED":
			m.Collapsed = true
		case "FROM":
			m.From, m.FromPos = p.defName("the parent model")
		case "WITH":
			p.modelWith(m)
		case "KEEP":
			m.Keep = true
		case "RETAIN":
			m.Retain = true
		case "AND":
		case "QOS0", "QOS1", "QOS2":
			m.QoS = int(t.Value[3] - '0')
		default:
			p.failf(t.Pos, suggest(t, modelOptions...), "unexpected %s in the header of model %s", t, m.Name)
		}
	}
}

// modelWith parses what follows WITH in a model header: TOPIC "t",
// RETAIN, FORMAT f or QOS n.
func (p *parser) modelWith(m *Model) {
	t := p.tok()
	switch t.Value {
	case "TOPIC":
		p.next()
		s := p.expect(STRING, "after WITH TOPIC")
		m.Topic = &StringLit{Start: s.Pos, Value: s.Value, Quote: s.Quote}
	case "RETAIN":
		p.next()
		m.Retain = true
	case "FORMAT":
		p.next()
		f := p.tok()
		if f.Kind != WORD && f.Kind != STRING {
			p.failf(f.Pos, "", "expected JSON, PROTOBUF or BOTH after WITH FORMAT, found %s", f)
		}
		p.next()
		m.Format = f.Value
	default:
		p.failf(t.Pos, suggest(t, "TOPIC", "RETAIN", "FORMAT"), "expected TOPIC, RETAIN or FORMAT after WITH, found %s", t)
	}
}

// modelLine parses one line of a model body.
func (p *parser) modelLine(m *Model) {
	t := p.tok()
	switch {
	case kwAt(t, "ADD"):
		m.Fields = append(m.Fields, p.field())
	case kwAt(t, "STORE") || kwAt(t, "FETCH"):
		p.next()
		s := p.unsupportedStmt(t.Pos, "model "+t.Value).(*UnsupportedStmt)
		m.Unsupported = append(m.Unsupported, s)
	default:
		p.failf(t.Pos, suggest(t, "ADD"), "expected ADD <type> \"<field>\" in model %s, found %s", m.Name, t)
	}
}

// field parses an ADD line and, for ADD ARRAY, its indented items.
func (p *parser) field() *Field {
	f := &Field{Start: p.next().Pos}
	t := p.tok()
	if kwAt(t, "COLLECTION") {
		p.next()
		f.Collection = true
		f.Name, f.NamePos = p.bareName("the collection")
		p.expectKw("OF", "after ADD COLLECTION \""+f.Name+"\"")
		f.Of, f.OfPos = p.bareName("the item model")
		return f
	}
	if tn, ok := ParseTypeName(t.Value); ok && t.Kind == WORD {
		p.next()
		f.Type, f.TypePos = tn, t.Pos
	} else if t.Kind == WORD && p.peek(1).Kind == STRING {
		p.failf(t.Pos, suggest(t, "STRING", "INT", "DOUBLE", "BOOL", "TIMESTAMP", "OBJECT", "ARRAY"),
			"unknown field type %s", t)
	}
	f.Name, f.NamePos = p.fieldName()
	if p.acceptKw("WITH") {
		p.fieldSource(f)
	}
	if p.isKw("AS") && kwAt(p.peek(1), "TRIGGER") {
		f.TriggerPos = p.next().Pos
		p.next()
		f.IsTrigger = true
	}
	if f.Type == TypeArray && f.Value == nil && f.Topic == nil && p.at(NEWLINE) && p.peek(1).Kind == INDENT {
		p.next()
		p.next()
		p.enter()
		defer p.leave()
		p.items(func() {
			t := p.tok()
			if !kwAt(t, "ADD") {
				p.failf(t.Pos, "", "expected ADD in the items of array %q, found %s", f.Name, t)
			}
			f.Items = append(f.Items, p.field())
		})
	}
	return f
}

// fieldName reads the quoted name of a field (a bare word is accepted).
func (p *parser) fieldName() (string, Pos) {
	t := p.tok()
	switch t.Kind {
	case STRING:
		p.next()
		return t.Value, t.Pos
	case WORD:
		p.next()
		return t.Text, t.Pos
	}
	p.failf(t.Pos, `write ADD <TYPE> "name"`, "expected the field name, found %s", t)
	return "", Pos{}
}

// fieldSource parses what follows WITH in a field: TOPIC "t" or a value.
func (p *parser) fieldSource(f *Field) {
	t := p.tok()
	switch {
	case kwAt(t, "TOPIC") && !kwAt(p.peek(1), "POSITION"):
		p.next()
		s := p.expect(STRING, "after WITH TOPIC")
		f.Topic = &StringLit{Start: s.Pos, Value: s.Value, Quote: s.Quote}
	case kwAt(t, "VALUE") && p.peek(1).Kind != NEWLINE:
		p.failf(t.Pos, "write the value right after WITH", "WITH VALUE is not LoT")
	case t.Kind == NEWLINE || t.Kind == EOF:
		p.failf(t.Pos, "", "field %q needs a value after WITH", f.Name)
	default:
		f.Value = p.expr()
	}
}
