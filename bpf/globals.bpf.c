// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* The one definition of each variable the headers declare (common.h says why). */
#include "blocked.h"
#include "tls.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 cfg_payload_bytes = CP_PAYLOAD_DEFAULT;
const volatile __u32 cfg_h2_payload_bytes = CP_PAYLOAD_MAX;
const volatile __u8 cfg_empty_programs = 0;
const volatile __u8 cfg_watch_execs = 0;
const volatile __u64 cfg_watch_comm[CP_WATCH_COMMS][2];
const volatile __u32 cfg_nwatch_comm = 0;
const volatile __u64 cfg_wakeup_bytes = 1 << 20;
const volatile __u8 cfg_lean = 0;
const volatile __u16 cfg_sys_calls[CP_SYS_TABLE];
const volatile __u8 cfg_tls = 0;

__u64 target_bits[TARGET_WORDS];
__u64 fork_wake_bits[TARGET_WORDS];
__u64 tls_busy_bits[TARGET_WORDS];
__u64 go_tls_bits[TARGET_WORDS];
