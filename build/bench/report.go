package main

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"gantry/build/bench/load"
)

// report is the rendered result of a run of the harness.
type report struct {
	text   string // Markdown: one section per mode, printed and written
	failed bool   // some run failed
	sums   map[key]*summary
}

// report renders the tables of every mode.
func (h *harness) report() report {
	rep := report{sums: summarize(h.outcomes)}
	for _, o := range h.outcomes {
		if o.err != nil && o.broker != sinkKind {
			rep.failed = true
		}
	}
	var b strings.Builder
	for _, n := range h.notes {
		fmt.Fprintf(&b, "> %s\n\n", n)
	}
	for i, m := range h.modes {
		fmt.Fprintf(&b, "### %s\n\n", h.modeTitle(m))
		tr := tables{h: h, sums: rep.sums, mode: m.name}
		tr.write(&b, i == 0)
	}
	rep.text = b.String()
	return rep
}

func (h *harness) modeTitle(m mode) string {
	if m.name == pinnedMode {
		return fmt.Sprintf("Pinned: broker on CPU %s, load generator on CPU %s", m.brokerCPUs, h.opts.loadCPUs)
	}
	return fmt.Sprintf("Unpinned: broker and load generator share CPUs %s", m.brokerCPUs)
}

// tables renders the tables of one mode.
type tables struct {
	h    *harness
	sums map[key]*summary
	mode string
}

// section is one table of a mode: the variants it shows and how, and
// optionally a paragraph under it.
type section struct {
	title string
	rows  func(variant) bool
	table func([]variant) *table
	note  func([]variant) string
}

func (t tables) write(b *strings.Builder, primary bool) {
	rounds := fmt.Sprintf(" (median of %d round(s))", t.h.opts.rounds)
	sections := []section{
		{"Throughput, closed loop" + rounds, closedLoop, t.throughput, nil},
		{"Latency at a fixed offered rate" + rounds, isLatency, t.latency, nil},
		{"Overload: open-loop fan-in, slow subscriber" + rounds, isOverload, t.overload, nil},
		{"Idle connections" + rounds, isIdle, t.connections, nil},
		{"Durability: QoS 1 publishes queued for an offline persistent session" + rounds, isDurable, t.durable, t.aimNote},
	}
	if primary && t.h.opts.sink {
		sections = append(sections, section{"Generator check: publish rate into the sink vs. the brokers", closedLoop, t.generator, nil})
	}
	for _, s := range sections {
		var vs []variant
		for _, v := range t.h.variants() {
			if s.rows(v) {
				vs = append(vs, v)
			}
		}
		if len(vs) > 0 {
			fmt.Fprintf(b, "#### %s\n\n%s\n", s.title, s.table(vs).markdown())
		}
		if len(vs) > 0 && s.note != nil {
			fmt.Fprintf(b, "%s\n\n", s.note(vs))
		}
	}
}

func isLatency(v variant) bool  { return v.sc.Rate > 0 && v.sc.SubscriberRate == 0 }
func isOverload(v variant) bool { return v.sc.SubscriberRate > 0 }
func isIdle(v variant) bool     { return v.sc.Topology == load.Idle }

// get returns the summary of v on broker, or nil.
func (t tables) get(v variant, broker string) *summary {
	return t.sums[key{t.mode, v.label(), broker}]
}

// quotient returns f of broker a's summary of v over f of broker b's;
// ok is false unless both completed every round.
func (t tables) quotient(v variant, a, b string, f func(*summary) float64) (q float64, ok bool) {
	x, y := t.get(v, a), t.get(v, b)
	if x == nil || y == nil || x.runs == 0 || y.runs == 0 || x.fail != nil || y.fail != nil {
		return 0, false
	}
	q = f(x) / f(y)
	return q, f(y) != 0 && !math.IsNaN(q)
}

// ratio formats a/b of the Gantry and Mosquitto summaries of v.
func (t tables) ratio(v variant, f func(*summary) float64) string {
	return times(t.quotient(v, gantryKind, mosquittoKind, f))
}

// times formats a ratio, or a dash when there is none.
func times(q float64, ok bool) string {
	if !ok {
		return "—"
	}
	return fmt.Sprintf("%.2f×", q)
}

// brokerLabel names a broker kind in the tables.
func brokerLabel(b string) string {
	switch b {
	case gantryDurableKind:
		return "gantry, durable"
	case gantryMemoryKind:
		return "gantry, in memory"
	case mosquittoPersistKind:
		return "mosquitto, autosave 30 min"
	}
	return b
}

// each adds one row per broker of v: the variant's cells, then the
// broker's figures (or FAIL when a round failed), then on Gantry's row
// (with durability, in the durable table) the ratio when ratio is not nil.
func (t tables) each(tb *table, vs []variant, lead func(variant) []string, figures func(*summary) []string, ratio func(variant) string) {
	for _, v := range vs {
		for _, b := range t.h.brokersFor(v) {
			s := t.get(v, b)
			if s == nil {
				continue
			}
			row := append(lead(v), brokerLabel(b))
			if s.fail != nil {
				row = append(row, failCell(s.fail))
			} else {
				row = append(row, figures(s)...)
			}
			if ratio != nil {
				cell := ""
				if b == gantryKind || b == gantryDurableKind {
					cell = ratio(v)
				}
				row = append(tb.pad(row, len(tb.header)-1), cell)
			}
			tb.add(row)
		}
	}
}

func (t tables) throughput(vs []variant) *table {
	tb := newTable("Scenario", "QoS", "Payload", "Broker", "Delivered msg/s", "Published msg/s",
		"p50 ms", "p99 ms", "p99.9 ms", "Broker CPU s", "Deliveries per CPU s", "Lost", "Gantry/Mosquitto msg/s")
	t.each(tb, vs, variantCells, func(s *summary) []string {
		return []string{count(s.out), count(s.in), msec(s.p(0.5)), msec(s.p(0.99)), msec(s.p(0.999)),
			secs(s.cpu), count(s.perCPU), count(s.lost)}
	}, func(v variant) string { return t.ratio(v, func(s *summary) float64 { return s.out }) })
	return tb
}

func (t tables) latency(vs []variant) *table {
	tb := newTable("Scenario", "QoS", "Payload", "Broker", "Offered msg/s", "Delivered msg/s",
		"p50 ms", "p99 ms", "p99.9 ms", "Max ms", "Broker CPU s", "Generator late p99 ms", "Generator read lag p99 ms", "Gantry/Mosquitto p99")
	t.each(tb, vs, variantCells, func(s *summary) []string {
		return []string{count(s.offered), count(s.out), msec(s.p(0.5)), msec(s.p(0.99)), msec(s.p(0.999)),
			msec(s.lat.Max()), secs(s.cpu), msec(s.late.Quantile(0.99)), msec(s.lag.Quantile(0.99))}
	}, func(v variant) string {
		return t.ratio(v, func(s *summary) float64 { return float64(s.p(0.99)) })
	})
	return tb
}

func (t tables) overload(vs []variant) *table {
	tb := newTable("Scenario", "QoS", "Payload", "Broker", "Offered msg/s", "Subscriber takes msg/s",
		"Sent", "Delivered", "Lost", "Lost %", "Broker CPU s", "Broker RSS MB")
	t.each(tb, vs, variantCells, func(s *summary) []string {
		return []string{count(s.offered), count(s.subscriberCap), count(s.sent), count(s.received),
			count(s.lost), fmt.Sprintf("%.1f", s.lossPercent()), secs(s.cpu), fmt.Sprintf("%.1f", s.rssAfter/(1<<20))}
	}, nil)
	return tb
}

func (t tables) connections(vs []variant) *table {
	tb := newTable("Scenario", "Broker", "Connections", "Connect rate conn/s", "Connect CPU s",
		"RSS idle MB", "RSS connected MB", "KB per connection", "Hold CPU s", "Gantry/Mosquitto KB/conn")
	lead := func(v variant) []string { return []string{v.sc.Name} }
	t.each(tb, vs, lead, func(s *summary) []string {
		return []string{count(float64(t.h.conns)), count(s.connRate), secs(s.connectCPU),
			fmt.Sprintf("%.1f", s.rssBefore/(1<<20)), fmt.Sprintf("%.1f", s.rssAfter/(1<<20)),
			fmt.Sprintf("%.1f", s.perConn/1024), secs(s.holdCPU)}
	}, func(v variant) string { return t.ratio(v, func(s *summary) float64 { return s.perConn }) })
	return tb
}

// durable is the table of the durable scenario: publishes acknowledged
// per second and their latency, Gantry with durability on and off (and
// Mosquitto with persistence), and what the offline subscriber received.
func (t tables) durable(vs []variant) *table {
	tb := newTable("Payload", "Variant", "Acked msg/s", "p50 ms", "p99 ms", "p99.9 ms", "Broker CPU s",
		"Acked per CPU s", "Broker RSS MB", "Acked in all", "Received on reconnect", "Durable/in-memory msg/s")
	lead := func(v variant) []string { return []string{sizeLabel(v.payload)} }
	t.each(tb, vs, lead, func(s *summary) []string {
		return []string{count(s.out), msec(s.p(0.5)), msec(s.p(0.99)), msec(s.p(0.999)), secs(s.cpu),
			count(s.perCPU), fmt.Sprintf("%.1f", s.rssAfter/(1<<20)), count(s.acked), count(s.received)}
	}, func(v variant) string { return times(t.durableRatio(v)) })
	return tb
}

// durableAim is the least durable/in-memory throughput ratio aimed at
// (issue "Durability", on 2 cores).
const durableAim = 0.30

// durableRatio is Gantry's durable over in-memory acked msg/s for v.
func (t tables) durableRatio(v variant) (float64, bool) {
	return t.quotient(v, gantryDurableKind, gantryMemoryKind, func(s *summary) float64 { return s.out })
}

// aimNote states the durable/in-memory ratios against the aim.
func (t tables) aimNote(vs []variant) string {
	var parts []string
	for _, v := range vs {
		q, ok := t.durableRatio(v)
		verdict := "no figure"
		switch {
		case ok && q >= durableAim:
			verdict = "met"
		case ok:
			verdict = "NOT met"
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", sizeLabel(v.payload), times(q, ok), verdict))
	}
	return fmt.Sprintf("Aim: durable throughput at least %.0f%% of in-memory throughput. Durable/in-memory acked msg/s: %s.",
		100*durableAim, strings.Join(parts, "; "))
}

// generator checks that the load generator did not limit the brokers:
// its publish rate into the sink must clearly exceed the brokers', and no
// broker run may have had the generator's CPUs saturated while the
// broker's were not.
func (t tables) generator(vs []variant) *table {
	tb := newTable("Scenario", "QoS", "Payload", "Sink published msg/s", "Best broker published msg/s",
		"Headroom", "CPU use: generator / broker", "Verdict")
	for _, v := range vs {
		sink := t.get(v, sinkKind)
		switch {
		case sink == nil:
			continue
		case sink.fail != nil:
			tb.add(append(variantCells(v), failCell(sink.fail)))
			continue
		}
		best, use, verdict := t.generatorLoad(v)
		head := "—"
		if best > 0 {
			head = fmt.Sprintf("%.1f×", sink.in/best)
			if sink.in < 1.5*best {
				verdict = "WARNING: publishing near the generator's limit"
			}
		}
		tb.add(append(variantCells(v), count(sink.in), count(best), head, use, verdict))
	}
	return tb
}

// generatorLoad returns the best broker publish rate of v in the primary
// mode, the CPU use of generator and broker in each broker's runs, and a
// warning when the generator's CPUs were saturated and the broker's not.
func (t tables) generatorLoad(v variant) (best float64, use, verdict string) {
	m := t.h.modes[0]
	genCores, brokerCores := float64(len(m.loadCPUs)), 1.0
	if cpus, err := parseCPUList(m.brokerCPUs); err == nil {
		brokerCores = float64(len(cpus))
	}
	verdict = "generator not the bottleneck"
	var parts []string
	for _, b := range t.h.opts.brokers {
		s := t.get(v, b)
		if s == nil || s.runs == 0 {
			continue
		}
		best = max(best, s.in)
		gen, brk := s.genCPUs/genCores, s.cpu/s.elapsed/brokerCores
		parts = append(parts, fmt.Sprintf("%s %.0f%% / %.0f%%", b, 100*gen, 100*brk))
		if gen > 0.9 && brk < 0.9 {
			verdict = "WARNING: generator CPU saturated before " + b + "'s"
		}
	}
	return best, strings.Join(parts, ", "), verdict
}

// failCell is a failure as one table cell: one line, no pipes, short.
func failCell(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	s = strings.ReplaceAll(s, "|", "/")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:160]) + "…"
	}
	return "FAIL: " + s
}

func variantCells(v variant) []string {
	return []string{v.sc.Name, fmt.Sprint(v.qos), sizeLabel(v.payload)}
}

// count formats a count or rate with thousands separators.
func count(v float64) string {
	n := int64(math.Round(v))
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func msec(d time.Duration) string {
	v := float64(d) / 1e6
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func secs(v float64) string { return fmt.Sprintf("%.2f", v) }

// table is a Markdown table whose columns are padded to line up in a
// terminal as well.
type table struct {
	header []string
	rows   [][]string
}

func newTable(header ...string) *table { return &table{header: header} }

// pad returns row extended with empty cells to n cells.
func (t *table) pad(row []string, n int) []string {
	for len(row) < n {
		row = append(row, "")
	}
	return row
}

// add appends a row, padded to the header's width.
func (t *table) add(row []string) { t.rows = append(t.rows, t.pad(row, len(t.header))) }

// markdown renders the table; the first three columns are left-aligned
// labels, the others right-aligned figures.
func (t *table) markdown() string {
	width := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c), 3)
		}
	}
	var b strings.Builder
	t.line(&b, t.header, width)
	sep := make([]string, len(width))
	for i, w := range width {
		sep[i] = strings.Repeat("-", w-1) + ":"
		if t.isLabel(i) {
			sep[i] = strings.Repeat("-", w)
		}
	}
	t.line(&b, sep, width)
	for _, r := range t.rows {
		t.line(&b, r, width)
	}
	return b.String()
}

// isLabel reports whether column i holds labels (left-aligned).
func (t *table) isLabel(i int) bool {
	switch t.header[i] {
	case "Scenario", "QoS", "Payload", "Broker", "Variant", "Verdict":
		return true
	}
	return false
}

func (t *table) line(b *strings.Builder, cells []string, width []int) {
	b.WriteString("|")
	for i, c := range cells {
		gap := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
		if t.isLabel(i) || strings.HasPrefix(c, "FAIL") {
			b.WriteString(" " + c + gap + " |")
		} else {
			b.WriteString(" " + gap + c + " |")
		}
	}
	b.WriteString("\n")
}
