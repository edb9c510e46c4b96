/* authres.h — the Authentication-Results header field (RFC 8601): written with our
 * authserv-id, one resinfo per method; and the test that finds an existing field claiming
 * our authserv-id (forged or stale: removed before ours goes in). */
#ifndef HERON_AUTHRES_H
#define HERON_AUTHRES_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "mailauth/mailauth.h"

/* "Authentication-Results: ID" */
void authres_start(struct buf *out, const char *authserv_id);
/* ";\r\n\tmethod=result (reason) props"; reason NULL for none, props "" for none. */
void authres_add(struct buf *out, const char *method, enum ma_result r, const char *reason,
		 const char *props);
/* "; none" when nothing was added, then CRLF. */
void authres_end(struct buf *out, size_t nresults);
/* Whether the raw field (name and value) is an Authentication-Results whose authserv-id is id
   (case-insensitive; comments skipped). */
bool authres_claims(const char *raw, size_t len, const char *authserv_id);
/* A property value as RFC 8601 allows it: as is when it is a token or an address, else in
   quotes (", \ and control bytes dropped). Into out. */
void authres_value(const char *v, char *out, size_t size);

#endif
