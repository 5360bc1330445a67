// The kernel fast path's map layouts, shared by the BPF program (bpf/relayd_fastpath.bpf.c,
// built with clang -target bpf) and relayd, which fills the maps (docs/kernel-fast-path.md).
// Addresses and ports are in network byte order, as they appear in the packet; the channel
// number too. Expiries are CLOCK_BOOTTIME seconds, the clock of relayd's lifetimes.
#ifndef RELAYD_FASTPATH_H
#define RELAYD_FASTPATH_H

#ifdef __bpf__
#include <linux/types.h>
typedef __u8 relayd_u8;
typedef __u16 relayd_u16;
typedef __u32 relayd_u32;
typedef __u64 relayd_u64;
#else
#include <stdint.h>
typedef uint8_t relayd_u8;
typedef uint16_t relayd_u16;
typedef uint32_t relayd_u32;
typedef uint64_t relayd_u64;
#endif

// Client -> peer: ChannelData from a client's 5-tuple on one channel (RFC 8656 §12.6).
struct relayd_channel_key_v4 {
    relayd_u32 client_ip;
    relayd_u32 server_ip;
    relayd_u16 client_port;
    relayd_u16 server_port;
    relayd_u16 channel;
    relayd_u16 reserved;
};

// Where that ChannelData's payload goes: from the allocation's relayed address to the peer.
struct relayd_channel_value_v4 {
    relayd_u32 relay_ip;
    relayd_u32 peer_ip;
    relayd_u16 relay_port;
    relayd_u16 peer_port;
    relayd_u32 flags;
    // The interface the packet leaves by when its destination is another host (the one that
    // carries relay_ip); 0: none known, the packet is left to relayd.
    relayd_u32 egress_ifindex;
    relayd_u32 reserved;
    relayd_u64 expiry;
    // For the XDP program: the link-layer addresses of the next hop and of the egress interface
    // (all zero: unknown, the packet is left to the TC program).
    relayd_u8 next_hop[6];
    relayd_u8 egress_address[6];
    relayd_u32 reserved_l2;
};

// Peer -> client: a UDP datagram from a peer to a relayed address (RFC 8656 §12.7).
struct relayd_peer_key_v4 {
    relayd_u32 peer_ip;
    relayd_u32 relay_ip;
    relayd_u16 peer_port;
    relayd_u16 relay_port;
};

// The client it goes to, framed as ChannelData on `channel`, from the server address it uses.
struct relayd_peer_value_v4 {
    relayd_u32 server_ip;
    relayd_u32 client_ip;
    relayd_u16 server_port;
    relayd_u16 client_port;
    relayd_u16 channel;
    relayd_u16 flags;
    // As above, the interface that carries server_ip.
    relayd_u32 egress_ifindex;
    relayd_u32 reserved;
    relayd_u64 expiry;
    // For the XDP program: the link-layer addresses of the next hop and of the egress interface
    // (all zero: unknown, the packet is left to the TC program).
    relayd_u8 next_hop[6];
    relayd_u8 egress_address[6];
    relayd_u32 reserved_l2;
};

// The same four maps for IPv6 (RFC 6156): addresses are 16 bytes, in network byte order.
struct relayd_channel_key_v6 {
    relayd_u32 client_ip[4];
    relayd_u32 server_ip[4];
    relayd_u16 client_port;
    relayd_u16 server_port;
    relayd_u16 channel;
    relayd_u16 reserved;
};

struct relayd_channel_value_v6 {
    relayd_u32 relay_ip[4];
    relayd_u32 peer_ip[4];
    relayd_u16 relay_port;
    relayd_u16 peer_port;
    relayd_u32 flags;
    relayd_u32 egress_ifindex;
    relayd_u32 reserved;
    relayd_u64 expiry;
    // For the XDP program: the link-layer addresses of the next hop and of the egress interface
    // (all zero: unknown, the packet is left to the TC program).
    relayd_u8 next_hop[6];
    relayd_u8 egress_address[6];
    relayd_u32 reserved_l2;
};

struct relayd_peer_key_v6 {
    relayd_u32 peer_ip[4];
    relayd_u32 relay_ip[4];
    relayd_u16 peer_port;
    relayd_u16 relay_port;
};

struct relayd_peer_value_v6 {
    relayd_u32 server_ip[4];
    relayd_u32 client_ip[4];
    relayd_u16 server_port;
    relayd_u16 client_port;
    relayd_u16 channel;
    relayd_u16 flags;
    relayd_u32 egress_ifindex;
    relayd_u32 reserved;
    relayd_u64 expiry;
    // For the XDP program: the link-layer addresses of the next hop and of the egress interface
    // (all zero: unknown, the packet is left to the TC program).
    relayd_u8 next_hop[6];
    relayd_u8 egress_address[6];
    relayd_u32 reserved_l2;
};

// `flags` of a route: the rewritten packet's destination is this host, so the stack delivers it
// (TC_ACT_OK). Without it the packet is for another host: it leaves by `egress_ifindex`
// (bpf_redirect_neigh, which finds the next hop and its link-layer address).
#define RELAYD_ROUTE_LOCAL 1
// `flags` of a route whose peer is one of relayd's own relayed addresses: the program uses it
// only to go from relayed address to relayed address in one pass (both clients' channels
// installed). Anything else on it goes to relayd, which passes it only to or from a port a live
// allocation holds (docs/peer-policy.md).
#define RELAYD_ROUTE_RELAYED_PEER 2

// What one entry relayed (per CPU; relayd sums the CPUs): kept in maps of their own under the
// same keys, so refreshing an entry's expiry never loses a count.
struct relayd_counters {
    relayd_u64 packets;
    relayd_u64 bytes;
};

// Why the program left a packet to the stack (and so to relayd), or what it did with it; the
// index into the per-CPU `relayd_stats` array.
enum relayd_fastpath_stat {
    RELAYD_STAT_TO_PEER = 0,
    RELAYD_STAT_TO_CLIENT = 1,
    RELAYD_STAT_PASS_NO_ENTRY = 2,
    RELAYD_STAT_PASS_EXPIRED = 3,
    RELAYD_STAT_PASS_LENGTH = 4,
    RELAYD_STAT_PASS_UNSUPPORTED = 5,
    // ChannelData from one of relayd's clients to another's relayed address, delivered to that
    // client in the same pass (also counted as TO_PEER and TO_CLIENT).
    RELAYD_STAT_RELAY_TO_RELAY = 6,
    // Packets the XDP program relayed (also counted as TO_PEER or TO_CLIENT).
    RELAYD_STAT_XDP = 7,
    RELAYD_STAT_COUNT = 8,
};

#define RELAYD_FASTPATH_MAX_ENTRIES 65536

#endif
