// SPDX-License-Identifier: MIT
/* The leaf helpers of internal.h that are not logging. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "internal.h"

static pthread_once_t host_page_once = PTHREAD_ONCE_INIT;
static struct gdr_host_page host_page;

static void host_page_read(void)
{
	long size = sysconf(_SC_PAGESIZE);

	if (size <= 0)
		size = 4096;
	host_page.size = (size_t)size;
	host_page.mask = host_page.size - 1;
	host_page.shift = (unsigned int)__builtin_ctzl(host_page.size);
}

const struct gdr_host_page *gdr_host_page(void)
{
	pthread_once(&host_page_once, host_page_read);
	return &host_page;
}

static pthread_once_t fork_hook_once = PTHREAD_ONCE_INIT;
static _Atomic unsigned int gdr_fork_count;

static void fork_child_count(void)
{
	atomic_fetch_add_explicit(&gdr_fork_count, 1, memory_order_relaxed);
}

static void fork_hook_install(void)
{
	pthread_atfork(NULL, NULL, fork_child_count);
}

unsigned int gdr_fork_generation(void)
{
	pthread_once(&fork_hook_once, fork_hook_install);
	return atomic_load_explicit(&gdr_fork_count, memory_order_relaxed);
}

const char *gdr_mapping_type_name(gdr_mapping_type_t type)
{
	static const char *const names[GDR_MAPPING_TYPE_MAX] = {
		[GDR_MAPPING_TYPE_NONE] = "None",
		[GDR_MAPPING_TYPE_WC] = "Write Combining",
		[GDR_MAPPING_TYPE_CACHING] = "Caching",
		[GDR_MAPPING_TYPE_DEVICE] = "Device",
	};

	if ((int)type < 0 || (int)type >= GDR_MAPPING_TYPE_MAX)
		return NULL;
	return names[type];
}
