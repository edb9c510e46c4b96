/* aliases.h — the aliases map of [mtad] aliases: parsing the file and expanding an address
 * into its final recipients. Pure logic (no I/O but aliases_load's read, no directory):
 * mtad's recipient resolution (rcpt_resolve.c) decides what the final addresses are.
 *
 * File format (one entry per logical line; '#' starts a comment line; a line that starts
 * with a space or tab continues the previous entry):
 *
 *     # name: target, target, ...
 *     postmaster:   alice
 *     sales@heron.test: bob, carol@heron.test,
 *             partner@example.org
 *
 * A name is a local part (it applies to every local domain) or a full address (only that
 * address). A target is a local part (qualified with the first local domain) or a full
 * address, local or external. Names are matched without regard to case; a name appears once.
 * Program, file and :include: targets are refused (mail never runs a command or writes a file
 * here). */
#ifndef HERON_MTAD_ALIASES_H
#define HERON_MTAD_ALIASES_H

#include <stdbool.h>
#include <stddef.h>

#define ALIASES_FILE_MAX (64u << 20) /* bytes of a file */
#define ALIASES_LINE_MAX (1u << 20)  /* bytes of one logical line (with continuations) */
#define ALIASES_TARGETS_MAX 10000    /* targets of one name */
#define ALIASES_DEPTH_MAX 8          /* aliases of aliases, nested */
#define ALIASES_ADDR_MAX 320         /* bytes of a name or a target */

struct aliases;

/* Parses the text of a file (fname names it in errors). 0, or -1 with *error_r
   ("fname:line: why", malloc'd) and *al_r NULL. An empty text is an empty map. */
int aliases_parse(const char *text, size_t len, const char *fname, struct aliases **al_r,
		  char **error_r);
/* Reads and parses path. Same results; an unreadable or too large file is an error. */
int aliases_load(const char *path, struct aliases **al_r, char **error_r);
void aliases_free(struct aliases **alp);
size_t aliases_count(const struct aliases *al);

/* Where an expansion looks: the local domains (the first qualifies bare names; none: bare
   names stay bare). */
struct aliases_ctx {
	char *const *domains;
	size_t ndomains;
	size_t max_targets; /* final addresses of one expansion at most */
};

/* The final addresses of addr (a full address, or a bare local part): 0 when addr is no
   alias (*v_r NULL, *n_r 0); 1 when it is, with *v_r its final addresses (malloc'd array of
   malloc'd strings; free with aliases_strv_free), each once (compared without case), in
   order; -1 with *error_r (a constant) when the expansion nests deeper than
   ALIASES_DEPTH_MAX (a loop) or yields more than ctx->max_targets addresses. A name met
   again inside its own expansion is final (`john: john, john@example.org` delivers to
   john's mailbox and forwards a copy). */
int aliases_expand(const struct aliases *al, const struct aliases_ctx *ctx, const char *addr,
		   char ***v_r, size_t *n_r, const char **error_r);
void aliases_strv_free(char ***vp, size_t n);

#endif
