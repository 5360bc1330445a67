// Socket constants spelled here because their C names are declared by more than one header
// (glibc's <netinet/in.h> and <sys/socket.h>, the kernel's <linux/in6.h>, and again inside the
// OpenSSL and libevent modules that include them): which Clang module exports a name depends on
// the order the modules are built in, so a file importing only Glibc may not see it, and a
// whole-module build (the fuzzers') may lose it. The values are Linux's ABI.

/// IPPROTO_IPV6, the IPv6 socket option level (the IANA protocol number of IPv6, 41).
let ipv6OptionLevel: Int32 = 41

/// MSG_NOSIGNAL: a send on a connection the other side closed fails with EPIPE instead of raising SIGPIPE.
let sendWithoutSignal: Int32 = 0x4000
