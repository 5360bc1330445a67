// SPDX-License-Identifier: Apache-2.0
// relayd's kernel fast path: relays established channels of UDP clients without waking relayd
// (docs/kernel-fast-path.md). A TC (clsact ingress) program:
//   - ChannelData from a client whose channel relayd installed (RFC 8656 §12.6): strip the
//     4-byte header, rewrite to relayed address -> peer;
//   - UDP from a peer to a relayed address with a channel (RFC 8656 §12.7): prepend the
//     ChannelData header, rewrite to server address -> client.
// Each entry carries its expiry (CLOCK_BOOTTIME seconds): the program checks it itself, so a
// late removal never relays past a lifetime. Everything else (STUN, indications, padded or
// truncated ChannelData, IPv4 options, fragments, GSO packets, unknown channels) passes to the
// stack untouched, where relayd handles and counts it as without the fast path.
// IPv4 only in this version.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "relayd_fastpath.h"

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, RELAYD_FASTPATH_MAX_ENTRIES);
    __type(key, struct relayd_channel_key_v4);
    __type(value, struct relayd_channel_value_v4);
} relayd_channels_v4 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, RELAYD_FASTPATH_MAX_ENTRIES);
    __type(key, struct relayd_peer_key_v4);
    __type(value, struct relayd_peer_value_v4);
} relayd_peers_v4 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_HASH);
    __uint(max_entries, RELAYD_FASTPATH_MAX_ENTRIES);
    __type(key, struct relayd_channel_key_v4);
    __type(value, struct relayd_counters);
} relayd_channel_counters_v4 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_HASH);
    __uint(max_entries, RELAYD_FASTPATH_MAX_ENTRIES);
    __type(key, struct relayd_peer_key_v4);
    __type(value, struct relayd_counters);
} relayd_peer_counters_v4 SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, RELAYD_STAT_COUNT);
    __type(key, __u32);
    __type(value, __u64);
} relayd_stats SEC(".maps");

#define L3_OFF ETH_HLEN
#define L4_OFF (ETH_HLEN + sizeof(struct iphdr))
#define PAYLOAD_OFF (L4_OFF + sizeof(struct udphdr))
// The longest IPv4 packet handled here (an Ethernet MTU); longer ones go to the stack.
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

static __always_inline __u16 fold(__u64 sum) {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return (__u16)sum;
}

// The IPv4 header checksum, computed afresh over the 20 bytes (RFC 791).
static __always_inline int fix_ip_checksum(struct __sk_buff *skb) {
    void *data = (void *)(long)skb->data;
    void *data_end = (void *)(long)skb->data_end;
    struct iphdr *ip = data + L3_OFF;
    if ((void *)(ip + 1) > data_end) return -1;
    ip->check = 0;
    __s64 sum = bpf_csum_diff(0, 0, (__be32 *)ip, sizeof(*ip), 0);
    if (sum < 0) return -1;
    ip->check = ~fold((__u64)sum);
    return 0;
}

// The UDP checksum computed afresh over pseudo-header, header and payload (RFC 768): after the
// header moved, an incremental update would be wrong for loopback's partial checksums.
static __always_inline int fix_udp_checksum(struct __sk_buff *skb, __be32 saddr, __be32 daddr, __u32 udp_length) {
    struct {
        __be32 saddr;
        __be32 daddr;
        __u8 zero;
        __u8 protocol;
        __be16 length;
    } pseudo = {saddr, daddr, 0, IPPROTO_UDP, bpf_htons((__u16)udp_length)};
    __u16 zero = 0;
    if (bpf_skb_store_bytes(skb, L4_OFF + offsetof(struct udphdr, check), &zero, 2, 0) < 0) return -1;
    __s64 sum = bpf_csum_diff(0, 0, (__be32 *)&pseudo, sizeof(pseudo), 0);
    if (sum < 0) return -1;
    __u8 chunk[256];
    __u32 offset = L4_OFF;
    __u32 left = udp_length;
    for (int i = 0; i < MAX_IP_LENGTH / 256; i++) {
        if (left < sizeof(chunk)) break;
        if (bpf_skb_load_bytes(skb, offset, chunk, sizeof(chunk)) < 0) return -1;
        sum = bpf_csum_diff(0, 0, (__be32 *)chunk, sizeof(chunk), (__u32)sum);
        offset += sizeof(chunk);
        left -= sizeof(chunk);
    }
    // The rest (under 256 bytes) in one load and one sum: zero padding to a multiple of 4 adds
    // nothing to a ones' complement sum (RFC 1071), and an odd last byte is summed as its
    // 16-bit word padded with zero, as RFC 768 asks.
    if (left > 0) {
        __builtin_memset(chunk, 0, sizeof(chunk));
        __u32 length = left & 0xff;
        if (length == 0 || bpf_skb_load_bytes(skb, offset, chunk, length) < 0) return -1;
        __u32 padded = (length + 3) & 0x1fc;
        if (padded > sizeof(chunk)) return -1;
        sum = bpf_csum_diff(0, 0, (__be32 *)chunk, padded, (__u32)sum);
    }
    if (sum < 0) return -1;
    __u16 check = ~fold((__u64)sum);
    if (check == 0) check = 0xffff;
    return bpf_skb_store_bytes(skb, L4_OFF + offsetof(struct udphdr, check), &check, 2, 0);
}

// Rewrites the IPv4 addresses and total length in place, then both checksums.
static __always_inline int finish(struct __sk_buff *skb, __be32 saddr, __be32 daddr, __u32 ip_length) {
    void *data = (void *)(long)skb->data;
    void *data_end = (void *)(long)skb->data_end;
    struct iphdr *ip = data + L3_OFF;
    if ((void *)(ip + 1) > data_end) return -1;
    ip->saddr = saddr;
    ip->daddr = daddr;
    ip->tot_len = bpf_htons((__u16)ip_length);
    if (fix_ip_checksum(skb) < 0) return -1;
    return fix_udp_checksum(skb, saddr, daddr, ip_length - sizeof(struct iphdr));
}

// ChannelData -> UDP to the peer: the new UDP header goes over the ChannelData header, then the
// 4 bytes in front of it leave the packet.
static __always_inline int to_peer(struct __sk_buff *skb, struct relayd_channel_value_v4 *route, __u32 payload) {
    struct udphdr udp = {
        .source = route->relay_port,
        .dest = route->peer_port,
        .len = bpf_htons((__u16)(sizeof(struct udphdr) + payload)),
        .check = 0,
    };
    if (bpf_skb_store_bytes(skb, L4_OFF + 4, &udp, sizeof(udp), 0) < 0) return -1;
    if (bpf_skb_adjust_room(skb, -4, BPF_ADJ_ROOM_NET, 0) < 0) return -1;
    return finish(skb, route->relay_ip, route->peer_ip, sizeof(struct iphdr) + sizeof(struct udphdr) + payload);
}

// UDP from the peer -> ChannelData to the client: 4 bytes open in front of the UDP header, which
// is written anew, followed by the ChannelData header.
static __always_inline int to_client(struct __sk_buff *skb, struct relayd_peer_value_v4 *route, __u32 payload) {
    if (bpf_skb_adjust_room(skb, 4, BPF_ADJ_ROOM_NET, 0) < 0) return -1;
    struct {
        struct udphdr udp;
        __be16 channel;
        __be16 length;
    } head = {
        .udp = {
            .source = route->server_port,
            .dest = route->client_port,
            .len = bpf_htons((__u16)(sizeof(struct udphdr) + 4 + payload)),
            .check = 0,
        },
        .channel = route->channel,
        .length = bpf_htons((__u16)payload),
    };
    if (bpf_skb_store_bytes(skb, L4_OFF, &head, sizeof(head), 0) < 0) return -1;
    return finish(skb, route->server_ip, route->client_ip, sizeof(struct iphdr) + sizeof(struct udphdr) + 4 + payload);
}

// Sends a rewritten packet on: up the stack to a local socket, or out of the egress interface
// towards another host (the kernel resolves the next hop and fills in the link-layer header).
static __always_inline int transmit(__u32 flags, __u32 egress_ifindex) {
    if (flags & RELAYD_ROUTE_LOCAL) return TC_ACT_OK;
    return bpf_redirect_neigh(egress_ifindex, 0, 0, 0);
}

SEC("tc")
int relayd_ingress(struct __sk_buff *skb) {
    void *data = (void *)(long)skb->data;
    void *data_end = (void *)(long)skb->data_end;
    if (skb->protocol != bpf_htons(ETH_P_IP)) return TC_ACT_OK;
    struct iphdr *ip = data + L3_OFF;
    struct udphdr *udp = data + L4_OFF;
    if ((void *)(udp + 1) > data_end) return TC_ACT_OK;
    if (ip->protocol != IPPROTO_UDP) return TC_ACT_OK;
    // Options, fragments and segmentation offload are the stack's.
    if (ip->ihl != 5 || (ip->frag_off & bpf_htons(0x3fff)) != 0 || skb->gso_size != 0) return TC_ACT_OK;
    __u32 ip_length = bpf_ntohs(ip->tot_len);
    __u32 udp_length = bpf_ntohs(udp->len);
    if (ip_length > MAX_IP_LENGTH || udp_length != ip_length - sizeof(struct iphdr) || udp_length < sizeof(*udp))
        return TC_ACT_OK;
    __u32 payload = udp_length - sizeof(*udp);

    // Client -> peer: ChannelData (first two bits 01, RFC 7983) on a channel relayd installed.
    __u8 *first = data + PAYLOAD_OFF;
    if (payload >= 4 && (void *)(first + 4) <= data_end && (first[0] & 0xc0) == 0x40) {
        struct relayd_channel_key_v4 key = {
            .client_ip = ip->saddr,
            .server_ip = ip->daddr,
            .client_port = udp->source,
            .server_port = udp->dest,
            .channel = *(__be16 *)first,
            .reserved = 0,
        };
        struct relayd_channel_value_v4 *route = bpf_map_lookup_elem(&relayd_channels_v4, &key);
        if (route) {
            __u32 length = ((__u32)first[2] << 8) | first[3];
            // Exactly the header and the data: padded or truncated ChannelData is relayd's.
            if (length + 4 != payload) {
                count(RELAYD_STAT_PASS_LENGTH);
                return TC_ACT_OK;
            }
            if (now_seconds() >= route->expiry) {
                count(RELAYD_STAT_PASS_EXPIRED);
                return TC_ACT_OK;
            }
            struct relayd_channel_value_v4 copy = *route;
            if (!(copy.flags & RELAYD_ROUTE_LOCAL) && copy.egress_ifindex == 0) {
                count(RELAYD_STAT_PASS_UNSUPPORTED);
                return TC_ACT_OK;
            }
            if (to_peer(skb, &copy, length) < 0) return TC_ACT_SHOT;
            add(bpf_map_lookup_elem(&relayd_channel_counters_v4, &key), length);
            count(RELAYD_STAT_TO_PEER);
            return transmit(copy.flags, copy.egress_ifindex);
        }
    }

    // Peer -> client: UDP to a relayed address from a peer with a channel.
    struct relayd_peer_key_v4 key = {
        .peer_ip = ip->saddr,
        .relay_ip = ip->daddr,
        .peer_port = udp->source,
        .relay_port = udp->dest,
    };
    struct relayd_peer_value_v4 *route = bpf_map_lookup_elem(&relayd_peers_v4, &key);
    if (!route) return TC_ACT_OK;
    if (ip_length + 4 > MAX_IP_LENGTH) {
        count(RELAYD_STAT_PASS_LENGTH);
        return TC_ACT_OK;
    }
    if (now_seconds() >= route->expiry) {
        count(RELAYD_STAT_PASS_EXPIRED);
        return TC_ACT_OK;
    }
    struct relayd_peer_value_v4 copy = *route;
    if (!(copy.flags & RELAYD_ROUTE_LOCAL) && copy.egress_ifindex == 0) {
        count(RELAYD_STAT_PASS_UNSUPPORTED);
        return TC_ACT_OK;
    }
    if (to_client(skb, &copy, payload) < 0) return TC_ACT_SHOT;
    add(bpf_map_lookup_elem(&relayd_peer_counters_v4, &key), payload);
    count(RELAYD_STAT_TO_CLIENT);
    return transmit(copy.flags, copy.egress_ifindex);
}

char _license[] SEC("license") = "Apache-2.0";
