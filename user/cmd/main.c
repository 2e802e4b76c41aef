// SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
/* critpath: command dispatch (DESIGN.md section 1). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "msg.h"

static const struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} cmds[] = {
	{ "record", cmd_record, "record -p PID[,PID..] | -- CMD ARGS   (root) write a recording" },
	{ "agent", cmd_agent, "agent -p PID | --comm NAME ... (root) analyse live, export OTLP" },
	{ "report", cmd_report, "report INPUT..   critical paths and profiles from recordings or traces" },
	{ "dump", cmd_dump, "dump FILE [--json]   the raw records of a recording" },
	{ "diff", cmd_diff, "diff A B   which steps of the critical path got slower" },
	{ "store", cmd_store, "store INPUT.. clickhouse://HOST:PORT/DB   critical paths into ClickHouse" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: critpath COMMAND [OPTIONS]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %s\n", cmds[i].summary);
	fprintf(f, "\n'critpath COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("critpath %s\n", CRITPATH_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	cp_error(NULL, "unknown command '%s'", argv[1]);
	usage(stderr);
	return 2;
}
