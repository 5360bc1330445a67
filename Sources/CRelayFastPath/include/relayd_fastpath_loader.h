// What Swift cannot call in libbpf directly: the option structs are built with LIBBPF_OPTS, a
// C macro. Thin wrappers, one libbpf call each (docs/kernel-fast-path.md).
#ifndef RELAYD_FASTPATH_LOADER_H
#define RELAYD_FASTPATH_LOADER_H

#include <stddef.h>
#include <stdint.h>

// Attaches `prog_fd` to `ifindex`'s ingress as a tcx link (Linux 6.6 and later): returns the
// link's descriptor, or a negative errno. The kernel detaches the program when the last
// descriptor of the link closes, so a relayd that dies, however it dies, leaves nothing attached.
int relayd_tcx_attach_ingress(int ifindex, int prog_fd);

// Attaches the XDP program `prog_fd` to `ifindex` in the driver's native mode, as a link (it goes
// with the process): the link's descriptor, or a negative errno (-EOPNOTSUPP and the like where
// the driver has no native XDP).
int relayd_xdp_attach_native(int ifindex, int prog_fd);

// Attaches `prog_fd` to `ifindex`'s clsact ingress hook (created if missing; `created` tells
// whether this call created it). 0 or a negative errno.
int relayd_tc_attach_ingress(int ifindex, int prog_fd, int *created);

// Detaches relayd's filter from `ifindex`'s ingress hook, and removes the hook if `destroy_hook`.
int relayd_tc_detach_ingress(int ifindex, int destroy_hook);

// Runs `prog_fd` `repeat` times over the packet `in` (BPF_PROG_TEST_RUN) and copies the packet it
// leaves into `out`; `out_length` gets its length, `retval` the program's verdict, `duration_ns`
// the kernel's mean time per run. 0 or a negative errno.
int relayd_prog_test_run(int prog_fd, const void *in, uint32_t in_length, void *out, uint32_t out_capacity,
                         uint32_t repeat, uint32_t *out_length, uint32_t *retval, uint32_t *duration_ns);

// Runs the XDP program `prog_fd` `count` times in live-frames mode (BPF_F_TEST_XDP_LIVE_FRAMES,
// Linux 5.18): each pass gets a copy of `frame` as if `ifindex` had received it, and what it
// transmits (XDP_TX) really leaves by `ifindex`. The benchmark's load generator
// (relayd_loadgen.h). 0 or a negative errno.
int relayd_xdp_test_run_live(int prog_fd, const void *frame, uint32_t length, int ifindex, uint32_t count);

#endif
