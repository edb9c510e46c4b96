/* heron_authtest.c — heron-authtest: the directory commands of mailctl on their own, for
 * tests and administrators before mailctl exists on a host.
 *
 *   heron-authtest [-c heron.conf] [-v] auth test [-n COUNT] USER
 *   heron-authtest [-c heron.conf] [-v] lookup [-n COUNT] ADDRESS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/log.h"
#include "ldapauth/ldapauth_cli.h"

int main(int argc, char **argv)
{
	const char *path = "/etc/heron/heron.conf";
	struct conf *c = NULL;
	char *err = NULL;
	int opt, rc;

	log_init("heron-authtest", true, LOG_MAIL);
	while ((opt = getopt(argc, argv, "+c:v")) != -1) {
		switch (opt) {
		case 'c':
			path = optarg;
			break;
		case 'v':
			log_set_level(LOG_LVL_DEBUG);
			break;
		default:
			fprintf(stderr, "usage: heron-authtest [-c heron.conf] [-v] "
					"auth test USER | lookup ADDRESS\n");
			return 64;
		}
	}
	if (conf_load(path, &c, &err) < 0) {
		fprintf(stderr, "heron-authtest: %s\n", err);
		free(err);
		return 78;
	}
	rc = ldapauth_cli_main(c, argc - optind, argv + optind);
	conf_free(&c);
	return rc;
}
