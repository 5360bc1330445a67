// SPDX-License-Identifier: Apache-2.0
// The XDP side of relayd's kernel fast path (docs/kernel-fast-path.md), included by
// relayd_fastpath.bpf.c and sharing its maps. It runs before the kernel builds a socket buffer,
// on interfaces whose driver supports XDP natively. It relays a channel's packet itself only
// when it can finish it: the destination another host, and the route carrying the next hop's
// and the egress interface's link-layer addresses; IPv4 and IPv6 (RFC 6156). Everything else, and every packet it
// would have to count as a pass (expired entry, length mismatch), goes on unchanged
// (XDP_PASS) to the TC program, which handles and counts it.

#define XDP_L3_OFF ETH_HLEN
#define XDP_L4_OFF (ETH_HLEN + sizeof(struct iphdr))
#define XDP_L4_OFF_V6 (ETH_HLEN + sizeof(struct ipv6hdr))

static __always_inline int has_link_layer(const __u8 *next_hop) {
    return (next_hop[0] | next_hop[1] | next_hop[2] | next_hop[3] | next_hop[4] | next_hop[5]) != 0;
}

// Whether the XDP program can send a packet by this route itself.
#define XDP_SENDABLE(route, now)                                                                        \
    (usable((route).expiry, (route).flags, (route).egress_ifindex, now) &&                             \
     !((route).flags & RELAYD_ROUTE_LOCAL) && (route).egress_ifindex != 0 && has_link_layer((route).next_hop))

DEFINE_PACKET_SUM(xdp_sum, struct xdp_md, bpf_xdp_load_bytes)

// The UDP checksum computed afresh over the pseudo-header (whose sum is `sum`), the header and
// the payload (RFC 768), as the TC program does.
static __attribute__((noinline)) int xdp_fix_udp_checksum(struct xdp_md *ctx, __u32 l4_off, __s64 sum,
                                                          __u32 udp_length) {
    __u32 index = 0;
    if (sum < 0) return -1;
    __u8 *chunk = bpf_map_lookup_elem(&relayd_scratch, &index);
    if (!chunk) return -1;
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    if (l4_off != XDP_L4_OFF && l4_off != XDP_L4_OFF_V6) return -1;
    struct udphdr *udp = data + l4_off;
    if ((void *)(udp + 1) > data_end) return -1;
    udp->check = 0;
    sum = xdp_sum(ctx, chunk, l4_off, udp_length, sum);
    if (sum < 0) return -1;
    data = (void *)(long)ctx->data;
    data_end = (void *)(long)ctx->data_end;
    udp = data + l4_off;
    if ((void *)(udp + 1) > data_end) return -1;
    udp->check = udp_checksum(sum);
    return 0;
}

// Writes the headers of a rewritten packet at the start of the frame (the IPv4 header built on
// `template`, the received one: TTL, TOS and identification carry over), then both checksums.
static __always_inline int xdp_finish(struct xdp_md *ctx, const struct iphdr *template, const __u8 *next_hop,
                                      const __u8 *egress_address, __be32 saddr, __be32 daddr, __be16 source,
                                      __be16 dest, __u32 udp_length) {
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct iphdr *ip = data + XDP_L3_OFF;
    struct udphdr *udp = data + XDP_L4_OFF;
    if ((void *)(udp + 1) > data_end) return -1;
    __builtin_memcpy(eth->h_dest, next_hop, ETH_ALEN);
    __builtin_memcpy(eth->h_source, egress_address, ETH_ALEN);
    eth->h_proto = bpf_htons(ETH_P_IP);
    *ip = *template;
    ip->saddr = saddr;
    ip->daddr = daddr;
    ip->tot_len = bpf_htons((__u16)(sizeof(struct iphdr) + udp_length));
    ip->check = 0;
    __s64 sum = bpf_csum_diff(0, 0, (__be32 *)ip, sizeof(struct iphdr), 0);
    if (sum < 0) return -1;
    ip->check = ~fold((__u64)sum);
    udp->source = source;
    udp->dest = dest;
    udp->len = bpf_htons((__u16)udp_length);
    udp->check = 0;
    struct {
        __be32 saddr;
        __be32 daddr;
        __u8 zero;
        __u8 protocol;
        __be16 length;
    } pseudo = {saddr, daddr, 0, IPPROTO_UDP, bpf_htons((__u16)udp_length)};
    sum = bpf_csum_diff(0, 0, (__be32 *)&pseudo, sizeof(pseudo), 0);
    return xdp_fix_udp_checksum(ctx, XDP_L4_OFF, sum, udp_length);
}

// The same for IPv6: the header built on `template` (traffic class, flow label and hop limit
// carry over), no header checksum, the UDP checksum mandatory (RFC 8200 §8.1).
static __always_inline int xdp_finish_v6(struct xdp_md *ctx, const struct ipv6hdr *template, const __u8 *next_hop,
                                         const __u8 *egress_address, const __u32 *saddr, const __u32 *daddr,
                                         __be16 source, __be16 dest, __u32 udp_length) {
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct ipv6hdr *ip = data + XDP_L3_OFF;
    struct udphdr *udp = data + XDP_L4_OFF_V6;
    if ((void *)(udp + 1) > data_end) return -1;
    __builtin_memcpy(eth->h_dest, next_hop, ETH_ALEN);
    __builtin_memcpy(eth->h_source, egress_address, ETH_ALEN);
    eth->h_proto = bpf_htons(ETH_P_IPV6);
    *ip = *template;
    __builtin_memcpy(&ip->saddr, saddr, 16);
    __builtin_memcpy(&ip->daddr, daddr, 16);
    ip->payload_len = bpf_htons((__u16)udp_length);
    udp->source = source;
    udp->dest = dest;
    udp->len = bpf_htons((__u16)udp_length);
    udp->check = 0;
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
    return xdp_fix_udp_checksum(ctx, XDP_L4_OFF_V6, sum, udp_length);
}

// Writes the ChannelData header behind the UDP header.
static __always_inline int xdp_write_channel_data(struct xdp_md *ctx, __u32 l4_off, __be16 channel, __u32 payload) {
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    __be16 *header = data + l4_off + sizeof(struct udphdr);
    if ((void *)(header + 2) > data_end) return -1;
    header[0] = channel;
    header[1] = bpf_htons((__u16)payload);
    return 0;
}

static __always_inline int handle_xdp_v4(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    struct iphdr *ip = data + XDP_L3_OFF;
    struct udphdr *udp = data + XDP_L4_OFF;
    if ((void *)(udp + 1) > data_end) return XDP_PASS;
    if (ip->protocol != IPPROTO_UDP) return XDP_PASS;
    if (ip->ihl != 5 || (ip->frag_off & bpf_htons(0x3fff)) != 0) return XDP_PASS;
    __u32 ip_length = bpf_ntohs(ip->tot_len);
    __u32 udp_length = bpf_ntohs(udp->len);
    if (ip_length > MAX_IP_LENGTH || data + XDP_L3_OFF + ip_length > data_end ||
        udp_length != ip_length - sizeof(struct iphdr) || udp_length < sizeof(*udp))
        return XDP_PASS;
    __u32 payload = udp_length - sizeof(*udp);
    __u64 now = now_seconds();
    struct iphdr received = *ip;

    __u8 *first = data + XDP_L4_OFF + sizeof(struct udphdr);
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
        // No such channel: perhaps a peer's data that starts like ChannelData.
        if (!found) goto from_peer;
        __u32 length = ((__u32)first[2] << 8) | first[3];
        struct relayd_channel_value_v4 route = *found;
        if (length + 4 != payload || now >= route.expiry) return XDP_PASS;
        struct relayd_peer_key_v4 next_key = {
            .peer_ip = route.relay_ip,
            .relay_ip = route.peer_ip,
            .peer_port = route.relay_port,
            .relay_port = route.peer_port,
        };
        struct relayd_peer_value_v4 *next = bpf_map_lookup_elem(&relayd_peers_v4, &next_key);
        if (next) {
            struct relayd_peer_value_v4 target = *next;
            // Relay to relay: only when this program can finish it, else the TC program does.
            if (!usable(target.expiry, target.flags, target.egress_ifindex, now)) goto to_peer;
            if (!XDP_SENDABLE(target, now)) return XDP_PASS;
            if (xdp_write_channel_data(ctx, XDP_L4_OFF, target.channel, length) < 0 ||
                xdp_finish(ctx, &received, target.next_hop, target.egress_address, target.server_ip, target.client_ip,
                           target.server_port, target.client_port, udp_length) < 0)
                return XDP_DROP;
            add(bpf_map_lookup_elem(&relayd_channel_counters_v4, &key), length);
            add(bpf_map_lookup_elem(&relayd_peer_counters_v4, &next_key), length);
            count(RELAYD_STAT_TO_PEER);
            count(RELAYD_STAT_TO_CLIENT);
            count(RELAYD_STAT_RELAY_TO_RELAY);
            count(RELAYD_STAT_XDP);
            return bpf_redirect(target.egress_ifindex, 0);
        }
    to_peer:
        if (!XDP_SENDABLE(route, now)) return XDP_PASS;
        // The ChannelData header leaves: the frame starts 4 bytes later, headers written anew.
        if (bpf_xdp_adjust_head(ctx, 4) < 0) return XDP_PASS;
        if (xdp_finish(ctx, &received, route.next_hop, route.egress_address, route.relay_ip, route.peer_ip,
                       route.relay_port, route.peer_port, udp_length - 4) < 0)
            return XDP_DROP;
        add(bpf_map_lookup_elem(&relayd_channel_counters_v4, &key), length);
        count(RELAYD_STAT_TO_PEER);
        count(RELAYD_STAT_XDP);
        return bpf_redirect(route.egress_ifindex, 0);
    }

from_peer:;
    struct relayd_peer_key_v4 key = {
        .peer_ip = ip->saddr,
        .relay_ip = ip->daddr,
        .peer_port = udp->source,
        .relay_port = udp->dest,
    };
    struct relayd_peer_value_v4 *found = bpf_map_lookup_elem(&relayd_peers_v4, &key);
    if (!found || ip_length + 4 > MAX_IP_LENGTH) return XDP_PASS;
    struct relayd_peer_value_v4 route = *found;
    if (!XDP_SENDABLE(route, now) || (route.flags & RELAYD_ROUTE_RELAYED_PEER)) return XDP_PASS;
    // 4 bytes open at the front for the ChannelData header: headers written anew.
    if (bpf_xdp_adjust_head(ctx, -4) < 0) return XDP_PASS;
    if (xdp_write_channel_data(ctx, XDP_L4_OFF, route.channel, payload) < 0 ||
        xdp_finish(ctx, &received, route.next_hop, route.egress_address, route.server_ip, route.client_ip,
                   route.server_port, route.client_port, udp_length + 4) < 0)
        return XDP_DROP;
    add(bpf_map_lookup_elem(&relayd_peer_counters_v4, &key), payload);
    count(RELAYD_STAT_TO_CLIENT);
    count(RELAYD_STAT_XDP);
    return bpf_redirect(route.egress_ifindex, 0);
}

static __always_inline int handle_xdp_v6(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    struct ipv6hdr *ip = data + XDP_L3_OFF;
    struct udphdr *udp = data + XDP_L4_OFF_V6;
    if ((void *)(udp + 1) > data_end) return XDP_PASS;
    // Extension headers (a fragment header among them) are the stack's.
    if (ip->nexthdr != IPPROTO_UDP) return XDP_PASS;
    __u32 udp_length = bpf_ntohs(udp->len);
    if (udp_length != bpf_ntohs(ip->payload_len) || udp_length < sizeof(*udp) ||
        udp_length + sizeof(struct ipv6hdr) > MAX_IP_LENGTH || data + XDP_L4_OFF_V6 + udp_length > data_end)
        return XDP_PASS;
    __u32 payload = udp_length - sizeof(*udp);
    __u64 now = now_seconds();
    struct ipv6hdr received = *ip;

    __u8 *first = data + XDP_L4_OFF_V6 + sizeof(struct udphdr);
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
        if (!found) goto from_peer;
        __u32 length = ((__u32)first[2] << 8) | first[3];
        struct relayd_channel_value_v6 route = *found;
        if (length + 4 != payload || now >= route.expiry) return XDP_PASS;
        struct relayd_peer_key_v6 next_key = {.peer_port = route.relay_port, .relay_port = route.peer_port};
        __builtin_memcpy(next_key.peer_ip, route.relay_ip, 16);
        __builtin_memcpy(next_key.relay_ip, route.peer_ip, 16);
        struct relayd_peer_value_v6 *next = bpf_map_lookup_elem(&relayd_peers_v6, &next_key);
        if (next) {
            struct relayd_peer_value_v6 target = *next;
            if (!usable(target.expiry, target.flags, target.egress_ifindex, now)) goto to_peer;
            if (!XDP_SENDABLE(target, now)) return XDP_PASS;
            if (xdp_write_channel_data(ctx, XDP_L4_OFF_V6, target.channel, length) < 0 ||
                xdp_finish_v6(ctx, &received, target.next_hop, target.egress_address, target.server_ip,
                              target.client_ip, target.server_port, target.client_port, udp_length) < 0)
                return XDP_DROP;
            add(bpf_map_lookup_elem(&relayd_channel_counters_v6, &key), length);
            add(bpf_map_lookup_elem(&relayd_peer_counters_v6, &next_key), length);
            count(RELAYD_STAT_TO_PEER);
            count(RELAYD_STAT_TO_CLIENT);
            count(RELAYD_STAT_RELAY_TO_RELAY);
            count(RELAYD_STAT_XDP);
            return bpf_redirect(target.egress_ifindex, 0);
        }
    to_peer:
        if (!XDP_SENDABLE(route, now)) return XDP_PASS;
        if (bpf_xdp_adjust_head(ctx, 4) < 0) return XDP_PASS;
        if (xdp_finish_v6(ctx, &received, route.next_hop, route.egress_address, route.relay_ip, route.peer_ip,
                          route.relay_port, route.peer_port, udp_length - 4) < 0)
            return XDP_DROP;
        add(bpf_map_lookup_elem(&relayd_channel_counters_v6, &key), length);
        count(RELAYD_STAT_TO_PEER);
        count(RELAYD_STAT_XDP);
        return bpf_redirect(route.egress_ifindex, 0);
    }

from_peer:;
    struct relayd_peer_key_v6 key = {.peer_port = udp->source, .relay_port = udp->dest};
    __builtin_memcpy(key.peer_ip, &ip->saddr, 16);
    __builtin_memcpy(key.relay_ip, &ip->daddr, 16);
    struct relayd_peer_value_v6 *found = bpf_map_lookup_elem(&relayd_peers_v6, &key);
    if (!found || udp_length + sizeof(struct ipv6hdr) + 4 > MAX_IP_LENGTH) return XDP_PASS;
    struct relayd_peer_value_v6 route = *found;
    if (!XDP_SENDABLE(route, now) || (route.flags & RELAYD_ROUTE_RELAYED_PEER)) return XDP_PASS;
    if (bpf_xdp_adjust_head(ctx, -4) < 0) return XDP_PASS;
    if (xdp_write_channel_data(ctx, XDP_L4_OFF_V6, route.channel, payload) < 0 ||
        xdp_finish_v6(ctx, &received, route.next_hop, route.egress_address, route.server_ip, route.client_ip,
                      route.server_port, route.client_port, udp_length + 4) < 0)
        return XDP_DROP;
    add(bpf_map_lookup_elem(&relayd_peer_counters_v6, &key), payload);
    count(RELAYD_STAT_TO_CLIENT);
    count(RELAYD_STAT_XDP);
    return bpf_redirect(route.egress_ifindex, 0);
}

SEC("xdp")
int relayd_xdp(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > data_end) return XDP_PASS;
    if (eth->h_proto == bpf_htons(ETH_P_IP)) return handle_xdp_v4(ctx);
    if (eth->h_proto == bpf_htons(ETH_P_IPV6)) return handle_xdp_v6(ctx);
    return XDP_PASS;
}
