/* cte.h — content-transfer-encodings (RFC 2045): the names, and an incremental base64 /
 * quoted-printable decoder whose state crosses chunk boundaries (cte.c). Used by imapd's
 * BINARY and by the searchable text of a message (mimetext.h) that SEARCH and the store's
 * full-text index read. */
#ifndef HERON_CTE_H
#define HERON_CTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cte { CTE_IDENTITY, CTE_BASE64, CTE_QP, CTE_UNKNOWN };

/* Quoted-printable white space held back until the line goes on (trailing white space is
   transport padding, deleted: RFC 2045 6.7); a longer run is written out. A decoder writes
   at most this many bytes more than it reads (CTE_DECODE_LEAD). */
#define CTE_QP_WS_MAX 76
#define CTE_DECODE_LEAD (CTE_QP_WS_MAX + 4)
/* The pieces cte_decode_measure reads a file in. */
#define CTE_CHUNK (64 * 1024)

/* An incremental decoder: state carried across chunks. */
struct cte_decoder {
	enum cte cte;
	uint32_t acc; /* base64 bits not yet output */
	unsigned bits;
	char qp[3]; /* quoted-printable "=X" pending */
	unsigned nqp;
	char ws[CTE_QP_WS_MAX]; /* quoted-printable white space pending */
	unsigned nws;
};

/* The CTE named by a Content-Transfer-Encoding value (absent: identity). */
enum cte cte_parse(const char *v, size_t len);
void cte_decoder_init(struct cte_decoder *d, enum cte cte);
/* Decodes len bytes of in to out, which has room for len + CTE_DECODE_LEAD bytes; returns
   bytes written. out may overlap in when it starts CTE_DECODE_LEAD or more bytes before it
   (decoding in place). */
size_t cte_decode(struct cte_decoder *d, const char *in, size_t len, char *out);
/* At the end of the data: what is still pending (at most 3 bytes), written to out. */
size_t cte_decode_finish(struct cte_decoder *d, char *out);
/* The decoded size of file bytes [off, off + len) and whether they decode to a NUL, read in
   CTE_CHUNK pieces through scratch (CTE_CHUNK + CTE_DECODE_LEAD bytes): 0, or -1 when the
   file cannot be read. */
int cte_decode_measure(int fd, uint64_t off, uint64_t len, enum cte cte, char *scratch,
		       uint64_t *size_r, bool *nul_r);

#endif
