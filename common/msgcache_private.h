/* msgcache_private.h — the builder's layout and limits, shared by msgcache.c (parsing,
 * BODYSTRUCTURE, blob) and msgcache_imap.c (IMAP strings, envelope, part fields). */
#ifndef HERON_MSGCACHE_PRIVATE_H
#define HERON_MSGCACHE_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/rfc5322.h"

#define MC_PARTS_MAX 1000              /* entities per message */
#define MC_DEPTH_MAX 32                /* nesting */
#define MC_HEADER_MAX (256 * 1024)     /* raw header block kept in the blob */
#define MC_FIELD_MAX (64 * 1024)       /* one field value */
#define MC_ARENA_MAX (4 * 1024 * 1024) /* rendered strings of one message */
#define MC_NONE UINT32_MAX

enum mc_env {
	MC_ENV_DATE,
	MC_ENV_SUBJECT,
	MC_ENV_FROM,
	MC_ENV_SENDER,
	MC_ENV_REPLY_TO,
	MC_ENV_TO,
	MC_ENV_CC,
	MC_ENV_BCC,
	MC_ENV_IN_REPLY_TO,
	MC_ENV_MESSAGE_ID,
	MC_ENV_N
};
enum mc_mime {
	MC_MIME_ID,
	MC_MIME_DESC,
	MC_MIME_CTE,
	MC_MIME_MD5,
	MC_MIME_DISP,
	MC_MIME_LANG,
	MC_MIME_LOC,
	MC_MIME_N
};

/* A string rendered into the arena; len 0 = not rendered (use the default). */
struct mc_span {
	uint32_t off, len;
};

struct mc_part {
	uint32_t parent, first_child, last_child, next_sibling;
	uint8_t kind;      /* enum rfc5322_kind */
	bool is_text;      /* text/ *: has a line count */
	bool is_multitype; /* multipart/ * (even when not split: then it has no children) */
	bool is_msgtype;   /* message/rfc822 (even when not parsed: then an empty one) */
	uint64_t header_off, header_size, body_off, body_size, lines;
	struct mc_span fields; /* leaf: type subtype params id desc enc; multipart: subtype */
	struct mc_span ext;    /* leaf: md5 dsp lang loc; multipart: params dsp lang loc */
	struct mc_span env;    /* roots: the ENVELOPE */
};

struct msgcache_builder {
	struct rfc5322_parser *ps;
	struct mc_part *parts; /* grown as parts begin, up to MC_PARTS_MAX */
	uint32_t nparts, parts_cap;
	uint64_t size, header_size;
	int64_t date;
	int date_tz;
	bool header_done, finished;
	struct buf arena;   /* rendered fields, extensions, envelopes */
	struct buf header;  /* the message's raw header block (prefix) */
	struct buf scratch; /* Content-Disposition parameters */
	struct buf body, bodystructure;
	/* fields of the header being parsed (first occurrence of each) */
	struct buf env[MC_ENV_N];
	bool env_seen[MC_ENV_N];
	struct buf mime[MC_MIME_N];
	bool mime_seen[MC_MIME_N];
};

/* Each appends to the arena (or o) and returns 0, or -1 when the ceiling was reached. */
int mc_render_fields(struct msgcache_builder *b, const struct rfc5322_part *p, bool multi);
int mc_render_ext(struct msgcache_builder *b, const struct rfc5322_part *p, bool multi);
int mc_render_envelope(struct msgcache_builder *b, struct buf *o);
/* An IMAP string: quoted when safe, else a literal; NUL bytes are dropped. */
int mc_put_string(struct buf *o, const char *p, size_t n);
int mc_put_nstring(struct buf *o, const struct buf *v, bool present);

#endif
