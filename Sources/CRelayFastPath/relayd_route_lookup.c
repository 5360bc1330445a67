#include "relayd_route_lookup.h"

#include <errno.h>
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

int relayd_route_output_interface(int family, const unsigned char *destination, const unsigned char *source) {
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

    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return -errno;
    struct timeval timeout = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(fd, &request, request.header.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    // The answer is one RTM_NEWROUTE message, or an error.
    union {
        struct nlmsghdr header;
        char bytes[4096];
    } answer;
    ssize_t received = recv(fd, &answer, sizeof(answer), 0);
    int error = errno;
    close(fd);
    if (received < 0) return -error;
    int left = (int)received;
    for (struct nlmsghdr *message = &answer.header; NLMSG_OK(message, left); message = NLMSG_NEXT(message, left)) {
        if (message->nlmsg_type == NLMSG_ERROR) {
            if (message->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr))) return -EPROTO;
            const struct nlmsgerr *failure = NLMSG_DATA(message);
            return failure->error < 0 ? failure->error : -ENOENT;
        }
        if (message->nlmsg_type != RTM_NEWROUTE || message->nlmsg_len < NLMSG_LENGTH(sizeof(struct rtmsg))) continue;
        struct rtmsg *route = NLMSG_DATA(message);
        int attributes = (int)RTM_PAYLOAD(message);
        for (struct rtattr *a = RTM_RTA(route); RTA_OK(a, attributes); a = RTA_NEXT(a, attributes)) {
            if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) >= sizeof(int)) {
                int ifindex;
                memcpy(&ifindex, RTA_DATA(a), sizeof(ifindex));
                return ifindex;
            }
        }
    }
    return -ENOENT;
}
