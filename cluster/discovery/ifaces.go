package discovery

import (
	"fmt"
	"net"
	"slices"
)

// Interface selection, shared by Multicast and Zeroconf.
//
// By default discovery uses every interface that is up, multicast-capable,
// not loopback and has an IPv4 address, and looks again periodically, so a
// NIC that comes up late (DHCP, a USB adapter) is picked up without a
// restart. Announcing on every such interface, rather than on the one the
// OS would choose (the default route's), is what makes a gateway with a
// plant-network NIC and a cabinet NIC find its peers on whichever LAN they
// are: TTL 1 keeps each copy on its own link. Naming the interfaces
// (Interfaces option) keeps announcements off the others; do that in
// production when the cabinet LAN is known.

// ifaceSelection is the result of one look at the interfaces.
type ifaceSelection struct {
	ifaces  []net.Interface // to use, by ascending index
	missing []string        // named interfaces that do not exist, are down or cannot multicast
}

// selectInterfaces returns the interfaces to use: those named, or with no
// names every usable one.
func selectInterfaces(names []string) (ifaceSelection, error) {
	all, err := net.Interfaces()
	if err != nil {
		return ifaceSelection{}, fmt.Errorf("discovery: list network interfaces: %w", err)
	}
	var sel ifaceSelection
	if len(names) == 0 {
		for _, ifi := range all {
			if ifi.Flags&net.FlagLoopback == 0 && usable(ifi) {
				sel.ifaces = append(sel.ifaces, ifi)
			}
		}
		return sel, nil
	}
	for _, name := range names {
		i := slices.IndexFunc(all, func(ifi net.Interface) bool { return ifi.Name == name })
		if i < 0 || !usable(all[i]) {
			sel.missing = append(sel.missing, name)
			continue
		}
		if !slices.ContainsFunc(sel.ifaces, func(ifi net.Interface) bool { return ifi.Index == all[i].Index }) {
			sel.ifaces = append(sel.ifaces, all[i])
		}
	}
	slices.SortFunc(sel.ifaces, func(a, b net.Interface) int { return a.Index - b.Index })
	return sel, nil
}

// usable reports whether ifi is up, multicast-capable and has an IPv4
// address.
func usable(ifi net.Interface) bool {
	if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagMulticast == 0 {
		return false
	}
	return len(ipv4Nets(ifi)) > 0
}

// ipv4Nets returns the IPv4 networks of ifi.
func ipv4Nets(ifi net.Interface) []*net.IPNet {
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil
	}
	var nets []*net.IPNet
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			nets = append(nets, n)
		}
	}
	return nets
}

// indexes returns the interface indexes, to notice a change of set.
func indexes(ifaces []net.Interface) []int {
	out := make([]int, len(ifaces))
	for i, ifi := range ifaces {
		out[i] = ifi.Index
	}
	return out
}

func ifaceNames(ifaces []net.Interface) []string {
	out := make([]string, len(ifaces))
	for i, ifi := range ifaces {
		out[i] = ifi.Name
	}
	return out
}
