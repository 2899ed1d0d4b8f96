package rules

// Access is the decision on a subscription (see Set.Subscription).
type Access uint8

// Decisions on a subscription.
const (
	// Refused: every topic the filter can match is denied; the SUBSCRIBE
	// fails.
	Refused Access = iota
	// Granted: every topic the filter can match is allowed; its messages
	// need no check.
	Granted
	// Checked: some topics are allowed, some denied. The subscription is
	// granted and each message it matches is decided by Evaluate with the
	// message's topic (a topic is a filter that matches only itself).
	Checked
)

func (a Access) String() string {
	switch a {
	case Refused:
		return "refused"
	case Granted:
		return "granted"
	case Checked:
		return "checked"
	}
	return "unknown"
}

// Subscription decides a subscription as operators expect of a read ACL
// (Mosquitto, EMQX): a filter wholly inside denied topics is refused, one
// wholly inside allowed topics is granted, and one that overlaps both is
// granted with a check of every message (Checked). r.Topic is the filter,
// r.Scope Subscribe or SubscribeSys.
//
// It walks the priorities in ascending order as Evaluate does and keeps
// two questions open: "is every topic allowed?" ends false at the first
// priority where a rule may deny some topic, true where an unconditional
// (or certainly true) ALLOW covers the filter; "is every topic denied?"
// ends true where a certain DENY covers the filter, false where a rule may
// allow some topic. DENY wins a tie. A condition on CLIENTID IS TOPIC
// POSITION n whose level is a wildcard of the filter may go either way,
// so both of its effects count as possible. When nothing decides, the
// request is denied, as in Evaluate.
//
// TOPIC EXISTS and GET TOPIC conditions are read once, now: the broker
// decides again when the rules change. Subscription does not allocate.
func (s *Set) Subscription(r *Request) Access {
	if r.User != nil && r.User.Admin {
		return Granted
	}
	if !r.Scope.Valid() || !r.Scope.subscription() {
		return Refused
	}
	tp := stripShare(r.Topic)
	if s.openRule(r.Scope, tp) != nil {
		return Granted
	}
	const open, yes, no = 0, 1, 2
	granted, refused := open, open
	rules := s.byScope[r.Scope]
	for i := 0; i < len(rules) && (granted == open || refused == open); {
		p := rules[i].priority
		var mayAllow, mayDeny, allowAll, denyAll bool
		for ; i < len(rules) && rules[i].priority == p; i++ {
			a, d, aw, dw := rules[i].possible(r, tp)
			mayAllow, mayDeny = mayAllow || a, mayDeny || d
			allowAll, denyAll = allowAll || aw, denyAll || dw
		}
		if granted == open {
			switch {
			case mayDeny:
				granted = no
			case allowAll:
				granted = yes
			}
		}
		if refused == open {
			switch {
			case denyAll:
				refused = yes
			case mayAllow:
				refused = no
			}
		}
	}
	switch {
	case granted == yes:
		return Granted
	case refused == no:
		return Checked
	}
	return Refused
}

// possible reports what one rule may do to the topics of a subscription
// filter tp: allow some, deny some, certainly allow all, certainly deny
// all.
func (c *compiled) possible(r *Request, tp string) (mayAllow, mayDeny, allowAll, denyAll bool) {
	whole := true
	if c.filter != "" {
		if !c.firstLevelMayMatch(tp) || !intersects(c.filter, tp) {
			return
		}
		whole = covers(c.filter, tp)
	}
	var maybe [2]Effect // the effects the rule may yield
	certain := true
	switch {
	case c.cond == nil:
		maybe[0] = c.then
	default:
		v, known := c.cond.evalFilter(r, tp)
		switch {
		case !known:
			maybe[0], maybe[1], certain = c.then, c.els, false
		case v:
			maybe[0] = c.then
		default:
			maybe[0] = c.els
		}
	}
	for _, e := range maybe {
		switch e {
		case Allow:
			mayAllow = true
		case Deny:
			mayDeny = true
		}
	}
	if certain && whole {
		allowAll, denyAll = maybe[0] == Allow, maybe[0] == Deny
	}
	return
}

// evalFilter evaluates a condition for a subscription filter: known is
// false when the answer differs between topics of the filter (CLIENTID IS
// TOPIC POSITION n on a wildcard level), combined as three-valued logic.
func (c *ccond) evalFilter(r *Request, tp string) (v, known bool) {
	switch c.op {
	case OpClientIDIsTopicPosition:
		return positionIs(tp, c.pos, r.ClientID)
	case OpNot:
		v, known = c.args[0].evalFilter(r, tp)
		return !v, known
	case OpAnd:
		known = true
		for i := range c.args {
			av, ak := c.args[i].evalFilter(r, tp)
			if ak && !av {
				return false, true
			}
			known = known && ak
		}
		return known, known
	case OpOr:
		known = true
		for i := range c.args {
			av, ak := c.args[i].evalFilter(r, tp)
			if ak && av {
				return true, true
			}
			known = known && ak
		}
		return false, known
	}
	return c.eval(r, tp), true
}

// positionIs answers CLIENTID IS TOPIC POSITION n for the topics of a
// filter: unknown when level n is a wildcard or lies under a '#'.
func positionIs(filter string, n int, clientID string) (v, known bool) {
	i := 0
	for k := 1; ; k++ {
		lvl, next, last := nextLevel(filter, i)
		if lvl == "#" {
			return false, false
		}
		if k == n {
			if lvl == "+" {
				return false, false
			}
			return lvl == clientID, true
		}
		if last {
			return false, true
		}
		i = next
	}
}
