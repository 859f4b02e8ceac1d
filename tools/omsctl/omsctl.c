/* SPDX-License-Identifier: Apache-2.0 */
/*
 * omsctl — the operator's and client's command line (docs/tools.md).
 *
 *   omsctl [--json] order new|cancel|amend|replace ...   order entry over UDP
 *   omsctl [--json] deposit|withdraw ...                 transfers over UDP
 *   omsctl [--json] [--socket PATH] <command> ...        the node's control socket
 *   omsctl [--json] keys add|list|revoke|rotate --db CONNINFO ...   API keys (ctl_keys.c)
 *
 * Options may appear anywhere; every one but a few flags takes a value ("--key value" or
 * "--key=value"): ctl_args.c reads them. Exit codes: enum ctl_exit. This file holds only
 * the help text and main, which dispatches to ctl_order.c or ctl_mgmt.c.
 */
#include <stdio.h>
#include <string.h>

#include "tools/omsctl/omsctl.h"

static void
help(FILE *f)
{
	fputs("usage: omsctl [--json] <command> [--option value ...]\n"
	      "\n"
	      "Order entry over UDP (--host A.B.C.D, default 10.77.0.2; --port N, default 7400;\n"
	      "--bind A.B.C.D; --session N; --key HEX32 | --key-file PATH (API key: log on\n"
	      "first; refused: exit 1); --wait-ms N, default 5000; --wait ack|final;\n"
	      "--retry-ms N, default 200; --retries N, default 8):\n"
	      "  order new     --user U --symbol S --side buy|sell --type limit|market\n"
	      "                --tif gtc|ioc|fok|gtd|post_only --px P --qty Q [--quote Q]\n"
	      "                [--expire-ms N | --expire-ns T]\n"
	      "                [--stp none|expire_taker|expire_maker|expire_both]\n"
	      "                [--cl-id N] [--follow]\n"
	      "  order cancel  --user U --orig N [--cl-id N]\n"
	      "  order amend   --user U --orig N --qty Q [--cl-id N]\n"
	      "  order replace --user U --orig N --px P --qty Q [--cl-id N]\n"
	      "  order status  --user U               (control socket: users.show)\n"
	      "  deposit       --user U --asset A --amount N [--transfer-id N] [--shard N]\n"
	      "  withdraw      --user U --asset A --amount N [--transfer-id N] [--shard N]\n"
	      "\n"
	      "Control socket (--socket PATH, else $OMSD_SOCKET, else /run/omsd/omsd.sock;\n"
	      "--timeout-ms N, default 5000):\n"
	      "  status | members | lcores | snapshot | transfer-leader | metrics | help\n"
	      "  routes show|set|pin|unpin     users show|evict|migrate     shards scale\n"
	      "  symbols list|add|halt|resume|move     kill user|symbol\n"
	      "  members [list] | members add|promote|remove --node N [--shard S]\n"
	      "  top [--count N] [--interval-ms N]\n"
	      "  Other --key value options become the request's args (integers, true/false,\n"
	      "  else strings); the command name joins its words with dots (routes.show).\n"
	      "\n"
	      "API keys and accounts in PostgreSQL (--db CONNINFO of a role that may write\n"
	      "them, else $OMSD_KEYS_DB; nodes with keys_source = database pick keys up):\n"
	      "  keys add    --perms trade,transfer,read|all --users *|1-1000,5000\n"
	      "              [--key-id N] [--out FILE]   (prints or writes the client's key line)\n"
	      "  keys list   (never a secret)\n"
	      "  keys revoke --key-id N   (its sessions end at the nodes' next refresh)\n"
	      "  keys rotate --key-id N [--out FILE]   (a new secret; sessions open stay)\n"
	      "  users add   --user FIRST [--last LAST]  (open accounts: omsd opens none)\n"
	      "\n"
	      "Exit codes: 0 ok, 1 refused (NAK, reject, error response, logon), 2 usage,\n"
	      "3 no answer / timeout / socket unreachable, 4 local I/O error.\n",
	      f);
}

int
main(int argc, char **argv)
{
	static struct ctl ctl;
	ctl.out = stdout;
	ctl.err = stderr;
	int rc = ctl_args_parse(&ctl, argc, argv);
	if (rc != CTL_EXIT_OK)
		return rc;
	ctl.json = ctl_flag(&ctl, "json");
	if (ctl_flag(&ctl, "help") || ctl.word_count == 0) {
		help(ctl.word_count == 0 && !ctl_flag(&ctl, "help") ? stderr : stdout);
		return ctl.word_count == 0 && !ctl_flag(&ctl, "help") ? CTL_EXIT_USAGE : CTL_EXIT_OK;
	}
	const char *w = ctl.words[0];
	/* There is no client status message on the wire: an order's state is the OMS actor's,
	 * so `order status` asks the control socket for the user (users.show). */
	if (strcmp(w, "order") == 0 && ctl.word_count == 2 && strcmp(ctl.words[1], "status") == 0) {
		ctl.words[0] = "users";
		ctl.words[1] = "show";
		w = ctl.words[0];
	}
	if (strcmp(w, "order") == 0 || strcmp(w, "deposit") == 0 || strcmp(w, "withdraw") == 0)
		rc = ctl_order_main(&ctl);
	else if (strcmp(w, "keys") == 0)
		rc = ctl_keys_main(&ctl);
	else if (strcmp(w, "users") == 0 && ctl.word_count == 2 && strcmp(ctl.words[1], "add") == 0)
		rc = ctl_users_add_main(&ctl);
	else
		rc = ctl_mgmt_main(&ctl);
	fflush(stdout);
	return rc;
}
