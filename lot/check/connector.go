package check

import (
	"fmt"
	"slices"
	"strings"

	"gantry/lot/syntax"
)

// connectorConfigs maps each supported connector type to the
// configuration blocks it takes besides CONNECTOR_CONFIG, MAPPING and
// EVENT.
var connectorConfigs = map[string][]string{
	"MQTT_BRIDGE":   {"SOURCE_CONFIG", "DESTINATION_CONFIG"},
	"MODBUS_TCP":    {"MODBUS_CONFIG"},
	"MODBUS_SERIAL": {"MODBUS_CONFIG"},
	"SIEMENS_S7":    {"S7_CONFIG"},
	"OPCUA":         {"OPCUA_CONFIG"},
	"MODBUS_SERVER": {"MODBUS_SERVER_CONFIG"},
	"OPCUA_SERVER":  {"OPCUA_SERVER_CONFIG"},
}

// SupportedTypes lists the connector types Gantry runs.
var SupportedTypes = []string{"MQTT_BRIDGE", "MODBUS_TCP", "MODBUS_SERIAL", "SIEMENS_S7", "OPCUA", "MODBUS_SERVER", "OPCUA_SERVER"}

var databaseTypes = []string{"POSTGRESQL", "MYSQL", "MARIADB", "SQLSERVER", "MONGODB", "OPENSEARCH",
	"CRATEDB", "INFLUXDB", "SNOWFLAKE", "FILE_STORAGE"}

var aiTypes = []string{"LLM", "AGENT", "MCP", "MCP_SERVER"}

// connectorSettings are the keys of CONNECTOR_CONFIG (alias ROUTE_CONFIG).
var connectorSettings = []string{"CLUSTER_NODE", "OVERLOAD_POLICY", "OVERLOAD_TIMEOUT", "OVERLOAD_CAPACITY"}

func (c *checker) connector(k *syntax.Connector) {
	configs, ok := connectorConfigs[k.Type]
	if !ok {
		c.errorf(k.TypePos, typeHint(k.Type), "connector type %s is not supported by Gantry", k.TypeWritten)
		return
	}
	for _, p := range k.Pairs {
		c.errorf(p.Start, "put settings in an ADD <block>, such as ADD "+configs[0], "setting %s outside a block", p.Key)
	}
	c.uniqueBlocks(k.Blocks)
	for _, b := range k.Blocks {
		c.topBlock(k, b, configs)
	}
	for _, need := range configs {
		if k.Block(need) == nil {
			c.errorf(k.TypePos, fmt.Sprintf("add an indented ADD %s block with its settings", need),
				"connector type %s needs ADD %s", k.Type, need)
		}
	}
}

func typeHint(t string) string {
	switch {
	case contains(databaseTypes, t):
		return "database and file connectors are not supported"
	case contains(aiTypes, t):
		return "AI connectors are not supported"
	case t == "MQTT_CLUSTER":
		return "Gantry nodes form a cluster themselves: configure the Cluster section instead"
	}
	if h := suggestName(t, SupportedTypes); h != "" {
		return h
	}
	return "supported types: " + strings.Join(SupportedTypes, ", ") + " (S7 is SIEMENS_S7)"
}

// topBlock checks a block directly under the connector.
func (c *checker) topBlock(k *syntax.Connector, b *syntax.ConfigBlock, configs []string) {
	switch {
	case b.Kind == "CONNECTOR_CONFIG":
		c.connectorConfig(b)
	case b.Kind == "MAPPING" || b.Kind == "EVENT":
		c.mapping(b)
	case contains(configs, b.Kind):
		c.settings(b)
	case b.Kind == "STORE":
		c.errorf(b.Start, "database and file connectors are not supported", "STORE is not supported by Gantry")
	case b.Kind == "TAG":
		c.errorf(b.KindPos, "indent ADD TAG under an ADD MAPPING", "ADD TAG outside a mapping")
	default:
		allowed := append([]string{"CONNECTOR_CONFIG", "MAPPING", "EVENT"}, configs...)
		hint := suggestName(b.Written, allowed)
		if hint == "" {
			hint = fmt.Sprintf("a %s connector takes ADD %s", k.Type, strings.Join(allowed, ", ADD "))
		}
		c.errorf(b.KindPos, hint, "connector type %s has no block %s", k.Type, b.Written)
	}
}

// connectorConfig checks CONNECTOR_CONFIG strictly: it is Gantry's own.
func (c *checker) connectorConfig(b *syntax.ConfigBlock) {
	c.settings(b)
	for _, p := range b.Pairs {
		v := p.Value()
		switch p.Key {
		case "CLUSTER_NODE":
			if v.Kind != syntax.ValueString || v.Text == "" {
				c.errorf(v.Pos, `write the node's NodeName in quotes: WITH CLUSTER_NODE "gateway-2"`, "CLUSTER_NODE must be a node name")
			}
		case "OVERLOAD_POLICY":
			if !contains([]string{"lossless", "balanced", "realtime"}, strings.ToLower(v.Text)) {
				c.errorf(v.Pos, "use lossless, balanced or realtime", "unknown OVERLOAD_POLICY %s", v.Text)
			}
		case "OVERLOAD_TIMEOUT", "OVERLOAD_CAPACITY":
			if n, ok := numberValue(v); !ok || n < 0 {
				c.errorf(v.Pos, "", "%s must be a number of 0 or more", p.Key)
			}
		default:
			c.errorf(p.KeyPos, suggestName(p.Key, connectorSettings), "unknown setting %s in %s", p.Key, b.Written)
		}
	}
	if pol, capacity := b.Pair("OVERLOAD_POLICY"), b.Pair("OVERLOAD_CAPACITY"); pol != nil && capacity != nil &&
		strings.EqualFold(pol.Value().Text, "lossless") {
		c.errorf(capacity.Start, "remove OVERLOAD_CAPACITY or choose another policy", "OVERLOAD_CAPACITY cannot be used with OVERLOAD_POLICY lossless")
	}
}

// numberValue reads a number written bare or quoted ('502').
func numberValue(v syntax.ConfigValue) (float64, bool) {
	switch v.Kind {
	case syntax.ValueNumber:
		return v.Number, true
	case syntax.ValueString:
		var f float64
		_, err := fmt.Sscanf(v.Text, "%g", &f)
		return f, err == nil
	}
	return 0, false
}

// mapping checks a MAPPING or EVENT and its TAGs.
func (c *checker) mapping(b *syntax.ConfigBlock) {
	c.settings(b)
	c.uniqueBlocks(b.Blocks)
	for _, t := range b.Blocks {
		if t.Kind != "TAG" || b.Kind != "MAPPING" {
			c.errorf(t.KindPos, "", "ADD %s cannot be inside ADD %s", t.Written, b.Written)
			continue
		}
		c.settings(t)
		for _, n := range t.Blocks {
			c.errorf(n.KindPos, "", "ADD %s cannot be inside ADD TAG", n.Written)
		}
	}
}

// settings checks what every block shares: no key twice, valid topics and
// intervals.
func (c *checker) settings(b *syntax.ConfigBlock) {
	seen := map[string]bool{}
	for _, p := range b.Pairs {
		if seen[p.Key] {
			c.errorf(p.KeyPos, "", "%s is set twice in %s", p.Key, b.Written)
		}
		seen[p.Key] = true
		switch {
		case p.Key == "EVERY":
			c.every(p)
		case strings.HasSuffix(p.Key, "_TOPIC"):
			v := p.Value()
			if v.Kind != syntax.ValueString || len(p.Values) != 1 {
				c.errorf(v.Pos, `write the topic in quotes: WITH `+p.Key+` "a/b"`, "%s must be a topic string", p.Key)
				continue
			}
			c.filterLit(&syntax.StringLit{Start: v.Pos, Value: v.Text}, p.Key)
		}
	}
	for _, n := range b.Blocks {
		if b.Kind != "MAPPING" {
			c.errorf(n.KindPos, "", "ADD %s cannot be inside ADD %s", n.Written, b.Written)
		}
	}
}

// every checks WITH EVERY <n> <unit>.
func (c *checker) every(p *syntax.ConfigPair) {
	v := p.Value()
	if len(p.Values) != 2 || v.Kind != syntax.ValueNumber {
		c.errorf(v.Pos, "write WITH EVERY <n> <unit>, such as WITH EVERY 500 MILLISECONDS", "invalid interval %s", p.Raw)
		return
	}
	u, ok := syntax.ParseTimeUnit(p.Values[1].Text)
	if !ok {
		units := []string{"MILLISECONDS", "SECONDS", "MINUTES", "HOURS", "DAYS", "WEEKS"}
		c.errorf(p.Values[1].Pos, suggestName(p.Values[1].Text, units), "unknown time unit %s", p.Values[1].Text)
		return
	}
	c.interval(v.Pos, v.Number, v.Text, u, "WITH EVERY")
}

// uniqueBlocks reports two named blocks of the same kind and name, or two
// unnamed blocks of the same kind.
func (c *checker) uniqueBlocks(blocks []*syntax.ConfigBlock) {
	var seen []string
	for _, b := range blocks {
		key := b.Kind + " " + b.Name
		if slices.Contains(seen, key) {
			c.errorf(b.Start, "", "ADD %s %s appears twice", b.Written, b.Name)
		}
		seen = append(seen, key)
	}
}
