// The benchmark load generator's map layouts (bpf/relayd_loadgen.bpf.c), shared with the
// kernel-loadgen tool that fills and reads them (docs/kernel-fast-path.md, "Max rate"). Not part
// of relayd: the program only serves scripts/bench-fastpath.sh.
//
// Two XDP programs:
// - the generator, run with BPF_PROG_TEST_RUN in live-frames mode: each pass writes the
//   template's headers, one flow's ports (and channel number) and a stamp into the frame, and
//   transmits it out of the interface the run names (XDP_TX). It writes the headers every time
//   because the kernel recycles the pages of frames that come back within the same run (the relay
//   and the sink drop or rewrite them) without restoring their contents;
// - the sink, attached to the endpoint's interface: it counts the frames that carry a stamp,
//   records their one-way latency and drops them; everything else passes.
// A live test run with more than one pass puts its program into the kernel's XDP dispatcher and
// takes it out again, each time waiting for an RCU grace period (tens of milliseconds), unless
// the program is there already. So the generator is also attached, to an otherwise unused
// interface (an "anchor"), for as long as it runs.
#ifndef RELAYD_LOADGEN_H
#define RELAYD_LOADGEN_H

#include "relayd_fastpath.h"

#define RELAYD_LOADGEN_MAX_FLOWS 1024
// "RLG1": the first word of every generated payload (after the ChannelData header, if any).
#define RELAYD_LOADGEN_MAGIC 0x524c4731u
// One-microsecond latency buckets; the last also holds everything slower.
#define RELAYD_LOADGEN_BUCKETS 2048

// One flow: the UDP ports to write, and the channel number (0: the payload is not ChannelData).
// Network byte order.
struct relayd_loadgen_flow {
    relayd_u16 source_port;
    relayd_u16 destination_port;
    relayd_u16 channel;
    relayd_u16 reserved;
};

// How many flows there are; the generator takes them in turn.
struct relayd_loadgen_config {
    relayd_u32 flow_count;
    relayd_u32 reserved;
};

// The template's first bytes (Ethernet, IPv4, UDP, the ChannelData header if any, the stamp's
// place), which the generator copies into every frame. The payload is at least 32 bytes, so a
// frame always has this many.
#define RELAYD_LOADGEN_HEADER_BYTES 64

// What the generator writes at the start of the payload.
struct relayd_loadgen_stamp {
    relayd_u32 magic;  // RELAYD_LOADGEN_MAGIC, network byte order
    relayd_u32 flow;
    relayd_u64 sent_ns;  // bpf_ktime_get_ns() (CLOCK_MONOTONIC) when generated
};

// The sink's tally, per CPU. Its latency histogram is a map of its own (per-CPU array,
// RELAYD_LOADGEN_BUCKETS counters).
struct relayd_loadgen_tally {
    relayd_u64 packets;
    relayd_u64 bytes;  // UDP payload bytes
};

#endif
