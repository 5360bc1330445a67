// The kernel's routing decision for one destination, asked over rtnetlink (RTM_GETROUTE): which
// interface a packet from `source` to `destination` leaves by. The kernel fast path sends a
// rewritten packet for another host out of that interface (docs/kernel-fast-path.md).
#ifndef RELAYD_ROUTE_LOOKUP_H
#define RELAYD_ROUTE_LOOKUP_H

// `family` is AF_INET (4-byte addresses) or AF_INET6 (16 bytes), in network byte order; `source`
// may be NULL. Returns the output interface's index, or a negative errno (-ENETUNREACH when
// there is no route).
int relayd_route_output_interface(int family, const unsigned char *destination, const unsigned char *source);

// The same lookup with the next hop: `gateway` (`family`'s address length) gets the gateway's
// address and `has_gateway` 1 when the route has one; 0 when the destination is on the link.
int relayd_route_next_hop(int family, const unsigned char *destination, const unsigned char *source, int *ifindex,
                          unsigned char *gateway, int *has_gateway);

// The link-layer address the neighbour table holds for `address` on interface `ifindex`
// (RTM_GETNEIGH), in a usable state (reachable, stale, delay, probe, permanent): 0, or a negative
// errno (-ENOENT when there is no usable entry).
int relayd_neighbour_address(int family, int ifindex, const unsigned char *address, unsigned char mac[6]);

// Interface `ifindex`'s own Ethernet address: 0, or a negative errno (-EAFNOSUPPORT when it is
// not Ethernet).
int relayd_interface_address(int ifindex, unsigned char mac[6]);

#endif
