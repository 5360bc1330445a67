/// The IPv6 socket option level, IPPROTO_IPV6 (the IANA protocol number of IPv6, 41). Spelled
/// here because the C name is declared by both glibc's <netinet/in.h> and the kernel's
/// <linux/in6.h>: which Clang module exports it depends on the order the modules are built in,
/// so a file importing only Glibc may not see it.
let ipv6OptionLevel: Int32 = 41
