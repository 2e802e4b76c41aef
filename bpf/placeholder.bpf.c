// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* PLACEHOLDER so the skeleton builds while bpf/ is being written; removed by its owner. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";
