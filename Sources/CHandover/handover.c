// Descriptor passing and the heir's start for a live upgrade (docs/live-upgrade.md): the parts
// Swift cannot write itself (the CMSG_* macros, posix_spawn's file actions).
#define _GNU_SOURCE
#include "CHandover.h"

#include <errno.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

ssize_t relayd_handover_send(int sock, const void *data, size_t len, const int *fds, int nfds) {
    if (nfds < 0 || nfds > RELAYD_HANDOVER_MAX_FDS) {
        errno = EINVAL;
        return -1;
    }
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int) * RELAYD_HANDOVER_MAX_FDS)];
        struct cmsghdr align;
    } control;
    if (nfds > 0) {
        memset(&control, 0, sizeof(control));
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t sent;
    do {
        sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    return sent;
}

ssize_t relayd_handover_recv(int sock, void *data, size_t cap, int *fds, int max_fds, int *nfds) {
    *nfds = 0;
    struct iovec iov = {.iov_base = data, .iov_len = cap};
    union {
        char buf[CMSG_SPACE(sizeof(int) * RELAYD_HANDOVER_MAX_FDS)];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof(control.buf)};
    ssize_t got;
    do {
        got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    } while (got < 0 && errno == EINTR);
    if (got < 0) return -1;
    int count = 0;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
        int n = (int)((cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int *received = (int *)CMSG_DATA(cmsg);
        for (int i = 0; i < n; i++) {
            if (count < max_fds) {
                fds[count++] = received[i];
            } else {
                close(received[i]);
                msg.msg_flags |= MSG_CTRUNC;
            }
        }
    }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        for (int i = 0; i < count; i++) close(fds[i]);
        errno = EMSGSIZE;
        return -1;
    }
    *nfds = count;
    return got;
}

pid_t relayd_handover_spawn(const char *path, char *const argv[], char *const envp[], int channel) {
    posix_spawn_file_actions_t actions;
    if (posix_spawn_file_actions_init(&actions) != 0) return -1;
    int failed = 0;
    if (channel == 3) {
        // dup2 onto itself does not clear close-on-exec: go through a spare descriptor.
        failed |= posix_spawn_file_actions_adddup2(&actions, channel, 4);
        failed |= posix_spawn_file_actions_adddup2(&actions, 4, 3);
        failed |= posix_spawn_file_actions_addclose(&actions, 4);
    } else {
        failed |= posix_spawn_file_actions_adddup2(&actions, channel, 3);
    }
    failed |= posix_spawn_file_actions_addclosefrom_np(&actions, 4);
    pid_t pid = -1;
    if (failed == 0) {
        int error = posix_spawn(&pid, path, &actions, NULL, argv, envp);
        if (error != 0) {
            errno = error;
            pid = -1;
        }
    } else {
        errno = failed;
    }
    posix_spawn_file_actions_destroy(&actions);
    return pid;
}
