package config

import (
	"net/netip"
	"strconv"
)

// rule is a check across fields. Its doc is listed in the documentation.
type rule struct {
	doc   string
	check func(c *Config) []problem
}

var rules = []rule{
	{"Mqtt.CertFile and Mqtt.KeyFile are set together.", checkCertPair},
	{"Mqtt.ClientCaFile needs Mqtt.CertFile.", checkClientCa},
	{"Mqtt.ServerKeepAliveSeconds is at most Mqtt.MaxKeepAliveSeconds when both are set.", checkKeepAlive},
	{"No two listeners that are on share a port on overlapping addresses: Mqtt.Port, Mqtt.TlsPort (when Mqtt.CertFile is set), Mqtt.WebSocketPort, Ops.Port, and Cluster.Port when clustering is on.", checkPortClash},
	{"Cluster.ElectionTimeoutUpperMs is greater than Cluster.ElectionTimeoutLowerMs.", checkElectionBounds},
	{"Cluster.ElectionRpcTimeoutMs, unless 0, is less than Cluster.ElectionTimeoutLowerMs.", checkElectionRpc},
	{"With Cluster.Enabled: Cluster.ClusterId and Cluster.NodeName are not empty.", checkClusterIdentity},
	{"With Cluster.Enabled and seeds discovery: Cluster.Seeds lists at least one address.", checkSeeds},
	{"With Cluster.Enabled and kubernetes discovery: Cluster.KubernetesServiceDns is set.", checkKubernetes},
}

func checkCertPair(c *Config) []problem {
	switch m := &c.Mqtt; {
	case m.CertFile != "" && m.KeyFile == "":
		return []problem{{"Mqtt.KeyFile", `""`, "the key of Mqtt.CertFile"}}
	case m.CertFile == "" && m.KeyFile != "":
		return []problem{{"Mqtt.CertFile", `""`, "the certificate of Mqtt.KeyFile"}}
	}
	return nil
}

func checkClientCa(c *Config) []problem {
	if c.Mqtt.ClientCaFile != "" && c.Mqtt.CertFile == "" {
		return []problem{{"Mqtt.ClientCaFile", strconv.Quote(c.Mqtt.ClientCaFile),
			"Mqtt.CertFile and Mqtt.KeyFile set too (client certificates need the TLS listener)"}}
	}
	return nil
}

func checkKeepAlive(c *Config) []problem {
	m := &c.Mqtt
	if m.MaxKeepAliveSeconds != 0 && m.ServerKeepAliveSeconds > m.MaxKeepAliveSeconds {
		return []problem{{"Mqtt.ServerKeepAliveSeconds", strconv.Itoa(m.ServerKeepAliveSeconds),
			"at most Mqtt.MaxKeepAliveSeconds (" + strconv.Itoa(m.MaxKeepAliveSeconds) + ")"}}
	}
	return nil
}

// listener is a TCP port the node opens.
type listener struct {
	path string
	ip   string
	port int
}

func (c *Config) listeners() []listener {
	orMqtt := func(ip string) string {
		if ip == "" {
			return c.Mqtt.BindIP
		}
		return ip
	}
	ls := []listener{
		{"Mqtt.Port", c.Mqtt.BindIP, c.Mqtt.Port},
		{"Mqtt.TlsPort", c.Mqtt.BindIP, c.Mqtt.TlsPort},
		{"Mqtt.WebSocketPort", c.Mqtt.BindIP, c.Mqtt.WebSocketPort},
		{"Ops.Port", orMqtt(c.Ops.BindIP), c.Ops.Port},
		{"Cluster.Port", orMqtt(c.Cluster.BindIP), c.Cluster.Port},
	}
	if c.Mqtt.CertFile == "" {
		ls[1].port = 0
	}
	if !c.Cluster.Enabled {
		ls[4].port = 0
	}
	return ls
}

func checkPortClash(c *Config) []problem {
	ls := c.listeners()
	var ps []problem
	for i, a := range ls {
		for _, b := range ls[:i] {
			if a.port != 0 && a.port == b.port && overlap(a.ip, b.ip) {
				ps = append(ps, problem{a.path, strconv.Itoa(a.port), "a port not taken by " + b.path})
				break
			}
		}
	}
	return ps
}

// overlap reports whether listening on a and on b, with the same port,
// collides: the same address, or an unspecified one of the other's family
// (:: takes both families).
func overlap(a, b string) bool {
	x, err1 := netip.ParseAddr(a)
	y, err2 := netip.ParseAddr(b)
	if err1 != nil || err2 != nil {
		return false // reported by the field check
	}
	x, y = x.Unmap(), y.Unmap()
	switch {
	case x == y:
		return true
	case x.IsUnspecified():
		return x.Is6() || y.Is4()
	case y.IsUnspecified():
		return y.Is6() || x.Is4()
	}
	return false
}

func checkElectionBounds(c *Config) []problem {
	cl := &c.Cluster
	if cl.ElectionTimeoutUpperMs <= cl.ElectionTimeoutLowerMs {
		return []problem{{"Cluster.ElectionTimeoutUpperMs", strconv.Itoa(cl.ElectionTimeoutUpperMs),
			"more than Cluster.ElectionTimeoutLowerMs (" + strconv.Itoa(cl.ElectionTimeoutLowerMs) + ")"}}
	}
	return nil
}

func checkElectionRpc(c *Config) []problem {
	cl := &c.Cluster
	if cl.ElectionRpcTimeoutMs != 0 && cl.ElectionRpcTimeoutMs >= cl.ElectionTimeoutLowerMs {
		return []problem{{"Cluster.ElectionRpcTimeoutMs", strconv.Itoa(cl.ElectionRpcTimeoutMs),
			"0 or less than Cluster.ElectionTimeoutLowerMs (" + strconv.Itoa(cl.ElectionTimeoutLowerMs) + ")"}}
	}
	return nil
}

func checkClusterIdentity(c *Config) []problem {
	var ps []problem
	if c.Cluster.Enabled && c.Cluster.ClusterId == "" {
		ps = append(ps, problem{"Cluster.ClusterId", `""`, "a name when Cluster.Enabled is true"})
	}
	if c.Cluster.Enabled && c.Cluster.NodeName == "" {
		ps = append(ps, problem{"Cluster.NodeName", `""`, "a name when Cluster.Enabled is true (the host name is unknown)"})
	}
	return ps
}

func checkSeeds(c *Config) []problem {
	cl := &c.Cluster
	if cl.Enabled && cl.Discovery == DiscoverySeeds && len(cl.Seeds) == 0 {
		return []problem{{"Cluster.Seeds", "[]", "at least one host:port with seeds discovery"}}
	}
	return nil
}

func checkKubernetes(c *Config) []problem {
	cl := &c.Cluster
	if cl.Enabled && cl.Discovery == DiscoveryKubernetes && cl.KubernetesServiceDns == "" {
		return []problem{{"Cluster.KubernetesServiceDns", `""`, "the headless Service's DNS name with kubernetes discovery"}}
	}
	return nil
}

// warning is a setting that works but that an operator should know about.
type warning struct {
	when func(c *Config) bool
	text string
}

var warnings = []warning{
	{func(c *Config) bool { return c.Cluster.Enabled && c.Cluster.SharedSecret == "" },
		"Cluster.SharedSecret is empty: traffic between nodes is not signed; set it in production"},
	{func(c *Config) bool { return c.Cluster.Enabled && c.Cluster.DataPlaneUsername == "" },
		"Cluster.DataPlaneUsername is empty: nodes do not exchange messages or LoT changes"},
	{func(c *Config) bool { return c.Cluster.Enabled && !c.Durability.Enabled },
		"Durability.Enabled is false with clustering on: queued messages and retained messages of this node do not survive its restart"},
	{func(c *Config) bool { return c.Cluster.Enabled && c.Cluster.ReplicationFactor == 1 },
		"Cluster.ReplicationFactor is 1: an acknowledged message does not survive the loss of its node"},
	{func(c *Config) bool { return c.Mqtt.AllowAnonymous && !c.Mqtt.AnonymousLoopbackOnly },
		"Mqtt.AllowAnonymous is true: clients from any address may connect without a user name"},
	{func(c *Config) bool { return c.Mqtt.AnonymousLoopbackOnly && !c.Mqtt.AllowAnonymous },
		"Mqtt.AnonymousLoopbackOnly has no effect while Mqtt.AllowAnonymous is false"},
}

// Warnings lists the settings of a valid configuration that an operator
// should hear about at start (a cluster without a shared secret, anonymous
// access from anywhere), one line each, starting with "config: ".
func (c *Config) Warnings() []string {
	var lines []string
	for _, w := range warnings {
		if w.when(c) {
			lines = append(lines, "config: "+w.text)
		}
	}
	return lines
}
