// The kernel's routing decision for one destination, asked over rtnetlink (RTM_GETROUTE): which
// interface a packet from `source` to `destination` leaves by. The kernel fast path sends a
// rewritten packet for another host out of that interface (docs/kernel-fast-path.md).
#ifndef RELAYD_ROUTE_LOOKUP_H
#define RELAYD_ROUTE_LOOKUP_H

// `family` is AF_INET (4-byte addresses) or AF_INET6 (16 bytes), in network byte order; `source`
// may be NULL. Returns the output interface's index, or a negative errno (-ENETUNREACH when
// there is no route).
int relayd_route_output_interface(int family, const unsigned char *destination, const unsigned char *source);

#endif
