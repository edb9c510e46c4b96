/* usermodel.h — what mailload knows about each user's mailboxes (UIDVALIDITY, UIDNEXT, message
 * counts, UIDs it expunged) and the view of a selected folder during a session, checked
 * against every server response: a reply that contradicts what the server said before is an
 * error. Pure state, no I/O, so tests can feed it a contradicting server. */
#ifndef HERON_MAILLOAD_USERMODEL_H
#define HERON_MAILLOAD_USERMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "mailload/mailload.h"
#include "mailload/resp.h"

struct um_folder {
	uint32_t uidvalidity; /* 0: not seen yet */
	uint32_t uidnext;
	uint32_t exists;      /* at the end of the last session that selected it */
	uint32_t maxuid;      /* highest UID seen */
	uint32_t expunged[2]; /* UIDs this client expunged last: must never come back */
	bool known;
};

struct um_user {
	uint32_t id;
	uint8_t nfolders;
	struct um_folder f[ML_MAX_FOLDERS];
};

/* The selected folder during a session. */
struct um_view {
	struct um_folder *f;
	bool grows; /* INBOX and Sent receive mail from others: counts may only grow */
	bool selected;
	uint32_t exists;
	uint32_t cap;
	uint32_t *uid;     /* by seq-1; 0 unknown */
	uint8_t *flags;    /* by seq-1: bits known set */
	uint8_t *want;     /* by seq-1: bits we stored and must see */
	uint32_t expunges; /* EXPUNGE responses since our EXPUNGE command */
	uint32_t deleted;  /* messages we flagged \Deleted in this selection */
	uint32_t uidvalidity, uidnext;
};

void um_view_init(struct um_view *v);
void um_view_release(struct um_view *v);
/* Starts a selection of folder f (the user's record). grows: INBOX or Sent. */
void um_view_begin(struct um_view *v, struct um_folder *f, bool grows);
/* Each returns NULL, or a message naming the contradiction. */
const char *um_view_exists(struct um_view *v, uint32_t n);
const char *um_view_uidvalidity(struct um_view *v, uint32_t n);
const char *um_view_uidnext(struct um_view *v, uint32_t n);
const char *um_view_expunge(struct um_view *v, uint32_t seq);
const char *um_view_fetch(struct um_view *v, const struct imap_fetch *f);
/* After the tagged OK of SELECT/EXAMINE: checks the counts against the last session. */
const char *um_view_selected(struct um_view *v);
/* We stored +FLAGS bits on seq (a response must then show them). */
void um_view_want(struct um_view *v, uint32_t seq, uint8_t bits);
/* After the tagged OK of EXPUNGE: every message we deleted must have gone. */
const char *um_view_expunged(struct um_view *v);
/* Records the selection's final state in the folder. */
void um_view_end(struct um_view *v);
uint32_t um_view_seq_of_uid(const struct um_view *v, uint32_t uid);

#endif
