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
#include <event2/listener.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <ifaddrs.h>
#include <time.h>
#include <string.h>
#include <stdint.h>
#include <linux/errqueue.h>

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
