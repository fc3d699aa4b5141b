// SPDX-License-Identifier: MIT
/*
 * The node's settings file (node_config.h): `key = value` lines, `#` starts
 * a comment, blank lines are ignored.  One key today, allow_vulkan.  A key
 * this library does not know is a warning and ignored, so that a file
 * written for a newer library still lets an older one run.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "node_config.h"

static char *trim(char *s)
{
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

/* 1 yes, 0 no, -1 neither. */
static int parse_bool(const char *value)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(value, yes[i]) == 0)
			return 1;
		if (strcasecmp(value, no[i]) == 0)
			return 0;
	}
	return -1;
}

static void parse_line(struct gdr_node_config *cfg, char *line, unsigned int number)
{
	char *hash = strchr(line, '#');
	char *eq, *key, *value;
	int allow;

	if (hash)
		*hash = '\0';
	key = trim(line);
	if (!*key)
		return;
	eq = strchr(key, '=');
	if (!eq) {
		gdr_warn("%s:%u: \"%s\" is not a `key = value` line; ignored (the file accepts allow_vulkan = yes|no)",
			 cfg->path, number, key);
		return;
	}
	*eq = '\0';
	value = trim(eq + 1);
	key = trim(key);
	if (strcmp(key, "allow_vulkan") != 0) {
		gdr_warn("%s:%u: unknown setting \"%s\"; ignored (this library knows allow_vulkan)", cfg->path,
			 number, key);
		return;
	}
	allow = parse_bool(value);
	if (allow < 0) {
		gdr_warn("%s:%u: allow_vulkan = \"%s\" is neither yes nor no; taken as no (write yes or no)",
			 cfg->path, number, value);
		allow = 0;
	}
	cfg->allow_vulkan = allow;
	cfg->allow_vulkan_line = number;
}

void gdr_node_config_read(struct gdr_node_config *cfg)
{
	const char *path = getenv("GDRCOPY_CONFIG_FILE");
	unsigned int number = 0;
	char line[512];
	FILE *f;

	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->path, sizeof(cfg->path), "%s", path && *path ? path : GDR_NODE_CONFIG_FILE);
	f = fopen(cfg->path, "re");
	if (!f) {
		if (errno != ENOENT)
			gdr_warn("%s: %s; read as if absent (nothing is allowed beyond gdrdrv and dma-buf)",
				 cfg->path, strerror(errno));
		return;
	}
	cfg->found = true;
	while (fgets(line, sizeof(line), f)) {
		number++;
		parse_line(cfg, line, number);
	}
	fclose(f);
}
