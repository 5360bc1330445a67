// SPDX-License-Identifier: Apache-2.0
// relayd's kernel fast path: relays established channels of UDP clients without waking relayd
// (docs/kernel-fast-path.md). A TC (clsact ingress) program, for IPv4 and IPv6 (RFC 6156):
//   - ChannelData from a client whose channel relayd installed (RFC 8656 §12.6): strip the
//     4-byte header, rewrite to relayed address -> peer;
//   - UDP from a peer to a relayed address with a channel (RFC 8656 §12.7): prepend the
//     ChannelData header, rewrite to server address -> client;
//   - relay to relay: ChannelData whose peer is another client's relayed address, with a channel
//     back to the sender's, goes straight to that client in the same pass (only the ports, the
//     addresses and the channel number change); a route whose peer is a relayed address is used
//     for nothing else (RELAYD_ROUTE_RELAYED_PEER), so relayd judges whether its allocation lives.
// Each entry carries its expiry (CLOCK_BOOTTIME seconds): the program checks it itself, so a
// late removal never relays past a lifetime. Everything else (STUN, indications, padded or
// truncated ChannelData, IPv4 options, IPv6 extension headers, fragments, GSO packets, unknown
// channels) passes on untouched, where relayd handles and counts it as without the fast path.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "relayd_fastpath.h"

#define ROUTE_MAP(name, key_type, value_type)                                                                    \
    struct {                                                                                                     \
        __uint(type, BPF_MAP_TYPE_HASH);                                                                         \
        __uint(max_entries, RELAYD_FASTPATH_MAX_ENTRIES);                                                        \
        __type(key, key_type);                                                                                   \
        __type(value, value_type);                                                                               \
    } name SEC(".maps")

#define COUNTER_MAP(name, key_type)                                                                              \
    struct {                                                                                                     \
        __uint(type, BPF_MAP_TYPE_PERCPU_HASH);                                                                  \
        __uint(max_entries, RELAYD_FASTPATH_MAX_ENTRIES);                                                        \
        __type(key, key_type);                                                                                   \
        __type(value, struct relayd_counters);                                                                   \
    } name SEC(".maps")

ROUTE_MAP(relayd_channels_v4, struct relayd_channel_key_v4, struct relayd_channel_value_v4);
ROUTE_MAP(relayd_peers_v4, struct relayd_peer_key_v4, struct relayd_peer_value_v4);
COUNTER_MAP(relayd_channel_counters_v4, struct relayd_channel_key_v4);
COUNTER_MAP(relayd_peer_counters_v4, struct relayd_peer_key_v4);
ROUTE_MAP(relayd_channels_v6, struct relayd_channel_key_v6, struct relayd_channel_value_v6);
ROUTE_MAP(relayd_peers_v6, struct relayd_peer_key_v6, struct relayd_peer_value_v6);
COUNTER_MAP(relayd_channel_counters_v6, struct relayd_channel_key_v6);
COUNTER_MAP(relayd_peer_counters_v6, struct relayd_peer_key_v6);

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, RELAYD_STAT_COUNT);
    __type(key, __u32);
    __type(value, __u64);
} relayd_stats SEC(".maps");

// The checksum's working buffer: one per CPU, off the 512-byte BPF stack.
#define CHUNK_SIZE 256
struct chunk {
    __u8 bytes[CHUNK_SIZE];
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct chunk);
} relayd_scratch SEC(".maps");

// The verdict for a packet the program leaves alone: no opinion (TC_ACT_UNSPEC), so the next
// program on the hook, if any, still sees it, and without one the stack takes it.
#define PASS TC_ACT_UNSPEC

#define L3_OFF ETH_HLEN
#define L4_OFF_V4 (ETH_HLEN + sizeof(struct iphdr))
#define L4_OFF_V6 (ETH_HLEN + sizeof(struct ipv6hdr))
// The longest IP packet handled here (an Ethernet MTU); longer ones go to the stack.
#define MAX_IP_LENGTH 1500

static __always_inline void count(__u32 stat) {
    __u64 *value = bpf_map_lookup_elem(&relayd_stats, &stat);
    if (value) *value += 1;
}

static __always_inline void add(struct relayd_counters *counters, __u32 bytes) {
    if (!counters) return;
    counters->packets += 1;
    counters->bytes += bytes;
}

static __always_inline __u64 now_seconds(void) { return bpf_ktime_get_boot_ns() / 1000000000ULL; }

// Whether a route may be used now: not expired, and somewhere to send the packet.
static __always_inline int usable(__u64 expiry, __u32 flags, __u32 egress_ifindex, __u64 now) {
    return now < expiry && ((flags & RELAYD_ROUTE_LOCAL) || egress_ifindex != 0);
}

static __always_inline __u16 fold(__u64 sum) {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return (__u16)sum;
}

// Adds `left` bytes of the packet from `offset` to the ones' complement sum `sum`, read with
// LOAD (bpf_skb_load_bytes, bpf_xdp_load_bytes) through the per-CPU `chunk`: 256-byte loads,
// then the rest (under 256 bytes) in one load and one sum. Zero padding to a multiple of 4 adds
// nothing to a ones' complement sum (RFC 1071), and an odd last byte is summed as its 16-bit
// word padded with zero, as RFC 768 asks. Negative on failure.
#define DEFINE_PACKET_SUM(name, context, LOAD)                                                                   \
    static __always_inline __s64 name(context *ctx, __u8 *chunk, __u32 offset, __u32 left, __s64 sum) {        \
        for (int i = 0; i < MAX_IP_LENGTH / CHUNK_SIZE; i++) {                                                   \
            if (left < CHUNK_SIZE) break;                                                                        \
            if (LOAD(ctx, offset, chunk, CHUNK_SIZE) < 0) return -1;                                             \
            sum = bpf_csum_diff(0, 0, (__be32 *)chunk, CHUNK_SIZE, (__u32)sum);                                  \
            offset += CHUNK_SIZE;                                                                                \
            left -= CHUNK_SIZE;                                                                                  \
        }                                                                                                        \
        if (left > 0) {                                                                                          \
            __builtin_memset(chunk, 0, CHUNK_SIZE);                                                              \
            __u32 length = left & 0xff;                                                                          \
            if (length == 0 || LOAD(ctx, offset, chunk, length) < 0) return -1;                                  \
            __u32 padded = (length + 3) & 0x1fc;                                                                 \
            if (padded > CHUNK_SIZE) return -1;                                                                  \
            sum = bpf_csum_diff(0, 0, (__be32 *)chunk, padded, (__u32)sum);                                      \
        }                                                                                                        \
        return sum;                                                                                              \
    }

// The final UDP checksum from the sum of pseudo-header, header and payload (0 is sent as 0xffff).
static __always_inline __u16 udp_checksum(__s64 sum) {
    __u16 check = ~fold((__u64)sum);
    return check == 0 ? 0xffff : check;
}

DEFINE_PACKET_SUM(skb_sum, struct __sk_buff, bpf_skb_load_bytes)

// The UDP checksum computed afresh over the pseudo-header (whose sum is `sum`), the header and
// the payload (RFC 768; RFC 8200 §8.1): after the header moved, an incremental update would be
// wrong for loopback's partial checksums.
static __attribute__((noinline)) int fix_udp_checksum(struct __sk_buff *skb, __u32 l4_off, __s64 sum, __u32 udp_length) {
    __u16 zero = 0;
    __u32 index = 0;
    if (sum < 0) return -1;
    __u8 *chunk = bpf_map_lookup_elem(&relayd_scratch, &index);
    if (!chunk) return -1;
    if (bpf_skb_store_bytes(skb, l4_off + offsetof(struct udphdr, check), &zero, 2, 0) < 0) return -1;
    sum = skb_sum(skb, chunk, l4_off, udp_length, sum);
    if (sum < 0) return -1;
    __u16 check = udp_checksum(sum);
    return bpf_skb_store_bytes(skb, l4_off + offsetof(struct udphdr, check), &check, 2, 0);
}

// --- Rewrites shared by both families, at the UDP header's offset `l4_off` -----------------------

// ChannelData -> UDP to the peer: the new UDP header goes over the ChannelData header, then the
// 4 bytes in front of it leave the packet.
static __always_inline int strip_channel_data(struct __sk_buff *skb, __u32 l4_off, __be16 source, __be16 dest,
                                              __u32 payload) {
    struct udphdr udp = {.source = source, .dest = dest, .len = bpf_htons((__u16)(sizeof(udp) + payload)), .check = 0};
    if (bpf_skb_store_bytes(skb, l4_off + 4, &udp, sizeof(udp), 0) < 0) return -1;
    return bpf_skb_adjust_room(skb, -4, BPF_ADJ_ROOM_NET, 0);
}

// The UDP header and ChannelData header of a packet to a client.
struct client_head {
    struct udphdr udp;
    __be16 channel;
    __be16 length;
};

static __always_inline void client_head_init(struct client_head *head, __be16 source, __be16 dest, __be16 channel,
                                             __u32 payload) {
    head->udp.source = source;
    head->udp.dest = dest;
    head->udp.len = bpf_htons((__u16)(sizeof(struct udphdr) + 4 + payload));
    head->udp.check = 0;
    head->channel = channel;
    head->length = bpf_htons((__u16)payload);
}

// UDP from the peer -> ChannelData to the client: 4 bytes open in front of the UDP header, which
// is written anew, followed by the ChannelData header.
static __always_inline int add_channel_data(struct __sk_buff *skb, __u32 l4_off, __be16 source, __be16 dest,
                                            __be16 channel, __u32 payload) {
    if (bpf_skb_adjust_room(skb, 4, BPF_ADJ_ROOM_NET, 0) < 0) return -1;
    struct client_head head;
    client_head_init(&head, source, dest, channel, payload);
    return bpf_skb_store_bytes(skb, l4_off, &head, sizeof(head), 0);
}

// ChannelData from one client -> ChannelData to another: same length, new ports and channel.
static __always_inline int renumber_channel_data(struct __sk_buff *skb, __u32 l4_off, __be16 source, __be16 dest,
                                                 __be16 channel, __u32 payload) {
    struct client_head head;
    client_head_init(&head, source, dest, channel, payload);
    return bpf_skb_store_bytes(skb, l4_off, &head, sizeof(head), 0);
}

// Sends a rewritten packet on: up the stack to a local socket, or out of the egress interface
// towards another host (the kernel resolves the next hop and fills in the link-layer header).
static __always_inline int transmit(__u32 flags, __u32 egress_ifindex) {
    if (flags & RELAYD_ROUTE_LOCAL) return TC_ACT_OK;
    return bpf_redirect_neigh(egress_ifindex, 0, 0, 0);
}

// --- IPv4 -----------------------------------------------------------------------------------

// Rewrites the IPv4 addresses and total length in place, then both checksums (RFC 791, RFC 768).
static __always_inline int finish_v4(struct __sk_buff *skb, __be32 saddr, __be32 daddr, __u32 ip_length) {
    void *data = (void *)(long)skb->data;
    void *data_end = (void *)(long)skb->data_end;
    struct iphdr *ip = data + L3_OFF;
    if ((void *)(ip + 1) > data_end) return -1;
    ip->saddr = saddr;
    ip->daddr = daddr;
    ip->tot_len = bpf_htons((__u16)ip_length);
    ip->check = 0;
    __s64 sum = bpf_csum_diff(0, 0, (__be32 *)ip, sizeof(*ip), 0);
    if (sum < 0) return -1;
    ip->check = ~fold((__u64)sum);
    struct {
        __be32 saddr;
        __be32 daddr;
        __u8 zero;
        __u8 protocol;
        __be16 length;
    } pseudo = {saddr, daddr, 0, IPPROTO_UDP, bpf_htons((__u16)(ip_length - sizeof(struct iphdr)))};
    sum = bpf_csum_diff(0, 0, (__be32 *)&pseudo, sizeof(pseudo), 0);
    return fix_udp_checksum(skb, L4_OFF_V4, sum, ip_length - sizeof(struct iphdr));
}

static __always_inline int handle_v4(struct __sk_buff *skb) {
    void *data = (void *)(long)skb->data;
    void *data_end = (void *)(long)skb->data_end;
    struct iphdr *ip = data + L3_OFF;
    struct udphdr *udp = data + L4_OFF_V4;
    if ((void *)(udp + 1) > data_end) return PASS;
    if (ip->protocol != IPPROTO_UDP) return PASS;
    // Options, fragments and segmentation offload are the stack's.
    if (ip->ihl != 5 || (ip->frag_off & bpf_htons(0x3fff)) != 0 || skb->gso_size != 0) return PASS;
    __u32 ip_length = bpf_ntohs(ip->tot_len);
    __u32 udp_length = bpf_ntohs(udp->len);
    if (ip_length > MAX_IP_LENGTH || udp_length != ip_length - sizeof(struct iphdr) || udp_length < sizeof(*udp))
        return PASS;
    __u32 payload = udp_length - sizeof(*udp);
    __u64 now = now_seconds();

    // Client -> peer: ChannelData (first two bits 01, RFC 7983) on a channel relayd installed.
    __u8 *first = data + L4_OFF_V4 + sizeof(struct udphdr);
    if (payload >= 4 && (void *)(first + 4) <= data_end && (first[0] & 0xc0) == 0x40) {
        struct relayd_channel_key_v4 key = {
            .client_ip = ip->saddr,
            .server_ip = ip->daddr,
            .client_port = udp->source,
            .server_port = udp->dest,
            .channel = *(__be16 *)first,
            .reserved = 0,
        };
        struct relayd_channel_value_v4 *found = bpf_map_lookup_elem(&relayd_channels_v4, &key);
        if (found) {
            __u32 length = ((__u32)first[2] << 8) | first[3];
            // Exactly the header and the data: padded or truncated ChannelData is relayd's.
            if (length + 4 != payload) {
                count(RELAYD_STAT_PASS_LENGTH);
                return PASS;
            }
            struct relayd_channel_value_v4 route = *found;
            if (now >= route.expiry) {
                count(RELAYD_STAT_PASS_EXPIRED);
                return PASS;
            }
            // Relay to relay: the peer is a relayed address whose client bound a channel to this
            // allocation's relayed address.
            struct relayd_peer_key_v4 next_key = {
                .peer_ip = route.relay_ip,
                .relay_ip = route.peer_ip,
                .peer_port = route.relay_port,
                .relay_port = route.peer_port,
            };
            struct relayd_peer_value_v4 *next = bpf_map_lookup_elem(&relayd_peers_v4, &next_key);
            if (next) {
                struct relayd_peer_value_v4 target = *next;
                if (usable(target.expiry, target.flags, target.egress_ifindex, now)) {
                    if (renumber_channel_data(skb, L4_OFF_V4, target.server_port, target.client_port, target.channel,
                                              length) < 0 ||
                        finish_v4(skb, target.server_ip, target.client_ip, ip_length) < 0)
                        return TC_ACT_SHOT;
                    add(bpf_map_lookup_elem(&relayd_channel_counters_v4, &key), length);
                    add(bpf_map_lookup_elem(&relayd_peer_counters_v4, &next_key), length);
                    count(RELAYD_STAT_TO_PEER);
                    count(RELAYD_STAT_TO_CLIENT);
                    count(RELAYD_STAT_RELAY_TO_RELAY);
                    return transmit(target.flags, target.egress_ifindex);
                }
            }
            // A relayed address without its client's channel back is relayd's to judge: only a
            // live allocation may get the packet, never another socket on that port.
            if (!usable(route.expiry, route.flags, route.egress_ifindex, now) ||
                (route.flags & RELAYD_ROUTE_RELAYED_PEER)) {
                count(RELAYD_STAT_PASS_UNSUPPORTED);
                return PASS;
            }
            if (strip_channel_data(skb, L4_OFF_V4, route.relay_port, route.peer_port, length) < 0 ||
                finish_v4(skb, route.relay_ip, route.peer_ip, ip_length - 4) < 0)
                return TC_ACT_SHOT;
            add(bpf_map_lookup_elem(&relayd_channel_counters_v4, &key), length);
            count(RELAYD_STAT_TO_PEER);
            return transmit(route.flags, route.egress_ifindex);
        }
    }

    // Peer -> client: UDP to a relayed address from a peer with a channel.
    struct relayd_peer_key_v4 key = {
        .peer_ip = ip->saddr,
        .relay_ip = ip->daddr,
        .peer_port = udp->source,
        .relay_port = udp->dest,
    };
    struct relayd_peer_value_v4 *found = bpf_map_lookup_elem(&relayd_peers_v4, &key);
    if (!found) return PASS;
    if (ip_length + 4 > MAX_IP_LENGTH) {
        count(RELAYD_STAT_PASS_LENGTH);
        return PASS;
    }
    struct relayd_peer_value_v4 route = *found;
    if (now >= route.expiry) {
        count(RELAYD_STAT_PASS_EXPIRED);
        return PASS;
    }
    // From a relayed address through the stack: relayd checks that a live allocation sent it.
    if (!usable(route.expiry, route.flags, route.egress_ifindex, now) || (route.flags & RELAYD_ROUTE_RELAYED_PEER)) {
        count(RELAYD_STAT_PASS_UNSUPPORTED);
        return PASS;
    }
    if (add_channel_data(skb, L4_OFF_V4, route.server_port, route.client_port, route.channel, payload) < 0 ||
        finish_v4(skb, route.server_ip, route.client_ip, ip_length + 4) < 0)
        return TC_ACT_SHOT;
    add(bpf_map_lookup_elem(&relayd_peer_counters_v4, &key), payload);
    count(RELAYD_STAT_TO_CLIENT);
    return transmit(route.flags, route.egress_ifindex);
}

// --- IPv6 -----------------------------------------------------------------------------------

// Rewrites the IPv6 addresses and payload length in place, then the UDP checksum, which IPv6
// makes mandatory (RFC 8200 §8.1).
static __always_inline int finish_v6(struct __sk_buff *skb, const __u32 *saddr, const __u32 *daddr,
                                     __u32 udp_length) {
    void *data = (void *)(long)skb->data;
    void *data_end = (void *)(long)skb->data_end;
    struct ipv6hdr *ip = data + L3_OFF;
    if ((void *)(ip + 1) > data_end) return -1;
    __builtin_memcpy(&ip->saddr, saddr, 16);
    __builtin_memcpy(&ip->daddr, daddr, 16);
    ip->payload_len = bpf_htons((__u16)udp_length);
    struct {
        __u32 saddr[4];
        __u32 daddr[4];
        __be32 length;
        __u8 zero[3];
        __u8 next_header;
    } pseudo = {.length = bpf_htonl(udp_length), .next_header = IPPROTO_UDP};
    __builtin_memcpy(pseudo.saddr, saddr, 16);
    __builtin_memcpy(pseudo.daddr, daddr, 16);
    __s64 sum = bpf_csum_diff(0, 0, (__be32 *)&pseudo, sizeof(pseudo), 0);
    return fix_udp_checksum(skb, L4_OFF_V6, sum, udp_length);
}

static __always_inline int handle_v6(struct __sk_buff *skb) {
    void *data = (void *)(long)skb->data;
    void *data_end = (void *)(long)skb->data_end;
    struct ipv6hdr *ip = data + L3_OFF;
    struct udphdr *udp = data + L4_OFF_V6;
    if ((void *)(udp + 1) > data_end) return PASS;
    // Extension headers (a fragment header among them) and segmentation offload are the stack's.
    if (ip->nexthdr != IPPROTO_UDP || skb->gso_size != 0) return PASS;
    __u32 udp_length = bpf_ntohs(udp->len);
    if (udp_length != bpf_ntohs(ip->payload_len) || udp_length < sizeof(*udp) ||
        udp_length + sizeof(struct ipv6hdr) > MAX_IP_LENGTH)
        return PASS;
    __u32 payload = udp_length - sizeof(*udp);
    __u64 now = now_seconds();

    __u8 *first = data + L4_OFF_V6 + sizeof(struct udphdr);
    if (payload >= 4 && (void *)(first + 4) <= data_end && (first[0] & 0xc0) == 0x40) {
        struct relayd_channel_key_v6 key = {
            .client_port = udp->source,
            .server_port = udp->dest,
            .channel = *(__be16 *)first,
            .reserved = 0,
        };
        __builtin_memcpy(key.client_ip, &ip->saddr, 16);
        __builtin_memcpy(key.server_ip, &ip->daddr, 16);
        struct relayd_channel_value_v6 *found = bpf_map_lookup_elem(&relayd_channels_v6, &key);
        if (found) {
            __u32 length = ((__u32)first[2] << 8) | first[3];
            if (length + 4 != payload) {
                count(RELAYD_STAT_PASS_LENGTH);
                return PASS;
            }
            struct relayd_channel_value_v6 route = *found;
            if (now >= route.expiry) {
                count(RELAYD_STAT_PASS_EXPIRED);
                return PASS;
            }
            struct relayd_peer_key_v6 next_key = {.peer_port = route.relay_port, .relay_port = route.peer_port};
            __builtin_memcpy(next_key.peer_ip, route.relay_ip, 16);
            __builtin_memcpy(next_key.relay_ip, route.peer_ip, 16);
            struct relayd_peer_value_v6 *next = bpf_map_lookup_elem(&relayd_peers_v6, &next_key);
            if (next) {
                struct relayd_peer_value_v6 target = *next;
                if (usable(target.expiry, target.flags, target.egress_ifindex, now)) {
                    if (renumber_channel_data(skb, L4_OFF_V6, target.server_port, target.client_port, target.channel,
                                              length) < 0 ||
                        finish_v6(skb, target.server_ip, target.client_ip, udp_length) < 0)
                        return TC_ACT_SHOT;
                    add(bpf_map_lookup_elem(&relayd_channel_counters_v6, &key), length);
                    add(bpf_map_lookup_elem(&relayd_peer_counters_v6, &next_key), length);
                    count(RELAYD_STAT_TO_PEER);
                    count(RELAYD_STAT_TO_CLIENT);
                    count(RELAYD_STAT_RELAY_TO_RELAY);
                    return transmit(target.flags, target.egress_ifindex);
                }
            }
            // A relayed address without its client's channel back is relayd's to judge: only a
            // live allocation may get the packet, never another socket on that port.
            if (!usable(route.expiry, route.flags, route.egress_ifindex, now) ||
                (route.flags & RELAYD_ROUTE_RELAYED_PEER)) {
                count(RELAYD_STAT_PASS_UNSUPPORTED);
                return PASS;
            }
            if (strip_channel_data(skb, L4_OFF_V6, route.relay_port, route.peer_port, length) < 0 ||
                finish_v6(skb, route.relay_ip, route.peer_ip, udp_length - 4) < 0)
                return TC_ACT_SHOT;
            add(bpf_map_lookup_elem(&relayd_channel_counters_v6, &key), length);
            count(RELAYD_STAT_TO_PEER);
            return transmit(route.flags, route.egress_ifindex);
        }
    }

    struct relayd_peer_key_v6 key = {.peer_port = udp->source, .relay_port = udp->dest};
    __builtin_memcpy(key.peer_ip, &ip->saddr, 16);
    __builtin_memcpy(key.relay_ip, &ip->daddr, 16);
    struct relayd_peer_value_v6 *found = bpf_map_lookup_elem(&relayd_peers_v6, &key);
    if (!found) return PASS;
    if (udp_length + sizeof(struct ipv6hdr) + 4 > MAX_IP_LENGTH) {
        count(RELAYD_STAT_PASS_LENGTH);
        return PASS;
    }
    struct relayd_peer_value_v6 route = *found;
    if (now >= route.expiry) {
        count(RELAYD_STAT_PASS_EXPIRED);
        return PASS;
    }
    // From a relayed address through the stack: relayd checks that a live allocation sent it.
    if (!usable(route.expiry, route.flags, route.egress_ifindex, now) || (route.flags & RELAYD_ROUTE_RELAYED_PEER)) {
        count(RELAYD_STAT_PASS_UNSUPPORTED);
        return PASS;
    }
    if (add_channel_data(skb, L4_OFF_V6, route.server_port, route.client_port, route.channel, payload) < 0 ||
        finish_v6(skb, route.server_ip, route.client_ip, udp_length + 4) < 0)
        return TC_ACT_SHOT;
    add(bpf_map_lookup_elem(&relayd_peer_counters_v6, &key), payload);
    count(RELAYD_STAT_TO_CLIENT);
    return transmit(route.flags, route.egress_ifindex);
}

SEC("tc")
int relayd_ingress(struct __sk_buff *skb) {
    if (skb->protocol == bpf_htons(ETH_P_IP)) return handle_v4(skb);
    if (skb->protocol == bpf_htons(ETH_P_IPV6)) return handle_v6(skb);
    return PASS;
}

#include "relayd_xdp.bpf.h"

char _license[] SEC("license") = "Apache-2.0";
