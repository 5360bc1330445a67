// RFC 6062 pipes spliced in the kernel (docs/tcp-relay.md, "In the kernel"): the layouts the
// sk_skb verdict program (bpf/relayd_tcp_splice.bpf.c) shares with relayd, and the few calls
// Swift makes through C (a map lookup under the value's spin lock, TCP_INFO's bytes_acked).
//
// A pipe holds two slots, 2k for its client's socket and 2k+1 for its peer's; each slot's
// entries describe the direction whose source is that socket.
#ifndef RELAYD_TCP_SPLICE_H
#define RELAYD_TCP_SPLICE_H

#include <linux/types.h>

#define RELAYD_SPLICE_SLOTS 32768

// Written by relayd, read by the program (a memory-mapped array).
struct relayd_splice_control {
    // The program redirects only while its `passed` count equals this: relayd sets it once it
    // has read, and written on, every byte the program passed to it.
    __u64 gate;
    // Bytes relayd wrote to the target socket itself since the splice began.
    __u64 user_written;
    // Bytes the target may hold (unsent, unacknowledged, or in the kernel's queue in front of
    // it) beyond which the program passes to relayd instead; 0 stops all redirects.
    __u32 limit;
    // Written by the program: 1 once it passed a segment with old bytes it could not take out
    // (docs/tcp-relay.md, "Retransmitted bytes"); the pipe cannot stay exact, relayd closes it.
    __u32 broken;
};

// Written by the program under `lock`, read by relayd with BPF_F_LOCK.
struct relayd_splice_counters {
    __u32 lock;  // struct bpf_spin_lock
    // The target's write_seq, less relayd's own writes, when the program first looked.
    __u32 base_write;
    __u64 redirected;
    __u64 passed;
    __u32 base_set;
    // The source's next sequence number: where the last segment the program saw ended (once
    // `seq_set`).
    __u32 next_seq;
    __u32 seq_set;
    __u32 reserved;
    // Bytes of retransmitted segments that the socket had received before, which the program
    // took out (docs/tcp-relay.md, "Retransmitted bytes").
    __u64 old_bytes;
};

#ifndef __bpf__
#include <stdint.h>

// The counters of `slot`, read under their lock. 0 or a negative errno.
int relayd_splice_read_counters(int map_fd, uint32_t slot, uint64_t *redirected, uint64_t *passed,
                                uint64_t *old_bytes);

// Zeroes the counters of `slot` (before its socket enters the sockmap). 0 or a negative errno.
int relayd_splice_reset_counters(int map_fd, uint32_t slot);

// Bytes written into `socket`'s send queue since it was connected: the peer's acknowledged bytes
// (TCP_INFO's tcpi_bytes_acked) plus the queue not yet acknowledged (SIOCOUTQ), read so that no
// acknowledgement falls between the two. -1 on error (or if acknowledgements kept arriving).
int64_t relayd_tcp_written_bytes(int socket);

// Bytes in `socket`'s receive queue not read yet (FIONREAD), -1 on error.
int relayd_tcp_unread_bytes(int socket);

// 1 if `socket` is a TCP connection in the ESTABLISHED state, 0 if not, -1 on error.
int relayd_tcp_established(int socket);

// Attaches `prog_fd` as the stream verdict program of the sockmap `map_fd`. 0 or a negative errno.
int relayd_splice_attach(int prog_fd, int map_fd);

static inline void relayd_splice_store_gate(struct relayd_splice_control *control, uint64_t value) {
    __atomic_store_n(&control->gate, value, __ATOMIC_SEQ_CST);
}
static inline void relayd_splice_store_written(struct relayd_splice_control *control, uint64_t value) {
    __atomic_store_n(&control->user_written, value, __ATOMIC_SEQ_CST);
}
static inline void relayd_splice_store_limit(struct relayd_splice_control *control, uint32_t value) {
    __atomic_store_n(&control->limit, value, __ATOMIC_SEQ_CST);
}
static inline uint32_t relayd_splice_load_broken(const struct relayd_splice_control *control) {
    return __atomic_load_n(&control->broken, __ATOMIC_SEQ_CST);
}
static inline uint64_t relayd_splice_load_gate(const struct relayd_splice_control *control) {
    return __atomic_load_n(&control->gate, __ATOMIC_SEQ_CST);
}
#endif

#endif
