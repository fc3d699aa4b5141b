/* SPDX-License-Identifier: MIT */
/*
 * The node's settings for libgdrapi: a file of `key = value` lines that the
 * packages install as /etc/gdrcopy.conf (templates/system/gdrcopy.conf.j2
 * says what each setting is for).  GDRCOPY_CONFIG_FILE names another file,
 * for tests and for containers that bring their own.  Read at every
 * gdr_open(): the file is a few lines, and an edit takes effect in the next
 * process, or the next gdr_open() of a running one, without a restart.
 */
#ifndef GDRAPI_NODE_CONFIG_H
#define GDRAPI_NODE_CONFIG_H

#include <limits.h>
#include <stdbool.h>

#ifndef GDR_NODE_CONFIG_FILE
#define GDR_NODE_CONFIG_FILE "/etc/gdrcopy.conf"
#endif

struct gdr_node_config {
	char path[PATH_MAX];	/* the file looked for */
	bool found;		/* it exists and could be read */
	/*
	 * allow_vulkan = yes: gdr_open() may take the vulkan backend after
	 * gdrdrv and dma-buf for every process of the node.  Off when the file
	 * or the setting is missing, and when its value is not understood.
	 */
	bool allow_vulkan;
	unsigned int allow_vulkan_line;	/* where the file set it; 0: it did not */
};

/*
 * Read the node's file into cfg.  Never fails: a missing or unreadable file
 * is the default (nothing allowed); a line it does not understand is logged
 * (warning) with its number and what the file accepts, and ignored.
 */
void gdr_node_config_read(struct gdr_node_config *cfg);

#endif /* GDRAPI_NODE_CONFIG_H */
