package syntax

// Inspect walks the tree under n depth-first in source order: it calls
// f(n), and if f returns true, inspects each child of n. Nil children are
// skipped. Definitions, statements, expressions, triggers, fields, inputs,
// outputs, cases, assignments and connector blocks are all visited.
func Inspect(n Node, f func(Node) bool) {
	if isNil(n) || !f(n) {
		return
	}
	for _, c := range children(n) {
		Inspect(c, f)
	}
}

// isNil reports whether n is nil or a typed nil pointer.
func isNil(n Node) bool {
	if n == nil {
		return true
	}
	switch v := n.(type) {
	case Expr:
		return isNilExpr(v)
	case *Trigger:
		return v == nil
	case *StringLit:
		return v == nil
	}
	return false
}

func isNilExpr(e Expr) bool {
	switch v := e.(type) {
	case *StringLit:
		return v == nil
	case *Ident:
		return v == nil
	}
	return e == nil
}

// children lists the direct children of n.
func children(n Node) []Node {
	var out []Node
	add := func(ns ...Node) {
		for _, c := range ns {
			if !isNil(c) {
				out = append(out, c)
			}
		}
	}
	switch v := n.(type) {
	case *Action:
		add(triggerNode(v.Trigger))
		for _, in := range v.Inputs {
			add(in)
		}
		addStmts(add, v.Body)
		for _, o := range v.Outputs {
			add(o)
		}
		add(strNode(v.Description))
	case *Trigger:
		add(v.Topic)
	case *Model:
		add(strNode(v.Topic))
		for _, fl := range v.Fields {
			add(fl)
		}
		for _, s := range v.Unsupported {
			add(s)
		}
	case *Field:
		add(strNode(v.Topic), v.Value)
		for _, it := range v.Items {
			add(it)
		}
	case *Rule:
		add(strNode(v.Topic), v.Cond)
	case *Connector:
		for _, b := range v.Blocks {
			add(b)
		}
	case *ConfigBlock:
		for _, b := range v.Blocks {
			add(b)
		}
	default:
		stmtChildren(n, add)
	}
	return out
}

func triggerNode(t *Trigger) Node {
	if t == nil {
		return nil
	}
	return t
}

func strNode(s *StringLit) Node {
	if s == nil {
		return nil
	}
	return s
}

func addStmts(add func(...Node), stmts []Stmt) {
	for _, s := range stmts {
		add(s)
	}
}

// stmtChildren lists the children of statements and expressions.
func stmtChildren(n Node, add func(...Node)) {
	switch v := n.(type) {
	case *SetStmt:
		add(v.Value)
	case *PublishStmt:
		add(v.Topic, v.Value)
	case *PublishModelStmt:
		add(v.Topic)
		for _, a := range v.Fields {
			add(a)
		}
	case *Assign:
		add(v.Value)
	case *IfStmt:
		add(v.Cond)
		addStmts(add, v.Then)
		addStmts(add, v.Else)
	case *SwitchStmt:
		add(v.Subject)
		for _, c := range v.Cases {
			add(c)
		}
		addStmts(add, v.Default)
	case *Case:
		for _, x := range v.Values {
			add(x)
		}
		addStmts(add, v.Body)
	case *LoopStmt:
		addStmts(add, v.Body)
		add(v.Until)
	case *CallActionStmt:
		for _, a := range v.Args {
			add(a)
		}
		for _, r := range v.Returns {
			add(r)
		}
	case *TriggerEventStmt:
		add(v.Event, v.Value)
	case *EnvStmt:
		add(v.Name, v.Value)
	default:
		exprChildren(n, add)
	}
}

// exprChildren adds the children of expressions.
func exprChildren(n Node, add func(...Node)) {
	switch v := n.(type) {
	case *TopicPositionExpr:
		add(v.Index)
	case *GetTopicExpr:
		add(v.Topic)
	case *GetJSONExpr:
		add(v.Path, v.Source)
	case *GetEnvExpr:
		add(v.Name)
	case *TimestampExpr:
		add(v.Format)
	case *RandomExpr:
		add(v.Min, v.Max)
	case *ReplaceExpr:
		add(v.Source, v.Find, v.With)
	case *FilterExpr:
		add(v.Source, v.Regex)
	case *TrimExpr:
		add(v.Source)
	case *CastExpr:
		add(v.X)
	case *UnaryExpr:
		add(v.X)
	case *BinaryExpr:
		add(v.X, v.Y)
	case *CondExpr:
		add(v.Cond, v.Then, v.Else)
	case *ObjectLit:
		for _, f := range v.Fields {
			add(f.Value)
		}
	case *ArrayLit:
		for _, e := range v.Elems {
			add(e)
		}
	case *RuleTest:
		add(v.Topic, v.Arg)
	}
}
