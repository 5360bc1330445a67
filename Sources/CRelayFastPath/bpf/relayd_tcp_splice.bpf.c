// SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
// (Dual-licensed, unlike the rest of relayd: the kernel lets only programs under a
// GPL-compatible license read its `struct tcp_sock`, which the in-flight bound needs.)
// RFC 6062 pipes spliced in the kernel (docs/tcp-relay.md, "In the kernel"). The stream verdict
// program of relayd's sockmap: a pipe's two plain-TCP sockets sit in the sockmap at slots 2k
// (client) and 2k+1 (peer), and each byte a side receives is either redirected to the other
// side's send queue, without a copy through user space, or passed to relayd, which reads it
// from the socket as before and writes it on itself. It passes when:
//   - relayd has not yet read and written on everything passed before (`passed` != `gate`): a
//     redirected byte must never overtake one relayd holds;
//   - the target's send queue has no room for the segment: the memory its queue holds (unsent
//     and unacknowledged), plus what was redirected to it and is still in the kernel's queue in
//     front of it, plus the segment, must stay under half its send buffer (where the kernel's
//     worker finds the socket writable and writes the segment at once) and within `limit`. The kernel queues redirected bytes on the target without
//     bound and without closing the source's TCP window, while passed bytes count against the
//     source's receive buffer, so passing is what stalls a slow reader's sender. A redirect into
//     a queue the worker could not empty would also hold up the target's own passed bytes,
//     which the kernel puts behind it, uncharged (docs/tcp-relay.md);
//   - `limit` is 0 (the allocation ended, or the pipe is being let go);
//   - the segment carries no bytes (a FIN: relayd sees the end of the stream).
// A segment that begins with bytes the program already saw (a retransmission that overlaps data
// before it, which the kernel queues whole; or a segment the kernel hands to the program a second
// time, grown by later segments coalesced into it) first loses those bytes, 4095 at a time (the
// most `bpf_skb_adjust_room` takes from an sk_skb's head), and is then redirected or passed as
// any other. If they cannot be taken out (the kernel lacks memory, or more than TRIM_CALLS *
// TRIM_STEP bytes are old), or the segment is old entirely (which no run has shown: taking all
// of it out is not tried), the segment passes as it is and `broken` tells relayd, which closes
// the pipe rather than relay bytes twice (docs/tcp-relay.md, "Retransmitted bytes").
// The counts are kept under the value's spin lock, so relayd reads exact totals, and one that
// set `limit` to 0 and then reads them knows no later redirect will be counted.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "relayd_tcp_splice.h"

// The kernel's structs, relocated by libbpf from the running kernel's BTF (CO-RE); a tcp_sock
// begins with its sock.
struct sock {
    int sk_sndbuf;
    int sk_wmem_queued;
} __attribute__((preserve_access_index));

struct tcp_sock {
    __u32 write_seq;
    __u32 copied_seq;
} __attribute__((preserve_access_index));

// A segment's TCP control block begins with its first and end sequence numbers.
struct sk_buff {
    char cb[48];
} __attribute__((preserve_access_index));

extern void *bpf_cast_to_kern_ctx(void *ctx) __ksym;

struct {
    __uint(type, BPF_MAP_TYPE_SOCKMAP);
    __uint(max_entries, RELAYD_SPLICE_SLOTS);
    __type(key, __u32);
    __type(value, __u64);
} relayd_splice_sockets SEC(".maps");

// Socket cookie -> slot.
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, RELAYD_SPLICE_SLOTS);
    __type(key, __u64);
    __type(value, __u32);
} relayd_splice_slots SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, RELAYD_SPLICE_SLOTS);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, struct relayd_splice_control);
} relayd_splice_control SEC(".maps");

// The program's view of the counters: the same layout with the kernel's lock type.
struct splice_counters {
    struct bpf_spin_lock lock;
    __u32 base_write;
    __u64 redirected;
    __u64 passed;
    __u32 base_set;
    __u32 next_seq;
    __u32 seq_set;
    __u32 reserved;
    __u64 old_bytes;
};
_Static_assert(sizeof(struct splice_counters) == sizeof(struct relayd_splice_counters), "counters layout");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, RELAYD_SPLICE_SLOTS);
    __type(key, __u32);
    __type(value, struct splice_counters);
} relayd_splice_counters SEC(".maps");

// The most `bpf_skb_adjust_room` takes from an sk_skb's head in one call, and the most such
// calls for one segment: 2,096,640 old bytes, where the largest segment seen held 325,800
// (docs/tcp-relay.md, "Retransmitted bytes").
#define TRIM_STEP 4095
#define TRIM_CALLS 512

// A segment whose head loses TRIM_STEP old bytes a `bpf_loop` round.
struct trim {
    struct __sk_buff *skb;
    __u32 failed;
};

static long trim_step(__u32 index, void *context) {
    struct trim *trim = context;
    if (bpf_skb_adjust_room(trim->skb, -TRIM_STEP, 0, 0) == 0) return 0;
    trim->failed = 1;
    return 1;
}

// Takes `bytes` (fewer than the segment holds) from the segment's head: 0, or -1 if the kernel
// could not (it lacks memory) or they are more than TRIM_CALLS * TRIM_STEP. The rounds run in a
// `bpf_loop`, which the verifier checks once, however many there are (a failed round stops it
// and says so in `failed`: its return value counts the rounds run).
static int take_out(struct __sk_buff *skb, __u32 bytes) {
    if (bytes > TRIM_CALLS * TRIM_STEP) return -1;
    __u32 rounds = bytes / TRIM_STEP, rest = bytes % TRIM_STEP;
    struct trim trim = {.skb = skb, .failed = 0};
    if (rounds > 0 && bpf_loop(rounds, trim_step, &trim, 0) < 0) return -1;
    if (trim.failed) return -1;
    if (rest > 0 && bpf_skb_adjust_room(skb, -(__s32)rest, 0, 0) != 0) return -1;
    return 0;
}

SEC("sk_skb/stream_verdict")
int relayd_tcp_splice(struct __sk_buff *skb) {
    if (skb->len == 0) return SK_PASS;
    __u64 cookie = bpf_get_socket_cookie(skb);
    __u32 *found = bpf_map_lookup_elem(&relayd_splice_slots, &cookie);
    if (!found) return SK_PASS;
    __u32 slot = *found;
    struct relayd_splice_control *control = bpf_map_lookup_elem(&relayd_splice_control, &slot);
    struct splice_counters *counters = bpf_map_lookup_elem(&relayd_splice_counters, &slot);
    if (!control || !counters) return SK_PASS;

    // Where the segment begins (its TCP control block's first sequence number), and the
    // source's read position, which is where the first segment after the splice begins (relayd
    // read everything before it).
    struct sk_buff *kernel_skb = bpf_cast_to_kern_ctx(skb);
    __u32 seq = *(__u32 *)&kernel_skb->cb[0];
    __u32 first = seq;
    struct bpf_sock *own = bpf_map_lookup_elem(&relayd_splice_sockets, &slot);
    if (own) {
        struct tcp_sock *source = bpf_skc_to_tcp_sock(own);
        if (source) first = source->copied_seq;
        bpf_sk_release(own);
    }
    __u32 arrived = skb->len;
    bpf_spin_lock(&counters->lock);
    if (!counters->seq_set) {
        counters->next_seq = first;
        counters->seq_set = 1;
    }
    __s32 old = (__s32)(counters->next_seq - seq);
    if (old < 0) old = 0;
    if ((__u32)old < arrived) counters->next_seq = seq + arrived;
    bpf_spin_unlock(&counters->lock);
    if (old > 0 && ((__u32)old >= arrived || take_out(skb, (__u32)old) != 0)) {
        *(volatile __u32 *)&control->broken = 1;
        return SK_PASS;
    }
    __u32 length = skb->len;

    __u32 target = slot ^ 1;
    __u32 written = 0, room = 0, queued = 0;
    int reachable = 0;
    struct bpf_sock *sock = bpf_map_lookup_elem(&relayd_splice_sockets, &target);
    if (sock) {
        struct tcp_sock *tcp = bpf_skc_to_tcp_sock(sock);
        if (tcp) {
            written = tcp->write_seq;
            int sndbuf = ((struct sock *)tcp)->sk_sndbuf;
            int wmem = ((struct sock *)tcp)->sk_wmem_queued;
            room = sndbuf > 0 ? (__u32)sndbuf / 2 : 0;
            queued = wmem > 0 ? (__u32)wmem : 0;
            reachable = 1;
        }
        bpf_sk_release(sock);
    }
    int redirect = 0;
    bpf_spin_lock(&counters->lock);
    counters->old_bytes += (__u32)old;
    __u32 limit = *(volatile __u32 *)&control->limit;
    if (reachable && limit != 0 && counters->passed == *(volatile __u64 *)&control->gate) {
        __u32 by_relayd = (__u32)*(volatile __u64 *)&control->user_written;
        if (!counters->base_set) {
            // The target's write position when relayd had written `by_relayd` since the splice.
            counters->base_write = written - by_relayd;
            counters->base_set = 1;
        }
        // Redirected bytes not yet in the target's send queue (the kernel's queue before it).
        __s32 queued_before = (__s32)((__u32)counters->redirected + by_relayd - (written - counters->base_write));
        if (queued_before < 0) queued_before = 0;
        __u64 ahead = (__u64)queued + (__u32)queued_before + length;
        if (ahead <= room && ahead <= limit) {
            counters->redirected += length;
            redirect = 1;
        }
    }
    if (!redirect) counters->passed += length;
    bpf_spin_unlock(&counters->lock);
    if (redirect) return bpf_sk_redirect_map(skb, &relayd_splice_sockets, target, 0);
    return SK_PASS;
}

char _license[] SEC("license") = "Dual BSD/GPL";
