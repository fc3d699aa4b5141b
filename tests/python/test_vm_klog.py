"""The kernel-log oracle: which lines fail a VM run."""

from __future__ import annotations

import pytest

from gdrkit.vm import klog

FAILING_LINES = [
    ("[   12.345678] BUG: unable to handle page fault for address: ffffc90000000000", "bug"),
    ("[    3.000001] Oops: 0002 [#1] PREEMPT SMP NOPTI", "oops"),
    ("[    5.100000] WARNING: CPU: 1 PID: 97 at mm/memory.c:2530 remap_pfn_range+0x1/0x2", "warning"),
    ("[    5.200000] BUG: KASAN: slab-use-after-free in gdrdrv_release+0x10/0x20", "kasan"),
    ("[    5.200000] UBSAN: shift-out-of-bounds in drivers/x/y.c:12:3", "ubsan"),
    ("[    6.000000] WARNING: possible circular locking dependency detected", "lockdep"),
    ("[    6.000000] inconsistent lock state", "lockdep"),
    ("[    6.000000] possible circular locking dependency detected", "lockdep"),
    ("[    7.000000] BUG: Bad page state in process gdrdrv_ktest  pfn:1f000", "bug"),
    ("[    7.000000] page:ffffea0000000000 bad page map in process x", "bad-page"),
    ("[    8.000000] general protection fault, probably for non-canonical address 0xdead", "gpf"),
    ("[    8.000001] Call Trace:", "call-trace"),
    ("[    8.000001]  <TASK>Call Trace", "call-trace"),
    (
        "[    9.000000] x86/PAT: gdrdrv_ktest:120 conflicting memory types e0000000-e0010000 uncached-minus<->write-combining",
        "pat",
    ),
    ("[    9.000000] x86/PAT: gdrdrv_ktest:120 freeing invalid memtype [mem 0xe0000000-0xe000ffff]", "pat"),
    ("[    9.000000] x86/PAT: gdrdrv_ktest:120 map pfn expected mapping type write-combining for [mem 0x1-0x2]", "pat"),
    # Every x86/PAT complaint counts: WC over RAM, untracked maps, refused changes.
    (
        "[    9.000000] x86/PAT: reserve_ram_pages_type failed [mem 0x10a000000-0x10a00ffff], track write-back, req write-combining",
        "pat",
    ),
    (
        "[    9.000000] x86/PAT: gdrdrv_ktest:120 map pfn RAM range req write-combining for [mem 0x1-0x2], got write-back",
        "pat",
    ),
    ("[    9.000000] x86/PAT: ioremap_change_attr failed write-combining for [mem 0x1-0x2]", "pat"),
    ("[   10.000000] Kernel panic - not syncing: Fatal exception", "panic"),
    ("[   10.000000] kernel BUG at drivers/gdrdrv/gdrdrv.c:1234!", "bug"),
    # The debug kernels' judges, each under its own name (gdrkit.vm.debugkernel).
    ("[   11.000000] BUG: KCSAN: data-race in judges_racer [gdrkit_judges] / judges_racer [gdrkit_judges]", "kcsan"),
    ("[   11.000000] BUG: sleeping function called from invalid context at gdrkit_judges.c:55", "atomic-sleep"),
    ("[   11.000000] BUG: scheduling while atomic: insmod/120/0x00000002", "atomic-sleep"),
    ("[   11.000000] kmemleak: 1 new suspected memory leaks (see /sys/kernel/debug/kmemleak)", "kmemleak"),
    ("unreferenced object 0xffff888004a1b200 (size 256):", "kmemleak"),
    (
        "[   11.000000] ODEBUG: free active (active state 0) object type: timer_list hint: judges_timer_fn",
        "debugobjects",
    ),
    ("[   11.000000] WARNING: suspicious RCU usage", "lockdep"),
    ("[   11.000000] WARNING: bad unlock balance detected!", "lockdep"),
    ("[   11.000000] UBSAN: shift-out-of-bounds in tests/kernel/judges/gdrkit_judges.c:99:8", "ubsan"),
    # What TCG once did to a trixie kernel 2.8 s into its boot (the VM runner retries that boot).
    ("[    2.812345] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI", "oops"),
]

CLEAN_LINES = [
    "[    0.000000] Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org)",
    '[    2.312946] Unstable clock detected, switching default tracing clock to "global"',
    "[    3.027666] 9pnet: Installing 9P2000 support",
    "[    4.000000] softgpu: loading out-of-tree module taints kernel.",
    "[    4.000000] softgpu: module verification failed: signature and/or required key missing - tainting kernel",
    "[    0.100000] [Firmware Bug]: TSC doesn't count with P0 frequency!",
    "[    0.200000] ACPI BIOS Error (bug): Could not resolve symbol",
    "[    4.500000] gdrdrv: debug: pinned 65536 bytes",
    # Seen in real boots of Debian kernels under qemu/TCG:
    "[    0.100000] ..MP-BIOS bug: 8254 timer not connected to IO-APIC",
    "[    0.200000] AMD-Vi: AMD IOMMUv2 functionality not available on this system - This is not a bug.",
    "[    0.000000] \tRCU CPU stall warnings suppressed (rcu_cpu_stall_suppress).",
    "[    0.000000] x86/PAT: Configuration [0-7]: WB  WC  UC- UC  WB  WP  UC- WT  ",
    # Seen in boots of gdrkit's debug kernels: the judges announcing themselves.
    "[    0.000000] KernelAddressSanitizer initialized (generic)",
    "[    0.000000] Lock dependency validator: Copyright (c) 2006 Red Hat, Inc., Ingo Molnar",
    "[    0.300000] kmemleak: Kernel memory leak detector initialized (mem pool available: 15000)",
    "[    0.300000] kcsan: enabled early",
    "[    0.300000] kcsan: non-strict mode configured - compound atomic ops are not instrumented",
    "[    0.300000] ODEBUG: selftest passed",
    '[    1.746794] PCI: Using host bridge windows from ACPI; if necessary, use "pci=nocrs" and report a bug',
]


@pytest.mark.parametrize(("line", "rule"), FAILING_LINES)
def test_each_failure_class_is_found(line: str, rule: str) -> None:
    finding = klog.scan_line(line)
    assert finding is not None, line
    assert finding.rule == rule
    assert not finding.line.startswith("["), "the timestamp is stripped"


@pytest.mark.parametrize("line", CLEAN_LINES)
def test_ordinary_boot_and_module_lines_pass(line: str) -> None:
    assert klog.scan_line(line) is None


def test_whole_log_in_order() -> None:
    text = "\r\n".join([CLEAN_LINES[0], FAILING_LINES[2][0], CLEAN_LINES[2], FAILING_LINES[11][0]])
    findings = klog.scan_kernel_log(text)
    assert [f.rule for f in findings] == ["warning", "call-trace"]


def test_console_reading_ignores_program_output() -> None:
    console = "\n".join(
        [
            "[    1.000000] Run /init as init process",
            "WARNING: this line is printed by a test program, not the kernel",
            "# BUG: a TAP diagnostic",
            "[    2.000000] WARNING: CPU: 0 PID: 1 at kernel/x.c:1 f+0x0/0x1",
        ]
    )
    assert [f.rule for f in klog.scan_kernel_log(console, kernel_lines_only=True)] == ["warning"]
    assert len(klog.scan_kernel_log(console)) == 3


def test_syslog_prefixed_dmesg_lines_count_as_kernel_lines() -> None:
    assert klog.is_kernel_line("<4>[    2.000000] WARNING: x")
    assert klog.strip_timestamp("<4>[    2.000000] WARNING: x") == "WARNING: x"


def test_merge_keeps_each_line_once() -> None:
    a = klog.scan_kernel_log(FAILING_LINES[0][0] + "\n" + FAILING_LINES[1][0])
    b = klog.scan_kernel_log(FAILING_LINES[1][0] + "\n" + FAILING_LINES[2][0])
    merged = klog.merge_findings(a, b)
    assert [f.rule for f in merged] == ["bug", "oops", "warning"]


def test_log_tail() -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    assert klog.log_tail(text, 3) == "line 97\nline 98\nline 99"


# A KCSAN report the fuzzer's forks met under the kcsan kernel: both sides in the core kernel.
CORE_KERNEL_RACE = """\
[   30.673263] ==================================================================
[   30.673427] BUG: KCSAN: data-race in _find_next_bit+0x37/0xc0
[   30.673427] 
[   30.673427] race at unknown origin, with read to 0xffff9a1c01322ff0 of 8 bytes by task 322 on cpu 0:
[   30.673427]  _find_next_bit+0x37/0xc0
[   30.673427]  flush_tlb_mm_range+0xb2/0x160
[   30.673427]  ptep_clear_flush+0xab/0xc0
[   30.673427]  wp_page_copy+0x49e/0xd80
[   30.673427] 
[   30.673427] value changed: 0x0000000000000001 -> 0x0000000000000003
[   30.673427] 
[   30.673427] Reported by Kernel Concurrency Sanitizer on:
[   30.673427] CPU: 0 PID: 322 Comm: gdrdrv_fuzz Tainted: G           O       6.1.192-gdrkit-kcsan #1
[   30.673427] ==================================================================
"""


def test_a_core_kernel_race_at_unknown_origin_is_set_apart_not_failed() -> None:
    assert klog.scan_kernel_log(CORE_KERNEL_RACE) == []
    assert klog.core_kernel_races(CORE_KERNEL_RACE) == ["BUG: KCSAN: data-race in _find_next_bit+0x37/0xc0"]
    # On the console, between program output, the same.
    console = "# fuzz: op 12\n" + CORE_KERNEL_RACE + "ok 1 - seed 1400\n"
    assert klog.scan_kernel_log(console, kernel_lines_only=True) == []
    assert len(klog.core_kernel_races(console, kernel_lines_only=True)) == 1


def test_a_kcsan_report_naming_a_module_or_two_known_accesses_fails_the_run() -> None:
    ours = CORE_KERNEL_RACE.replace(" ptep_clear_flush+0xab/0xc0", " gdrdrv_mmap+0x1c/0x90 [gdrdrv]")
    assert [f.rule for f in klog.scan_kernel_log(ours)] == ["kcsan"]
    assert klog.core_kernel_races(ours) == []
    # A module's frame below the page fault the race was met in is the interrupted code, not the racer.
    fault_in_copy = CORE_KERNEL_RACE.replace(
        "[   30.673427]  wp_page_copy+0x49e/0xd80\n",
        "[   30.673427]  wp_page_copy+0x49e/0xd80\n[   30.673427]  asm_exc_page_fault+0x22/0x30\n"
        "[   30.673427]  _copy_to_user+0x7f/0xa0\n[   30.673427]  softgpu_ioctl+0x15bc/0x19f0 [softgpu]\n",
    )
    assert klog.scan_kernel_log(fault_in_copy) == [] and len(klog.core_kernel_races(fault_in_copy)) == 1
    timer_in_ours = fault_in_copy.replace("asm_exc_page_fault+0x22/0x30", "asm_sysvec_apic_timer_interrupt+0x16/0x20")
    assert klog.scan_kernel_log(timer_in_ours) == [] and len(klog.core_kernel_races(timer_in_ours)) == 1
    # Both accesses known: one of them in a module fails; both in the core kernel is its own race.
    two_sides = CORE_KERNEL_RACE.replace("race at unknown origin, with read", "read").replace(
        "[   30.673427] value changed:",
        "[   30.673427] write to 0xffff9a1c01322ff0 of 8 bytes by task 323 on cpu 1:\n"
        "[   30.673427]  switch_mm_irqs_off+0x1a/0x300\n[   30.673427] \n[   30.673427] value changed:",
    )
    assert klog.scan_kernel_log(two_sides) == [] and len(klog.core_kernel_races(two_sides)) == 1
    ours_too = two_sides.replace("switch_mm_irqs_off+0x1a/0x300", "gdrdrv_unpin+0x1a/0x300 [gdrdrv]")
    assert [f.rule for f in klog.scan_kernel_log(ours_too)] == ["kcsan"]
    # A report cut off before its closing line (the guest died) stays a finding too.
    cut = "\n".join(CORE_KERNEL_RACE.splitlines()[:-1])
    assert [f.rule for f in klog.scan_kernel_log(cut)] == ["kcsan"]


PRINTK_RING_RACE = """\
[   57.101000] ==================================================================
[   57.101000] BUG: KCSAN: data-race in desc_read / prb_reserve
[   57.101000] 
[   57.101000] write to 0xffffffffb265a1a8 of 8 bytes by task 1052 on cpu 1:
[   57.101000]  prb_reserve+0x404/0x6b0
[   57.101000]  vprintk_store+0x2e8/0x6f0
[   57.101000]  _printk+0x63/0x7e
[   57.101000]  gdrdrv_mmap.cold+0x2e/0x175 [gdrdrv]
[   57.101000] 
[   57.101000] read to 0xffffffffb265a1a8 of 8 bytes by task 1050 on cpu 0:
[   57.101000]  desc_read+0xd2/0x1a0
[   57.101000]  devkmsg_read+0xc4/0x3d0
[   57.101000] 
[   57.101000] Reported by Kernel Concurrency Sanitizer on:
[   57.101000] ==================================================================
"""


def test_a_race_inside_printks_ring_buffer_is_its_own_whoever_printed() -> None:
    assert klog.scan_kernel_log(PRINTK_RING_RACE) == []
    assert klog.core_kernel_races(PRINTK_RING_RACE) == ["BUG: KCSAN: data-race in desc_read / prb_reserve"]
    # One side outside the ring buffer: a finding.
    ours = PRINTK_RING_RACE.replace("desc_read / prb_reserve", "gdrdrv_unpin / prb_reserve")
    assert [f.rule for f in klog.scan_kernel_log(ours)] == ["kcsan"]
