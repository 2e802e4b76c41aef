/* SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only) */
#ifndef CRITPATH_COMMANDS_H
#define CRITPATH_COMMANDS_H

#define CRITPATH_VERSION "0.1.0"

int cmd_record(int argc, char **argv);	/* user/record/record.c */
int cmd_agent(int argc, char **argv);	/* user/record/agent.c */
int cmd_dump(int argc, char **argv);	/* user/cmd/dump.c */
int cmd_report(int argc, char **argv);	/* user/cmd/report.c */
int cmd_diff(int argc, char **argv);	/* user/cmd/report.c */
int cmd_store(int argc, char **argv);	/* user/cmd/store.c */

#endif
