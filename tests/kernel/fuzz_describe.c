// SPDX-License-Identifier: MIT
/*
 * gdrdrv_fuzz: operations as text, and the replayable "| R" lines.
 */
#include "fuzz.h"

static const char *entry_name(uint32_t bits)
{
	if ((bits & 7) < 6)
		return "";
	return bits & 8 ? " compat/4-byte" : " compat";
}

static void describe(const struct op *op, char *out, size_t len)
{
	static const char *const pin_modes[] = {
		"whole allocation", "sub-range", "unaligned range", "past the end",
		"freed allocation", "unallocated address", "zero/wrapping range", "host address",
	};
	static const char *const arg_modes[] = { "", " arg=NULL", " arg=unmapped",
						 " arg=straddling", " arg=read-only" };
	char res[48];
	int n = 0;

	if (op->res > 0 && op->res < 4096 && (op->type == OP_PROBE))
		snprintf(res, sizeof(res), "%s", op->res == SIGBUS ? "SIGBUS" :
			 op->res == SIGSEGV ? "SIGSEGV" : "signal");
	else
		snprintf(res, sizeof(res), "%s", errname(op->res));

	switch (op->type) {
	case OP_ALLOC:
		n = snprintf(out, len, "alloc 0x%llx bytes",
			     op->a % 16 == 0 ? (op->a & 16 ? 0ULL : 1ULL << (40 + op->b % 20)) :
			     (unsigned long long)alloc_size_of(op->x));
		break;
	case OP_FREE:
		n = snprintf(out, len, "free %s #%u", op->b % 8 == 7 ? "bogus" : "allocation",
			     op->a % N_ALLOC);
		break;
	case OP_PIN:
		n = snprintf(out, len, "pin %s fd%d %s%s%s%s%s", ((op->b >> 4) & 3) >= 2 ? "v1" : "v2",
			     fd_of(op->b >> 17), pin_modes[pin_mode_of(op->b)],
			     ((op->b >> 4) & 3) == 3 ? " tokens" : "",
			     ((op->b >> 6) & 7) == 5 ? " FORCE_PCIE" : ((op->b >> 6) & 7) == 6 ?
			     " bad-flags" : ((op->b >> 6) & 7) == 7 ? " pad!=0" : "",
			     entry_name(op->b >> 9), arg_modes[arg_mode_of(op->b >> 13)]);
		break;
	case OP_UNPIN:
		n = snprintf(out, len, "unpin fd%d %s%s%s", fd_of(op->b >> 8),
			     (op->b & 3) >= 2 ? "invalid handle" : "live pin", entry_name(op->b >> 2),
			     arg_modes[arg_mode_of(op->b >> 12)]);
		break;
	case OP_INFO:
		n = snprintf(out, len, "%s fd%d %s%s%s",
			     op->b % 3 == 0 ? "get_info" : op->b % 3 == 1 ? "get_info_v2" : "get_cb_flag",
			     fd_of(op->b >> 8), ((op->b >> 2) & 3) == 3 ? "invalid handle" : "live pin",
			     entry_name(op->b >> 4), arg_modes[arg_mode_of(op->b >> 12)]);
		break;
	case OP_MMAP:
		n = snprintf(out, len, "mmap slot %u fd%d %s len-mode %u prot-mode %u flags-mode %u%s",
			     op->a % N_MAP, fd_of(op->b >> 16),
			     (op->b & 15) == 14 ? "offset inside a pin" : (op->b & 15) >= 12 ?
			     "invalid handle" : "live pin", (op->b >> 4) & 7, (op->b >> 7) & 7,
			     (op->b >> 10) & 15, ((op->b >> 14) & 3) == 3 ? " at an offset" : "");
		break;
	case OP_MUNMAP: {
		static const char *const how[] = { "whole", "whole", "whole", "whole",
						   "overmap", "head", "tail", "middle" };

		n = snprintf(out, len, "munmap slot %u %s", op->a % N_MAP, how[op->b % 8]);
		break;
	}
	case OP_MREMAP: {
		static const char *const how[] = { "grow", "grow+maymove", "shrink", "shrink",
						   "move", "move", "move", "move+dontunmap" };

		n = snprintf(out, len, "mremap slot %u %s", op->a % N_MAP, how[op->b % 8]);
		break;
	}
	case OP_MPROTECT:
		n = snprintf(out, len, "mprotect slot %u %s prot %d", op->a % N_MAP,
			     op->b % 16 >= 12 ? "partial" : "whole", prot_of(op->b % 8, op->z));
		break;
	case OP_MADVISE:
		n = snprintf(out, len, "madvise slot %u %s", op->a % N_MAP,
			     op->b % 4 == 3 ? "partial" : "whole");
		break;
	case OP_PROBE:
		n = snprintf(out, len, "probe slot %u, %u read(s)%s", op->a % N_MAP, 1 + op->b % 4,
			     (op->b >> 2) % 4 == 0 ? " + write" : "");
		break;
	case OP_FORK:
		n = snprintf(out, len, "fork (child: %s%s%s%s%s%s)", op->b & 1 ? "probe " : "",
			     op->b & 2 ? "gdrdrv-ioctls " : "", op->b & 4 ? "softgpu-ioctl " : "",
			     op->b & 8 ? (op->b & 16 ? "own-pin+unpin " : "own-pin ") : "",
			     op->b & 32 ? "close " : "", op->b & 64 ? "SIGKILL" : "exit");
		break;
	case OP_FDPASS:
		n = snprintf(out, len, "fdpass fd%d %s%s", fd_of(op->b >> 8),
			     op->b & 1 ? "child->parent" : "parent->child",
			     !(op->b & 1) && op->b & 2 ? ", then reopen" : "");
		break;
	case OP_REOPEN:
		n = snprintf(out, len, "reopen fd%d", fd_of(op->b >> 8));
		break;
	default:
		n = snprintf(out, len, "%s", op_names[op->type % OP_COUNT]);
		break;
	}
	if (n >= 0 && (size_t)n < len)
		snprintf(out + n, len - n, " -> %s", res);
}

void print_op(const struct op *op, const char *prefix)
{
	char d[200];

	describe(op, d, sizeof(d));
	printf("%s[t%u] %-70s | R %u %u %x %x %llx %llx %llx\n", prefix, op->thread, d,
	       op->thread, op->type, op->a, op->b, (unsigned long long)op->x,
	       (unsigned long long)op->y, (unsigned long long)op->z);
}

void print_counts(void)
{
	printf("#   ops:");
	for (int i = 0; i < OP_COUNT; i++)
		if (shm->done[i])
			printf(" %s %llu/%llu/%llu", op_names[i], (unsigned long long)shm->ok[i],
			       (unsigned long long)(shm->done[i] - shm->skipped[i]),
			       (unsigned long long)shm->done[i]);
	printf(" (succeeded/ran/drawn)\n");
}

