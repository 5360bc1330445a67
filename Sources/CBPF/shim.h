#ifndef RELAYD_CBPF_SHIM_H
#define RELAYD_CBPF_SHIM_H
/* libbpf (Debian libbpf-dev): loading BPF objects, maps, TC attachment (docs/kernel-fast-path.md). */
#include <sys/types.h>
#include <bpf/libbpf.h>
#include <bpf/bpf.h>
#endif
