#include "relayd_route_lookup.h"

#include <errno.h>
#include <net/if_arp.h>
#include <linux/neighbour.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

// Appends an attribute to the request in `message` (whose buffer is large enough).
static void add_attribute(struct nlmsghdr *message, unsigned short type, const void *data, int length) {
    struct rtattr *attribute = (struct rtattr *)((char *)message + NLMSG_ALIGN(message->nlmsg_len));
    attribute->rta_type = type;
    attribute->rta_len = RTA_LENGTH(length);
    memcpy(RTA_DATA(attribute), data, length);
    message->nlmsg_len = NLMSG_ALIGN(message->nlmsg_len) + RTA_ALIGN(attribute->rta_len);
}

// The errno of an NLMSG_ERROR answer (negative; -EPROTO when truncated, -ENOENT for an
// acknowledgement where an answer was expected).
static int answer_error(const struct nlmsghdr *message) {
    if (message->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr))) return -EPROTO;
    const struct nlmsgerr *failure = NLMSG_DATA(message);
    return failure->error < 0 ? failure->error : -ENOENT;
}

// Sends `request` to the kernel over a fresh rtnetlink socket and reads the one answer into
// `answer`: its length, or a negative errno.
static int ask_kernel(struct nlmsghdr *request, void *answer, size_t capacity) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -errno;
    struct timeval timeout = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(fd, request, request->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    ssize_t received = recv(fd, answer, capacity, 0);
    int error = errno;
    close(fd);
    return received < 0 ? -error : (int)received;
}

int relayd_route_next_hop(int family, const unsigned char *destination, const unsigned char *source, int *ifindex,
                          unsigned char *gateway, int *has_gateway) {
    int length = family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
    if (length == 0) return -EAFNOSUPPORT;
    struct {
        struct nlmsghdr header;
        struct rtmsg route;
        char attributes[64];
    } request;
    memset(&request, 0, sizeof(request));
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
    request.header.nlmsg_type = RTM_GETROUTE;
    request.header.nlmsg_flags = NLM_F_REQUEST;
    request.header.nlmsg_seq = 1;
    request.route.rtm_family = (unsigned char)family;
    request.route.rtm_dst_len = (unsigned char)(length * 8);
    add_attribute(&request.header, RTA_DST, destination, length);
    if (source) {
        request.route.rtm_src_len = (unsigned char)(length * 8);
        add_attribute(&request.header, RTA_SRC, source, length);
    }
    union {
        struct nlmsghdr header;
        char bytes[4096];
    } answer;
    int left = ask_kernel(&request.header, &answer, sizeof(answer));
    if (left < 0) return left;
    *has_gateway = 0;
    for (struct nlmsghdr *message = &answer.header; NLMSG_OK(message, left); message = NLMSG_NEXT(message, left)) {
        if (message->nlmsg_type == NLMSG_ERROR) return answer_error(message);
        if (message->nlmsg_type != RTM_NEWROUTE || message->nlmsg_len < NLMSG_LENGTH(sizeof(struct rtmsg))) continue;
        struct rtmsg *route = NLMSG_DATA(message);
        int attributes = (int)RTM_PAYLOAD(message);
        int found = 0;
        for (struct rtattr *a = RTM_RTA(route); RTA_OK(a, attributes); a = RTA_NEXT(a, attributes)) {
            if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) >= sizeof(int)) {
                memcpy(ifindex, RTA_DATA(a), sizeof(int));
                found = 1;
            } else if (a->rta_type == RTA_GATEWAY && (int)RTA_PAYLOAD(a) == length && gateway) {
                memcpy(gateway, RTA_DATA(a), length);
                *has_gateway = 1;
            }
        }
        return found ? 0 : -ENOENT;
    }
    return -ENOENT;
}

int relayd_route_output_interface(int family, const unsigned char *destination, const unsigned char *source) {
    int ifindex = 0, has_gateway = 0;
    unsigned char gateway[16];
    int result = relayd_route_next_hop(family, destination, source, &ifindex, gateway, &has_gateway);
    return result < 0 ? result : ifindex;
}

int relayd_neighbour_address(int family, int ifindex, const unsigned char *address, unsigned char mac[6]) {
    int length = family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
    if (length == 0) return -EAFNOSUPPORT;
    struct {
        struct nlmsghdr header;
        struct ndmsg neighbour;
        char attributes[64];
    } request;
    memset(&request, 0, sizeof(request));
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg));
    request.header.nlmsg_type = RTM_GETNEIGH;
    request.header.nlmsg_flags = NLM_F_REQUEST;
    request.header.nlmsg_seq = 1;
    request.neighbour.ndm_family = (unsigned char)family;
    request.neighbour.ndm_ifindex = ifindex;
    add_attribute(&request.header, NDA_DST, address, length);
    union {
        struct nlmsghdr header;
        char bytes[4096];
    } answer;
    int left = ask_kernel(&request.header, &answer, sizeof(answer));
    if (left < 0) return left;
    const int usable = NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT;
    for (struct nlmsghdr *message = &answer.header; NLMSG_OK(message, left); message = NLMSG_NEXT(message, left)) {
        if (message->nlmsg_type == NLMSG_ERROR) return answer_error(message);
        if (message->nlmsg_type != RTM_NEWNEIGH || message->nlmsg_len < NLMSG_LENGTH(sizeof(struct ndmsg))) continue;
        struct ndmsg *neighbour = NLMSG_DATA(message);
        if (!(neighbour->ndm_state & usable)) return -ENOENT;
        int attributes = (int)(message->nlmsg_len - NLMSG_LENGTH(sizeof(struct ndmsg)));
        for (struct rtattr *a = (struct rtattr *)((char *)neighbour + NLMSG_ALIGN(sizeof(struct ndmsg)));
             RTA_OK(a, attributes); a = RTA_NEXT(a, attributes)) {
            if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6) {
                memcpy(mac, RTA_DATA(a), 6);
                return 0;
            }
        }
        return -ENOENT;
    }
    return -ENOENT;
}

int relayd_interface_address(int ifindex, unsigned char mac[6]) {
    struct ifreq request;
    memset(&request, 0, sizeof(request));
    if (!if_indextoname((unsigned)ifindex, request.ifr_name)) return -errno;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int result = ioctl(fd, SIOCGIFHWADDR, &request);
    int error = errno;
    close(fd);
    if (result < 0) return -error;
    if (request.ifr_hwaddr.sa_family != ARPHRD_ETHER) return -EAFNOSUPPORT;
    memcpy(mac, request.ifr_hwaddr.sa_data, 6);
    return 0;
}
