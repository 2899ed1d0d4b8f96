package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// ownerEntry is one partition's owner and epoch as a node serves it.
type ownerEntry struct {
	partition int
	owner     string
	epoch     uint64
	hasEpoch  bool
}

// ownersIn reads the partitions of a GET /cluster body tolerantly: the
// map as {"version":…,"partitions":[…]} or a bare list, each entry with
// "owner" and "epoch" in any letter case ("partition" or "id", else its
// position); fields the node does not serve yet are simply absent.
func ownersIn(raw map[string]any) []ownerEntry {
	var list []any
	switch p := field(raw, "partitions").(type) {
	case []any:
		list = p
	case map[string]any:
		list, _ = field(p, "partitions").([]any)
	}
	var out []ownerEntry
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		e := ownerEntry{partition: i}
		if id, ok := number(field(m, "partition")); ok {
			e.partition = int(id)
		} else if id, ok := number(field(m, "id")); ok {
			e.partition = int(id)
		}
		e.owner, _ = field(m, "owner").(string)
		if ep, ok := number(field(m, "epoch")); ok {
			e.epoch, e.hasEpoch = uint64(ep), true
		}
		out = append(out, e)
	}
	return out
}

func field(m map[string]any, name string) any {
	if v, ok := m[name]; ok {
		return v
	}
	for k, v := range m {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return nil
}

func number(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}

// ownerLog records, for every (partition, epoch) any node served, the
// owners named and by which node: two owners in one epoch is a split
// brain of the data plane.
type ownerLog struct {
	mu      sync.Mutex                      // guards the fields below
	owners  map[[2]uint64]map[string]string // (partition, epoch) → owner → first node that named it
	samples int
	noEpoch bool // some node served partitions without an epoch
}

func newOwnerLog() *ownerLog { return &ownerLog{owners: map[[2]uint64]map[string]string{}} }

func (l *ownerLog) record(from string, entries []ownerEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples++
	for _, e := range entries {
		if !e.hasEpoch {
			l.noEpoch = true
			continue
		}
		if e.owner == "" {
			continue
		}
		k := [2]uint64{uint64(e.partition), e.epoch}
		if l.owners[k] == nil {
			l.owners[k] = map[string]string{}
		}
		if _, ok := l.owners[k][e.owner]; !ok {
			l.owners[k][e.owner] = from
		}
	}
}

// violations lists every (partition, epoch) with more than one owner.
func (l *ownerLog) violations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k, owners := range l.owners {
		if len(owners) < 2 {
			continue
		}
		var names []string
		for o, from := range owners {
			names = append(names, o+" (served by "+from+")")
		}
		slices.Sort(names)
		out = append(out, fmt.Sprintf("partition %d epoch %d has owners %s", k[0], k[1], strings.Join(names, ", ")))
	}
	sort.Strings(out)
	return out
}

func (l *ownerLog) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := fmt.Sprintf("%d views of GET /cluster, %d (partition, epoch) pairs", l.samples, len(l.owners))
	if l.noEpoch {
		s += "; some views had partitions without an epoch"
	}
	return s
}

// watch polls every running node's GET /cluster every interval until
// stop closes.
func (l *ownerLog) watch(c *cluster, interval time.Duration, stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, n := range c.nodes {
			if !n.running() {
				continue
			}
			if v, err := getView(n.ip); err == nil {
				l.record(n.name, ownersIn(v.raw))
			}
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// diagnose is one line per node of what GET /cluster says about the data
// plane, for a fault the cluster did not recover from: links and
// backlogs, and the replication fields as far as the node serves them.
func diagnose(c *cluster) []string {
	var out []string
	for _, n := range c.nodes {
		v, err := getView(n.ip)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", n.name, err))
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s (%s, leader %s):", n.name, field(v.raw, "role"), v.Leadership.Leader)
		dp, _ := field(v.raw, "dataPlane").(map[string]any)
		peers, _ := field(dp, "peers").([]any)
		for _, p := range peers {
			if pm, ok := p.(map[string]any); ok {
				fmt.Fprintf(&b, " link %v connected=%v backlog=%v dropped=%v;", field(pm, "name"), field(pm, "connected"),
					field(pm, "backlog"), field(pm, "forwardDropped"))
			}
		}
		if rep, ok := field(dp, "replication").(map[string]any); ok {
			filling, _ := field(rep, "filling").([]any)
			fmt.Fprintf(&b, " quorumWrites=%v inFlight=%v quorumFailures=%v staleCopiesRefused=%v filling=%d",
				field(rep, "quorumWrites"), field(rep, "inFlight"), field(rep, "quorumFailures"), field(rep, "staleCopiesRefused"), len(filling))
		}
		syncing := 0
		if pm, ok := field(v.raw, "partitions").(map[string]any); ok {
			list, _ := field(pm, "partitions").([]any)
			for _, e := range list {
				if em, ok := e.(map[string]any); ok {
					if s, ok := field(em, "syncing").([]any); ok && len(s) > 0 {
						syncing++
					}
				}
			}
		}
		fmt.Fprintf(&b, " partitions with a syncing copy=%d", syncing)
		out = append(out, b.String())
	}
	return out
}
