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
#endif
