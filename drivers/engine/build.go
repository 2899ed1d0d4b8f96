package engine

import (
	"fmt"

	"gantry/drivers"
	"gantry/drivers/bridge"
	"gantry/drivers/modbus"
	"gantry/drivers/opcua"
	"gantry/drivers/s7"
	"gantry/lot/syntax"
)

// built is a connector's definition made runnable.
type built struct {
	spec     *drivers.Spec
	describe string
	run      runner
}

// usePKIDir hands dir to a server connector that keeps certificates.
func (b *built) usePKIDir(dir string) {
	if r, ok := b.run.(*serverRunner); ok {
		if p, ok := r.srv.(interface{ SetPKIDir(string) }); ok {
			p.SetPKIDir(dir)
		}
	}
}

// protocols maps each connector type to its configuration block and the
// function that reads the protocol's settings into a runner.
var protocols = map[string]struct {
	config string
	build  func(s *drivers.Spec, env drivers.Env, errs *[]error) (runner, string)
}{
	"MODBUS_TCP":    {"MODBUS_CONFIG", buildModbus},
	"MODBUS_SERIAL": {"MODBUS_CONFIG", buildModbus},
	"MQTT_BRIDGE":   {"DESTINATION_CONFIG", buildBridge},
	"OPCUA":         {"OPCUA_CONFIG", buildOPCUA},
	"SIEMENS_S7":    {"S7_CONFIG", buildS7},
	"MODBUS_SERVER": {"MODBUS_SERVER_CONFIG", buildModbusServer},
	"OPCUA_SERVER":  {"OPCUA_SERVER_CONFIG", buildOPCUAServer},
}

// build reads a connector's definition: the shared parts, then the
// protocol's; every problem is reported, each at its place.
func build(c *syntax.Connector, env drivers.Env) (*built, error) {
	p, ok := protocols[c.Type]
	if !ok {
		return nil, &drivers.ConfigError{Pos: c.TypePos, Msg: fmt.Sprintf("connector type %s is not supported by this build", c.Type)}
	}
	var errs []error
	s := drivers.Parse(c, p.config, env, &errs)
	r, describe := p.build(s, env, &errs)
	s.Finish()
	if err := drivers.Join(errs); err != nil {
		return nil, err
	}
	return &built{spec: s, describe: describe, run: r}, nil
}

func buildModbus(s *drivers.Spec, _ drivers.Env, _ *[]error) (runner, string) {
	cfg := modbus.Parse(s)
	return &poller{newDevice: func() drivers.Device { return modbus.New(cfg) }}, cfg.Describe()
}

func buildBridge(s *drivers.Spec, env drivers.Env, errs *[]error) (runner, string) {
	cfg := bridge.Parse(s, env, errs)
	return &bridgeRunner{cfg: cfg}, cfg.Describe()
}

func buildOPCUA(s *drivers.Spec, _ drivers.Env, _ *[]error) (runner, string) {
	cfg := opcua.Parse(s)
	return &poller{newDevice: func() drivers.Device { return opcua.New(cfg) }, subscribe: cfg.Subscribe}, cfg.Describe()
}

func buildS7(s *drivers.Spec, _ drivers.Env, _ *[]error) (runner, string) {
	cfg := s7.Parse(s)
	return &poller{newDevice: func() drivers.Device { return s7.New(cfg) }}, cfg.Describe()
}

func buildModbusServer(s *drivers.Spec, _ drivers.Env, _ *[]error) (runner, string) {
	cfg := modbus.ParseServer(s)
	r := &serverRunner{tags: cfg.Tags}
	r.srv = modbus.NewServer(cfg, r.clientWrite)
	return r, cfg.Describe()
}

func buildOPCUAServer(s *drivers.Spec, _ drivers.Env, _ *[]error) (runner, string) {
	cfg := opcua.ParseServer(s)
	r := &serverRunner{tags: cfg.Tags}
	r.srv = opcua.NewServer(cfg, r.clientWrite)
	return r, cfg.Describe()
}
