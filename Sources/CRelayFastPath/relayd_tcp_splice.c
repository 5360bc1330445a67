#include "relayd_tcp_splice.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <bpf/bpf.h>

int relayd_splice_read_counters(int map_fd, uint32_t slot, uint64_t *redirected, uint64_t *passed,
                                uint64_t *old_bytes) {
    struct relayd_splice_counters value;
    if (bpf_map_lookup_elem_flags(map_fd, &slot, &value, BPF_F_LOCK) != 0) return errno ? -errno : -1;
    *redirected = value.redirected;
    *passed = value.passed;
    *old_bytes = value.old_bytes;
    return 0;
}

int relayd_splice_reset_counters(int map_fd, uint32_t slot) {
    struct relayd_splice_counters value;
    memset(&value, 0, sizeof value);
    if (bpf_map_update_elem(map_fd, &slot, &value, BPF_F_LOCK) != 0) return errno ? -errno : -1;
    return 0;
}

static int acked_bytes(int socket, uint64_t *acked) {
    struct tcp_info info;
    socklen_t length = sizeof info;
    memset(&info, 0, sizeof info);
    if (getsockopt(socket, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -1;
    if (length < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof info.tcpi_bytes_acked) return -1;
    *acked = info.tcpi_bytes_acked;
    return 0;
}

int64_t relayd_tcp_written_bytes(int socket) {
    // Two system calls: an acknowledgement between them would make the sum short, so the
    // acknowledged count is read on both sides of the queue's and must agree.
    for (int attempt = 0; attempt < 16; attempt++) {
        uint64_t before = 0, after = 0;
        int unacknowledged = 0;
        if (acked_bytes(socket, &before) != 0) return -1;
        if (ioctl(socket, SIOCOUTQ, &unacknowledged) != 0) return -1;
        if (acked_bytes(socket, &after) != 0) return -1;
        if (before == after) return (int64_t)after + unacknowledged;
    }
    return -1;
}

int relayd_tcp_unread_bytes(int socket) {
    int unread = 0;
    if (ioctl(socket, FIONREAD, &unread) != 0) return -1;
    return unread;
}

int relayd_tcp_established(int socket) {
    struct tcp_info info;
    socklen_t length = sizeof info;
    memset(&info, 0, sizeof info);
    if (getsockopt(socket, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -1;
    return info.tcpi_state == 1;  // TCP_ESTABLISHED (include/net/tcp_states.h)
}

int relayd_splice_attach(int prog_fd, int map_fd) {
    if (bpf_prog_attach(prog_fd, map_fd, BPF_SK_SKB_STREAM_VERDICT, 0) != 0) return errno ? -errno : -1;
    return 0;
}
