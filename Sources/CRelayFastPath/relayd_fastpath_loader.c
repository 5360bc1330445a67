#include "relayd_fastpath_loader.h"

#include <errno.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

// relayd's filter: one handle and priority on the ingress hook, replaced on a new attach.
#define RELAYD_TC_HANDLE 0x7e1a
#define RELAYD_TC_PRIORITY 1

// BPF_TCX_INGRESS in the kernel's enum bpf_attach_type (Linux 6.6); the uapi headers of
// Debian 12 predate it.
#define RELAYD_BPF_TCX_INGRESS 46

int relayd_tcx_attach_ingress(int ifindex, int prog_fd) {
    int fd = bpf_link_create(prog_fd, ifindex, (enum bpf_attach_type)RELAYD_BPF_TCX_INGRESS, NULL);
    return fd < 0 ? (errno ? -errno : fd) : fd;
}

int relayd_xdp_attach_native(int ifindex, int prog_fd) {
    LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = XDP_FLAGS_DRV_MODE);
    int fd = bpf_link_create(prog_fd, ifindex, BPF_XDP, &opts);
    return fd < 0 ? (errno ? -errno : fd) : fd;
}

int relayd_tc_attach_ingress(int ifindex, int prog_fd, int *created) {
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
    int err = bpf_tc_hook_create(&hook);
    *created = err == 0;
    if (err && err != -EEXIST) return err;
    LIBBPF_OPTS(bpf_tc_opts, opts, .handle = RELAYD_TC_HANDLE, .priority = RELAYD_TC_PRIORITY, .prog_fd = prog_fd,
                .flags = BPF_TC_F_REPLACE);
    return bpf_tc_attach(&hook, &opts);
}

int relayd_tc_detach_ingress(int ifindex, int destroy_hook) {
    LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
    LIBBPF_OPTS(bpf_tc_opts, opts, .handle = RELAYD_TC_HANDLE, .priority = RELAYD_TC_PRIORITY);
    int err = bpf_tc_detach(&hook, &opts);
    if (destroy_hook) {
        hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
        int destroyed = bpf_tc_hook_destroy(&hook);
        if (!err) err = destroyed;
    }
    return err;
}

int relayd_prog_test_run(int prog_fd, const void *in, uint32_t in_length, void *out, uint32_t out_capacity,
                         uint32_t repeat, uint32_t *out_length, uint32_t *retval, uint32_t *duration_ns) {
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = in, .data_size_in = in_length, .data_out = out,
                .data_size_out = out_capacity, .repeat = repeat);
    int err = bpf_prog_test_run_opts(prog_fd, &opts);
    *out_length = opts.data_size_out;
    *retval = opts.retval;
    *duration_ns = opts.duration;
    return err;
}

int relayd_xdp_test_run_live(int prog_fd, const void *frame, uint32_t length, int ifindex, uint32_t count) {
    struct xdp_md context = {.data = 0, .data_end = length, .ingress_ifindex = (uint32_t)ifindex};
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = length, .ctx_in = &context,
                .ctx_size_in = sizeof(context), .repeat = count, .flags = BPF_F_TEST_XDP_LIVE_FRAMES);
    return bpf_prog_test_run_opts(prog_fd, &opts);
}
