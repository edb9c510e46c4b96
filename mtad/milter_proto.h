/* milter_proto.h — the milter protocol (libmilter's), version 6, as bytes: packets to a
 * milter (option negotiation, macros, connect, HELO, MAIL, RCPT, DATA, headers, body, end of
 * body, abort, quit) written into a buf, the milter's replies parsed and checked out of a byte
 * buffer (every packet length capped before anything is kept), and the [milter] lists of
 * milters with their per-milter settings. No I/O: mtad/milter.c drives it on the event loop.
 *
 * A packet is a 4-byte big-endian length (of what follows), one command byte, and data; the
 * strings in the data end with a NUL. */
#ifndef HERON_MILTER_PROTO_H
#define HERON_MILTER_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define MILTER_VERSION 6
/* Body bytes per SMFIC_BODY packet (libmilter's default data limit). */
#define MILTER_CHUNK 65535
/* The longest reply packet taken (a REPLBODY chunk of a milter that negotiated 1M chunks,
   with its length word and command): longer ones are garbage, read no further. */
#define MILTER_REPLY_MAX ((1u << 20) + 16)

/* Commands (MTA to milter). */
enum {
	SMFIC_ABORT = 'A',
	SMFIC_BODY = 'B',
	SMFIC_CONNECT = 'C',
	SMFIC_MACRO = 'D',
	SMFIC_BODYEOB = 'E',
	SMFIC_HELO = 'H',
	SMFIC_HEADER = 'L',
	SMFIC_MAIL = 'M',
	SMFIC_EOH = 'N',
	SMFIC_OPTNEG = 'O',
	SMFIC_QUIT = 'Q',
	SMFIC_RCPT = 'R',
	SMFIC_DATA = 'T',
};

/* Replies (milter to MTA). */
enum {
	SMFIR_ADDRCPT = '+',
	SMFIR_DELRCPT = '-',
	SMFIR_ADDRCPT_PAR = '2',
	SMFIR_SHUTDOWN = '4',
	SMFIR_ACCEPT = 'a',
	SMFIR_REPLBODY = 'b',
	SMFIR_CONTINUE = 'c',
	SMFIR_DISCARD = 'd',
	SMFIR_CHGFROM = 'e',
	SMFIR_CONN_FAIL = 'f',
	SMFIR_ADDHEADER = 'h',
	SMFIR_INSHEADER = 'i',
	SMFIR_SETSYMLIST = 'l',
	SMFIR_CHGHEADER = 'm',
	SMFIR_PROGRESS = 'p',
	SMFIR_QUARANTINE = 'q',
	SMFIR_REJECT = 'r',
	SMFIR_SKIP = 's',
	SMFIR_TEMPFAIL = 't',
	SMFIR_REPLYCODE = 'y',
};

/* Actions a milter may ask for (SMFIF_*). */
#define SMFIF_ADDHDRS 0x01u
#define SMFIF_CHGBODY 0x02u
#define SMFIF_ADDRCPT 0x04u
#define SMFIF_DELRCPT 0x08u
#define SMFIF_CHGHDRS 0x10u
#define SMFIF_QUARANTINE 0x20u
#define SMFIF_CHGFROM 0x40u
#define SMFIF_ADDRCPT_PAR 0x80u
#define SMFIF_SETSYMLIST 0x100u
#define MILTER_ACTIONS 0x1ffu /* all of them: what Heron offers */

/* Protocol steps (SMFIP_*): what the milter does not want sent, or will not answer. */
#define SMFIP_NOCONNECT 0x01u
#define SMFIP_NOHELO 0x02u
#define SMFIP_NOMAIL 0x04u
#define SMFIP_NORCPT 0x08u
#define SMFIP_NOBODY 0x10u
#define SMFIP_NOHDRS 0x20u
#define SMFIP_NOEOH 0x40u
#define SMFIP_NR_HDR 0x80u
#define SMFIP_NOUNKNOWN 0x100u
#define SMFIP_NODATA 0x200u
#define SMFIP_SKIP 0x400u
#define SMFIP_RCPT_REJ 0x800u
#define SMFIP_NR_CONN 0x1000u
#define SMFIP_NR_HELO 0x2000u
#define SMFIP_NR_MAIL 0x4000u
#define SMFIP_NR_RCPT 0x8000u
#define SMFIP_NR_DATA 0x10000u
#define SMFIP_NR_UNKN 0x20000u
#define SMFIP_NR_EOH 0x40000u
#define SMFIP_NR_BODY 0x80000u
#define SMFIP_HDR_LEADSPC 0x100000u
/* The steps Heron offers to leave out or leave unanswered, and RCPT_REJ: the recipients
   mtad refused are sent too (with {rcpt_mailer} "error") to a milter that asks. */
#define MILTER_PROTOCOL 0x1fffffu

/* Macro stages (SMFIM_*), the index of a SETSYMLIST list. */
enum milter_stage {
	MILTER_ST_CONNECT,
	MILTER_ST_HELO,
	MILTER_ST_MAIL,
	MILTER_ST_RCPT,
	MILTER_ST_DATA,
	MILTER_ST_EOB,
	MILTER_ST_EOH,
	MILTER_NSTAGES
};

/* A reply, parsed in place: the pointers point into the bytes given to milter_reply_parse
   (valid while those are). Which fields are set depends on cmd. */
struct milter_reply {
	char cmd;
	const char *data; /* the packet's data (len bytes) */
	size_t len;
	/* OPTNEG */
	uint32_t version, actions, protocol;
	const char *symlist[MILTER_NSTAGES]; /* requested macros per stage, or NULL */
	/* REPLYCODE: code and the whole text ("550 5.7.1 text", NUL-terminated) */
	int code;
	const char *text;
	/* CHGHEADER, INSHEADER: index; header replies: name and value; ADDRCPT, DELRCPT,
	   CHGFROM, ADDRCPT_PAR: the address in name, ESMTP arguments in value (or NULL);
	   QUARANTINE: the reason in value */
	uint32_t index;
	const char *name, *value;
};

/* One reply packet from p[0..n): 1 and *used_r (its size) when a whole valid one is there,
   0 when more bytes are needed, -1 with *error_r for garbage (a length of 0 or past
   MILTER_REPLY_MAX, an unknown command, data that does not fit the command). */
int milter_reply_parse(const unsigned char *p, size_t n, struct milter_reply *r, size_t *used_r,
		       const char **error_r);

/* Packets, appended to b (a buf big enough for them: -1 when b's ceiling is reached). */
int milter_put(struct buf *b, char cmd, const void *data, size_t len);
int milter_put_optneg(struct buf *b, uint32_t version, uint32_t actions, uint32_t protocol);
/* A command of NUL-terminated strings (HELO, MAIL and RCPT arguments, a header's name and
   value). */
int milter_put_strs(struct buf *b, char cmd, const char *const *strs, size_t n);
/* SMFIC_MACRO for command stage_cmd: names[i] = values[i] for i < n. */
int milter_put_macros(struct buf *b, char stage_cmd, const char *const *names,
		      const char *const *values, size_t n);
/* SMFIC_CONNECT: family '4', '6', 'L' (unix) or 'U' (unknown: no port, no address). */
int milter_put_connect(struct buf *b, const char *hostname, char family, uint16_t port,
		       const char *addr);

/* The text of a REPLYCODE reply (code, and its text "550 5.7.1 why", as parsed) as SMTP
   reply lines in out: "550 5.7.1 why", a multi-line one with its dashes and LF between the
   lines, the code on every line, an enhanced code added where the milter gave none; cut to
   the whole lines that fit in size (at least 8) bytes, the last of them made final. */
void milter_reply_lines(int code, const char *text, char *out, size_t size);

/* Whether macro name (as "{name}" or "j") is in a SETSYMLIST list (space separated; braces
   optional on either side). */
bool milter_symlist_has(const char *list, const char *name);

/* What a transaction gets when a milter fails (down, timeout, garbage). */
enum milter_action { MILTER_TEMPFAIL, MILTER_ACCEPT, MILTER_REJECT };

/* One milter of a [milter] list. */
struct milter_spec {
	char *text; /* as configured: "inet:127.0.0.1:11332", "unix:/run/m.sock" */
	bool unix_path;
	char *host; /* inet: host or address (no brackets); unix: the path */
	uint16_t port;
	int64_t connect_ms, command_ms, content_ms;
	enum milter_action default_action;
};

struct milter_defaults {
	int64_t connect_ms, command_ms, content_ms;
	enum milter_action default_action;
};

/* Parses a list of milters: items separated by white space or commas, each
   "inet:HOST:PORT", "inet:[V6ADDR]:PORT", "inet6:..." or "unix:PATH", or a group
   "{ ITEM, connect_timeout=D, command_timeout=D, content_timeout=D,
   default_action=tempfail|accept|reject }" overriding d for that milter.
   0 with *specs_r (free with milter_specs_free) and *n_r, or -1 with *error_r (malloc'd). */
int milter_specs_parse(const char *text, const struct milter_defaults *d,
		       struct milter_spec **specs_r, size_t *n_r, char **error_r);
void milter_specs_free(struct milter_spec **specs, size_t n);

#endif
