/* milter_private.h — what milter.c (the conversation) and milter_apply.c (the message's
 * header section, and the milters' changes applied to the transaction) share. */
#ifndef HERON_MTAD_MILTER_PRIVATE_H
#define HERON_MTAD_MILTER_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "mtad/milter_proto.h"

struct smtp_session;

/* The header section read back from the message file: at most this many bytes and fields
   (a bigger one makes the milters fail: their default action). */
#define MILTER_HEADER_MAX (1024 * 1024)
#define MILTER_FIELDS_MAX 4096

/* One header field of the message: raw is the whole field as stored (name to the final
   CRLF, folds included); name and value are what a milter is sent (value without the
   space after the colon, folds as LF). */
struct milter_field {
	char *raw;
	size_t rawlen;
	char *name;
	char *value;
};

struct milter_msg {
	int fd; /* the message file, read back */
	uint64_t size;
	uint64_t body_off; /* where the body starts (after the empty line) */
	struct milter_field *f;
	size_t nf;
};

/* A change a milter asked for at the end of the message, kept in order. */
struct milter_mod {
	char cmd; /* SMFIR_ADDHEADER, ... */
	uint32_t index;
	char *name, *value;
};

struct milter_mods {
	struct milter_mod *v;
	size_t n;
	struct buf body; /* SMFIR_REPLBODY bytes */
	bool body_replaced;
	char *quarantine; /* the reason, or NULL */
};

/* Reads the header section of the message file fd (size bytes): 0, or -1 with *error_r. */
int milter_msg_read(struct milter_msg *mm, int fd, uint64_t size, const char **error_r);
void milter_msg_release(struct milter_msg *mm);

/* Keeps a copy of reply r (a change) in mods; leadspc: the milter's header values come with
   their own leading space (kept values always have it). -1 when the body replacement grows
   past max_body. */
int milter_mods_add(struct milter_mods *mods, const struct milter_reply *r, bool leadspc,
		    uint64_t max_body);
void milter_mods_release(struct milter_mods *mods);
/* Applies mods to s's transaction: header and body changes write a new message file in
   place of the old one, recipient and sender changes edit the envelope, a quarantine holds
   it. 0, or -1 (logged) when the new file could not be written. */
int milter_mods_apply(struct smtp_session *s, const struct milter_msg *mm,
		      const struct milter_mods *mods);

#endif
