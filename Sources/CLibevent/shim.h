#ifndef RELAYD_CLIBEVENT_SHIM_H
#define RELAYD_CLIBEVENT_SHIM_H
/* System headers first: see docs/building.md (fd_set vs SwiftGlibc). */
#include <sys/types.h>
#include <sys/select.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <arpa/inet.h>
#include <event2/event.h>
#include <event2/util.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <ifaddrs.h>
#include <time.h>
#include <string.h>
#include <stdint.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <linux/filter.h>

/* recvmmsg/sendmmsg need _GNU_SOURCE, which Swift's Glibc module is not built with.
   Same layout as glibc's struct mmsghdr, bound to the glibc symbols by asm label. */
struct relayd_mmsghdr {
    struct msghdr msg_hdr;
    unsigned int msg_len;
};
extern int relayd_recvmmsg(int fd, struct relayd_mmsghdr *vmessages, unsigned int vlen, int flags,
                           struct timespec *timeout) __asm__("recvmmsg");
extern int relayd_sendmmsg(int fd, struct relayd_mmsghdr *vmessages, unsigned int vlen, int flags)
    __asm__("sendmmsg");
/* setns(2) also needs _GNU_SOURCE; relay-bench opens sockets in other network namespaces. */
extern int relayd_setns(int fd, int nstype) __asm__("setns");
#define RELAYD_CLONE_NEWNET 0x40000000
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

/* One entry of a socket's error queue (IP_RECVERR / IPV6_RECVERR, ip(7) and ipv6(7)): an ICMP
   error for a datagram the socket sent, or a local one (EMSGSIZE under IP_PMTUDISC_DO). The
   kernel names the datagram's destination in `destination` (address and port of the quoted
   packet) and the error in the extended error's fields. Read with relayd_read_socket_error. */
struct relayd_socket_error {
    struct sockaddr_storage destination;
    uint32_t error;  /* ee_errno */
    uint32_t info;   /* ee_info: the next-hop MTU for "too big" */
    uint8_t origin;  /* SO_EE_ORIGIN_LOCAL, _ICMP or _ICMP6 */
    uint8_t type;
    uint8_t code;
};

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

/* Chooses the socket of a UDP listener's SO_REUSEPORT group for each datagram by its source
   address and port, among the first `loops` sockets only: the listeners, one per loop, which
   join the group first. Without it the kernel picks by a hash modulo the group's size, so a
   socket that joins later (a moved mobile client's connected socket, docs/mobility.md) would move
   other clients to other loops, and would take their datagrams itself until it is connected.
   A classic BPF program (no privilege needed); it reads the source address's last word and the
   source port from the network header (no IPv4 options, no IPv6 extension headers assumed: at
   worst such a datagram goes to another listener). Returns setsockopt's result. */
static inline int relayd_attach_listener_selector(int fd, int ipv6, unsigned int loops) {
    unsigned int address = ipv6 ? 20 : 12, port = ipv6 ? 40 : 20;
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (unsigned int)SKF_NET_OFF + address),
        BPF_STMT(BPF_MISC | BPF_TAX, 0),
        BPF_STMT(BPF_LD | BPF_H | BPF_ABS, (unsigned int)SKF_NET_OFF + port),
        BPF_STMT(BPF_ALU | BPF_MUL | BPF_K, 0x9E3779B1u),
        BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0),
        BPF_STMT(BPF_MISC | BPF_TAX, 0),
        BPF_STMT(BPF_ALU | BPF_RSH | BPF_K, 16),
        BPF_STMT(BPF_ALU | BPF_XOR | BPF_X, 0),
        BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, loops > 0 ? loops : 1),
        BPF_STMT(BPF_RET | BPF_A, 0),
    };
    struct sock_fprog program = { (unsigned short)(sizeof code / sizeof code[0]), code };
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &program, sizeof program);
}

/* Sends one datagram with DF set / unfragmented (a Send indication's DONT-FRAGMENT, RFC 8656
   §11.2) from a socket that does not do so for every datagram. IPv6: the IPV6_DONTFRAG ancillary
   item on this datagram only. IPv4 has no such item: IP_MTU_DISCOVER is set to IP_PMTUDISC_DO
   for this send and put back. Returns sendmsg's result (-1 with errno on failure). */
static inline ssize_t relayd_send_dont_fragment(int fd, const void *bytes, size_t length,
                                                const struct sockaddr *to, socklen_t to_length) {
    struct iovec iov = { (void *)bytes, length };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_name = (void *)to;
    msg.msg_namelen = to_length;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (to->sa_family == AF_INET6) {
        char control[CMSG_SPACE(sizeof(int))];
        memset(control, 0, sizeof control);
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = IPPROTO_IPV6;
        c->cmsg_type = IPV6_DONTFRAG;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        int one = 1;
        memcpy(CMSG_DATA(c), &one, sizeof one);
        return sendmsg(fd, &msg, 0);
    }
    int previous = IP_PMTUDISC_WANT;
    socklen_t size = sizeof previous;
    getsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &previous, &size);
    int on = IP_PMTUDISC_DO;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &on, sizeof on);
    ssize_t sent = sendmsg(fd, &msg, 0);
    int saved = errno;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &previous, sizeof previous);
    errno = saved;
    return sent;
}

/* Takes one entry off `fd`'s error queue without blocking: 1 when it carried an extended error
   (filled into `out`), 0 when it carried none, -1 when the queue is empty (or on any error). */
static inline int relayd_read_socket_error(int fd, struct relayd_socket_error *out) {
    char control[512];
    char payload[1];
    struct iovec iov = { payload, sizeof payload };
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    memset(out, 0, sizeof *out);
    msg.msg_name = &out->destination;
    msg.msg_namelen = sizeof out->destination;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        int ip = c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR;
        int ip6 = c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_RECVERR;
        if (!ip && !ip6) continue;
        if (c->cmsg_len < CMSG_LEN(sizeof(struct sock_extended_err))) continue;
        struct sock_extended_err ee;
        memcpy(&ee, CMSG_DATA(c), sizeof ee);
        out->error = ee.ee_errno;
        out->info = ee.ee_info;
        out->origin = ee.ee_origin;
        out->type = ee.ee_type;
        out->code = ee.ee_code;
        return 1;
    }
    return 0;
}
#endif
