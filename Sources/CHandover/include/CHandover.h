#ifndef RELAYD_CHANDOVER_H
#define RELAYD_CHANDOVER_H

#include <stddef.h>
#include <sys/types.h>

/// The most descriptors one SCM_RIGHTS message carries (the kernel's SCM_MAX_FD).
#define RELAYD_HANDOVER_MAX_FDS 253

/// Sends `len` bytes and `nfds` descriptors (at most RELAYD_HANDOVER_MAX_FDS) in one message on
/// a SOCK_SEQPACKET socket (unix(7), SCM_RIGHTS). Returns the bytes sent or -1 (errno set).
ssize_t relayd_handover_send(int sock, const void *data, size_t len, const int *fds, int nfds);

/// Receives one message: up to `cap` bytes into `data` and up to `max_fds` descriptors into
/// `fds` (count in `*nfds`), close-on-exec. A message cut short (data or descriptors) closes
/// what it brought and fails with EMSGSIZE. Returns the bytes received, 0 at end of stream, or
/// -1 (errno set).
ssize_t relayd_handover_recv(int sock, void *data, size_t cap, int *fds, int max_fds, int *nfds);

/// Starts `path` with `argv` and `envp` (NULL-terminated) as a new process whose descriptor 3
/// is `channel` and whose descriptors above 3 are closed (posix_spawn). Returns the child's pid
/// or -1 (errno set).
pid_t relayd_handover_spawn(const char *path, char *const argv[], char *const envp[], int channel);

#endif
