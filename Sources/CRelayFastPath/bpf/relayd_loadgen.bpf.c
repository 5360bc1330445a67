// SPDX-License-Identifier: Apache-2.0
// The benchmark's load generator and sink (docs/kernel-fast-path.md, "Max rate"). Not part of
// relayd: scripts/bench-fastpath.sh uses it, through the kernel-loadgen tool, to offer a relay
// more packets than user-space endpoints on a 2-vCPU machine can send and receive.
//
// relayd_loadgen_transmit runs under BPF_PROG_TEST_RUN with BPF_F_TEST_XDP_LIVE_FRAMES: each
// pass copies the template's headers into the frame (Ethernet, IPv4 without options, UDP with a
// zero checksum, which IPv4 allows), writes the next flow's ports, its channel number if the
// payload is ChannelData (RFC 8656 §12.4), and a stamp, and transmits the frame (XDP_TX).
//
// relayd_loadgen_sink, attached to an endpoint's interface, drops every IPv4 UDP frame whose
// payload (or ChannelData's) starts with the stamp's magic, after counting it and its one-way
// latency. Everything else passes.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "relayd_loadgen.h"

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, RELAYD_LOADGEN_MAX_FLOWS);
    __type(key, __u32);
    __type(value, struct relayd_loadgen_flow);
} relayd_loadgen_flows SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct relayd_loadgen_config);
} relayd_loadgen_config SEC(".maps");

struct relayd_loadgen_header {
    __u8 bytes[RELAYD_LOADGEN_HEADER_BYTES];
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct relayd_loadgen_header);
} relayd_loadgen_template SEC(".maps");

// The generator's position in the flow list, per CPU.
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} relayd_loadgen_next SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct relayd_loadgen_tally);
} relayd_loadgen_tally SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, RELAYD_LOADGEN_BUCKETS);
    __type(key, __u32);
    __type(value, __u64);
} relayd_loadgen_latency SEC(".maps");

#define UDP_PAYLOAD (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))
#define CHANNEL_HEADER 4

SEC("xdp")
int relayd_loadgen_transmit(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    __u32 zero = 0;
    struct relayd_loadgen_config *config = bpf_map_lookup_elem(&relayd_loadgen_config, &zero);
    struct relayd_loadgen_header *template = bpf_map_lookup_elem(&relayd_loadgen_template, &zero);
    __u64 *next = bpf_map_lookup_elem(&relayd_loadgen_next, &zero);
    if (!config || !template || !next || config->flow_count == 0 || data + RELAYD_LOADGEN_HEADER_BYTES > data_end)
        return XDP_ABORTED;
    __builtin_memcpy(data, template->bytes, RELAYD_LOADGEN_HEADER_BYTES);
    __u32 index = (__u32)(*next % config->flow_count);
    *next += 1;
    struct relayd_loadgen_flow *flow = bpf_map_lookup_elem(&relayd_loadgen_flows, &index);
    if (!flow)
        return XDP_ABORTED;
    struct udphdr *udp = data + sizeof(struct ethhdr) + sizeof(struct iphdr);
    if ((void *)(udp + 1) > data_end)
        return XDP_ABORTED;
    udp->source = flow->source_port;
    udp->dest = flow->destination_port;
    struct relayd_loadgen_stamp *stamp;
    if (flow->channel) {
        __be16 *channel = data + UDP_PAYLOAD;
        stamp = data + UDP_PAYLOAD + CHANNEL_HEADER;
        if ((void *)(stamp + 1) > data_end)
            return XDP_ABORTED;
        *channel = flow->channel;
    } else {
        stamp = data + UDP_PAYLOAD;
        if ((void *)(stamp + 1) > data_end)
            return XDP_ABORTED;
    }
    stamp->magic = bpf_htonl(RELAYD_LOADGEN_MAGIC);
    stamp->flow = index;
    stamp->sent_ns = bpf_ktime_get_ns();
    return XDP_TX;
}

SEC("xdp")
int relayd_loadgen_sink(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data;
    void *data_end = (void *)(long)ctx->data_end;
    struct ethhdr *eth = data;
    struct iphdr *ip = data + sizeof(struct ethhdr);
    struct udphdr *udp = data + sizeof(struct ethhdr) + sizeof(struct iphdr);
    if ((void *)(udp + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 ||
        ip->protocol != IPPROTO_UDP)
        return XDP_PASS;
    struct relayd_loadgen_stamp *stamp = data + UDP_PAYLOAD;
    if ((void *)(stamp + 1) > data_end)
        return XDP_PASS;
    if (stamp->magic != bpf_htonl(RELAYD_LOADGEN_MAGIC)) {
        stamp = data + UDP_PAYLOAD + CHANNEL_HEADER;
        if ((void *)(stamp + 1) > data_end || stamp->magic != bpf_htonl(RELAYD_LOADGEN_MAGIC))
            return XDP_PASS;
    }
    __u32 zero = 0;
    struct relayd_loadgen_tally *tally = bpf_map_lookup_elem(&relayd_loadgen_tally, &zero);
    if (tally) {
        tally->packets += 1;
        tally->bytes += bpf_ntohs(udp->len) - sizeof(struct udphdr);
    }
    __u64 elapsed_us = (bpf_ktime_get_ns() - stamp->sent_ns) / 1000;
    __u32 bucket = elapsed_us < RELAYD_LOADGEN_BUCKETS - 1 ? (__u32)elapsed_us : RELAYD_LOADGEN_BUCKETS - 1;
    __u64 *count = bpf_map_lookup_elem(&relayd_loadgen_latency, &bucket);
    if (count)
        *count += 1;
    return XDP_DROP;
}

char _license[] SEC("license") = "Apache-2.0";
